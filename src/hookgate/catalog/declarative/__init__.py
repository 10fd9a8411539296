"""Declarative hooks: shell commands, Python functions and HTTP endpoints that speak Claude
Code's hook protocol, declared per agent under ``command_hooks``, ``python_hooks`` and
``http_hooks`` with a tool matcher and an optional ``when`` condition.
"""

from hookgate.catalog.declarative.build import add_declarative_hooks
from hookgate.catalog.declarative.protocol import HookProtocolError, SessionStopped

__all__ = ["HookProtocolError", "SessionStopped", "add_declarative_hooks"]
