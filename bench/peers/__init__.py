"""Peers the benches measure hookgate against, served the way hookgate is served."""
