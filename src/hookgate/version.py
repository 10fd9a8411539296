"""The release number of this hookgate, in a module of its own so that any package (the MCP
server's handshake, say) can name it without importing the top-level re-exports.
"""

__version__ = "0.1.0"
