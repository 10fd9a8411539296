"""The hookgate server: HTTP API, live run streams, the web inbox, channel callbacks."""
