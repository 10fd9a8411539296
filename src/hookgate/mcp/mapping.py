"""Downstream MCP tools as hookgate `Tool` objects, and guarded outcomes back as MCP results.

A mapped tool's callable is the downstream ``tools/call``; like every tool it is invoked only
by the guarded path. ``readOnlyHint``/``destructiveHint`` decide ``writes`` unless the
configuration says otherwise; gate rules become the tool's ``requires_confirmation``. A
result keeps the contract its tool declared: a successful result of a tool with an
``outputSchema`` always carries structured content that validates against it (see
`result_of`).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import mcp_types as types
from pydantic import ValidationError

from hookgate.config.mcp_servers import McpServerSpec, tool_name
from hookgate.hooks.model import HookContext, HookPoint
from hookgate.matching import Condition, ToolMatcher
from hookgate.mcp.downstream import DownstreamServer
from hookgate.mcp.errors import DownstreamToolError
from hookgate.tools.calls import ToolOutcome
from hookgate.tools.errors import ToolArgumentsError
from hookgate.tools.tool import ConfirmationRule, Tool

#: ``_meta`` key of a gateway result: how the guarded path decided the call.
OUTCOME_META = "io.hookgate/outcome"


def writes_of(listed: types.Tool, spec: McpServerSpec) -> bool:
    """Whether a downstream tool changes anything, for the read-only guard.

    The configuration wins; else a tool is read-only only when it says so
    (``readOnlyHint``) and does not also claim to be destructive.
    """
    override = spec.tools.get(listed.name)
    if override is not None and override.writes is not None:
        return override.writes
    hints = listed.annotations
    if hints is None:
        return True
    return not hints.read_only_hint or hints.destructive_hint is True


def confirmation_of(listed: types.Tool, spec: McpServerSpec, agent_id: str,
                    org_id: str | None) -> ConfirmationRule:
    """The tool's ``requires_confirmation``: a per-tool flag, else the server's rules."""
    override = spec.tools.get(listed.name)
    if override is not None and override.requires_confirmation is not None:
        return override.requires_confirmation
    rules = spec.requires_confirmation
    if isinstance(rules, bool):
        return rules
    conditions: list[Condition] = []
    for rule in rules:
        if not ToolMatcher.parse(rule.matcher).matches(listed.name):
            continue
        if rule.when is None:
            return True
        conditions.append(Condition(rule.when))
    if not conditions:
        return False
    name = tool_name(spec.id, listed.name)

    def needs(args: Mapping[str, Any]) -> bool:
        # Tool.needs_confirmation treats a condition that raises as "needs approval".
        ctx = HookContext(hook_point=HookPoint.PRE_TOOL_USE, tool_name=name,
                          tool_args=dict(args), agent_id=agent_id, user_id=None,
                          metadata={"org_id": org_id})
        return any(c.holds(ctx) for c in conditions)

    return needs


class McpTool(Tool):
    """A downstream tool: its arguments are checked against the full input schema and must
    be plain JSON (`Tool.validate`: finite numbers, no lone surrogates, bounded depth) before
    any hook sees them, so the person approving sees exactly what the downstream server will
    receive."""

    def validate(self, args: Any) -> dict[str, Any]:
        checked = super().validate(args)
        problem: str | None = None
        try:
            error = jsonschema.exceptions.best_match(
                _validator(json.dumps(self.parameters, sort_keys=True)).iter_errors(checked))
        except jsonschema.exceptions.SchemaError as exc:
            problem = f"the server's input schema is invalid: {exc.message}"
        else:
            if error is not None:
                where = ".".join(str(p) for p in error.absolute_path) or "(arguments)"
                problem = f"{where}: {error.message}"
        if problem is not None:
            raise ToolArgumentsError(f"invalid arguments for '{self.name}': {problem}")
        return checked


@functools.lru_cache(maxsize=512)
def _validator(schema_json: str) -> Any:
    schema = json.loads(schema_json)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    cls.check_schema(schema)
    return cls(schema)


def gateway_tool(server: DownstreamServer, listed: types.Tool, agent_id: str,
                 org_id: str | None) -> Tool:
    """The hookgate Tool standing for ``listed`` on ``server``, for one agent."""
    spec = server.spec
    downstream_name = listed.name

    async def call_downstream(**args: Any) -> dict[str, Any]:
        result = await server.call_tool(downstream_name, args)
        if result.is_error:
            raise DownstreamToolError(_text_of(result) or "the tool reported an error")
        out: dict[str, Any] = {"content": [
            block.model_dump(mode="json", by_alias=True, exclude_none=True)
            for block in result.content]}
        if result.structured_content is not None:
            out["structuredContent"] = result.structured_content
        return out

    schema = dict(listed.input_schema) if listed.input_schema else {"type": "object"}
    return McpTool(
        name=tool_name(spec.id, downstream_name),
        description=listed.description or "",
        parameters=schema,
        _fn=call_downstream,
        requires_confirmation=confirmation_of(listed, spec, agent_id, org_id),
        connector=f"mcp__{spec.id}",
        writes=writes_of(listed, spec),
    )


def listed_tool(tool: Tool, listed: types.Tool) -> types.Tool:
    """What ``tools/list`` shows of a gateway tool: the downstream entry under its new name."""
    hints = listed.annotations or types.ToolAnnotations()
    return listed.model_copy(update={
        "name": tool.name,
        "annotations": hints.model_copy(update={"read_only_hint": not tool.writes}),
        "meta": None,
    })


def result_of(outcome: ToolOutcome, *, note: str | None = None,
              request_id: str | None = None,
              output_schema: Mapping[str, Any] | None = None) -> types.CallToolResult:
    """The MCP result for a guarded outcome: the downstream content when the call ran and
    no hook rewrote it, else the observation text (blocked, failed, truncated...).

    MCP requires every successful result of a tool with an ``output_schema`` to carry
    structured content that validates against it (the official client raises otherwise).
    When a PostToolUse hook rewrote such a result (cut it to size, redacted part of it) so
    that it no longer does, the rewritten text comes back as an ``isError`` result saying
    why: clients never validate those, and nothing the hooks removed reappears.
    """
    meta: dict[str, Any] = {OUTCOME_META: {
        "status": outcome.status, "allowed": outcome.allowed,
        "blocked_by": outcome.blocked_by, "request_id": request_id,
    }}
    text = outcome.observation if note is None else f"{outcome.observation}\n{note}"
    if outcome.status == "ok":
        parsed = _downstream_result(outcome.observation)
        problem = _contract_problem(parsed, output_schema)
        if parsed is not None and problem is None:
            parsed.meta = meta
            return parsed
        if problem is not None:
            meta[OUTCOME_META]["result_rewritten"] = problem
            return types.CallToolResult(content=[types.TextContent(text=(
                f"{text}\n[hookgate: the tool ran, but its result as the hooks left it {problem}; "
                "it is returned as text in an error result]"))], is_error=True, _meta=meta)
    return types.CallToolResult(content=[types.TextContent(text=text)],
                                is_error=outcome.status != "ok", _meta=meta)


def _contract_problem(result: types.CallToolResult | None,
                      output_schema: Mapping[str, Any] | None) -> str | None:
    # Why ``result`` breaks its tool's declared output schema, or None when it keeps it.
    if output_schema is None:
        return None
    if result is None or result.structured_content is None:
        return "carries no structured content for the tool's output schema"
    try:
        error = jsonschema.exceptions.best_match(
            _validator(json.dumps(output_schema, sort_keys=True)).iter_errors(
                result.structured_content))
    except jsonschema.exceptions.SchemaError as exc:
        return f"cannot be checked: the tool's output schema is invalid ({exc.message})"
    if error is not None:
        return f"does not match the tool's output schema ({error.message[:300]})"
    return None


def _downstream_result(observation: str) -> types.CallToolResult | None:
    try:
        data = json.loads(observation)
    except ValueError:
        return None
    if not isinstance(data, dict) or set(data) - {"content", "structuredContent"} or \
            not isinstance(data.get("content"), list):
        return None
    try:
        return types.CallToolResult.model_validate(data)
    except ValidationError:
        return None


def _text_of(result: types.CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, types.TextContent))
