"""The one runtime that builds everything a deployment serves: runs and their executors, the
approvals and their channels, the callers' access. The interfaces above it (the HTTP server,
the MCP gateway, the demo and the CLI) each start one and know nothing of each other."""
