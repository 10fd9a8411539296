"""Errors raised while describing or calling tools."""

from __future__ import annotations


class ToolError(Exception):
    """Base class of tool errors."""


class ToolDefinitionError(ToolError):
    """A function cannot be turned into a Tool (e.g. a parameter without a type hint)."""


class UnknownToolError(ToolError):
    """The model named a tool the agent does not have."""


class ToolArgumentsError(ToolError):
    """The arguments do not match the tool's parameters."""
