"""Slack: approval messages with Block Kit buttons, clicks via the interactivity URL."""
