"""Whether the MCP SDK, the ``hookgate[mcp]`` extra, is installed: the one module of the
gateway that imports without it, so the server and the CLI can say what is missing in one
line instead of failing on an import deep inside."""

from __future__ import annotations

import importlib.util

#: What to install for the gateway (SPEC §8: the MCP SDK is an extra, not the core).
INSTALL_HINT = "pip install 'hookgate[mcp]'"


def mcp_installed() -> bool:
    """Whether ``import mcp`` would find the SDK."""
    try:
        return importlib.util.find_spec("mcp") is not None
    except (ImportError, ValueError):
        return False


def missing_sdk() -> str:
    """The one line saying the gateway needs the extra."""
    return f"the MCP gateway needs the MCP SDK, which is not installed: {INSTALL_HINT}"
