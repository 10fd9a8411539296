"""The MCP gateway: downstream MCP servers' tools behind hookgate's hooks and approval gate,
served to any MCP client over streamable HTTP (``/mcp/{agent_id}``) or stdio."""
