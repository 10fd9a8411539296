"""Shared fixtures. Test modules build what they need from real components."""
