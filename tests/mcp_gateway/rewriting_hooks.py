"""A PostToolUse hook that redacts one key of an MCP tool's result wherever it appears: in the
structured content and inside the JSON of its text blocks (declared as
``tests.mcp_gateway.rewriting_hooks:RedactKey`` with ``params: {key: ...}``)."""

from __future__ import annotations

import copy
import json
from typing import Any

from hookgate import HookContext, HookResult, PostToolUseHook

REDACTED = "[REDACTED]"


class RedactKey(PostToolUseHook):
    name = "redact_key"

    def __init__(self, key: str) -> None:
        self.key = key

    async def execute(self, ctx: HookContext) -> HookResult:
        if not isinstance(ctx.tool_result, dict):
            return HookResult()
        return HookResult(modified_result=self._redacted(copy.deepcopy(ctx.tool_result)))

    def _redacted(self, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: REDACTED if k == self.key else self._redacted(v)
                    for k, v in value.items()}
        if isinstance(value, list):
            return [self._redacted(v) for v in value]
        if isinstance(value, str) and value.lstrip().startswith("{"):
            try:
                inner = json.loads(value)
            except ValueError:
                return value
            return json.dumps(self._redacted(inner), indent=2)
        return value


class CountsItsCalls(RedactKey):
    """A hook that keeps state: it marks ``key`` with how many calls this instance has seen
    (``seen N``), so a caller can tell whether one instance served more than one call."""

    name = "counts_its_calls"

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.calls = 0

    async def execute(self, ctx: HookContext) -> HookResult:
        self.calls += 1
        if not isinstance(ctx.tool_result, dict):
            return HookResult()
        return HookResult(modified_result=self._marked(copy.deepcopy(ctx.tool_result)))

    def _marked(self, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: f"seen {self.calls}" if k == self.key else self._marked(v)
                    for k, v in value.items()}
        if isinstance(value, list):
            return [self._marked(v) for v in value]
        return value
