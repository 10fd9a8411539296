"""Downstream MCP tools as hookgate `Tool` objects, and guarded outcomes back as MCP results.

A mapped tool's callable is the downstream ``tools/call``; like every tool it is invoked only
by the guarded path. ``readOnlyHint``/``destructiveHint`` decide ``writes`` unless the
configuration says otherwise; gate rules become the tool's ``requires_confirmation``, read
at each call in the modes then in force (the rules of hookgate.external.policy decide which
apply; one in shadow mode only records what it would have decided, `with_shadow_rules`).
A result keeps the contract its tool declared: a successful result of a tool with an
``outputSchema`` always carries structured content that validates against it (see
`result_of`).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

import mcp_types as types
from pydantic import ValidationError

from hookgate.config.mcp_servers import GateRule, McpServerSpec, tool_name
from hookgate.external.policy import CallRules, RuleFlags, ToolRule, shadow_recorder
from hookgate.hooks.facts import NOT_TRACED, PROVENANCE_KEY
from hookgate.hooks.model import HookContext, HookPoint
from hookgate.matching import Condition, ToolMatcher
from hookgate.mcp.downstream import DownstreamServer
from hookgate.mcp.errors import DownstreamToolError
from hookgate.policies.shadow import Mode, ShadowDecision, mode_of
from hookgate.tools.calls import ToolOutcome
from hookgate.tools.errors import ToolArgumentsError
from hookgate.tools.guarded_call import GuardedCall, RefusedCall
from hookgate.tools.json_schema import schema_problem
from hookgate.tools.tool import ConfirmationRule, Tool

log = logging.getLogger("hookgate.mcp.mapping")

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
    """The tool's ``requires_confirmation``: a per-tool flag, else the server's flag, else,
    when gate rules name the tool, whether they ask for a call's arguments (`needs_of`,
    read when the call is made: a `hookgate policy reload` switches a rule's mode for the
    next call, and a rule in shadow mode never makes the tool ask)."""
    override = spec.tools.get(listed.name)
    if override is not None and override.requires_confirmation is not None:
        return override.requires_confirmation
    if isinstance(spec.requires_confirmation, bool):
        return spec.requires_confirmation
    if _GateRules.of(listed, spec, agent_id, org_id) is None:
        return False  # no rule names the tool
    return functools.partial(needs_of, listed, spec, agent_id, org_id)


def needs_of(listed: types.Tool, spec: McpServerSpec, agent_id: str, org_id: str | None,
             args: Mapping[str, Any]) -> bool:
    """Whether the server's gate rules, in the modes in force now, ask for a person for
    these arguments (a rule whose condition or mode cannot be read asks)."""
    gate = _GateRules.of(listed, spec, agent_id, org_id)
    return gate is not None and gate.flags(args).requires_confirmation


def confirmation_reason_of(listed: types.Tool, spec: McpServerSpec, agent_id: str,
                           org_id: str | None, args: Mapping[str, Any]) -> str | None:
    """Which gate rules of the server ask for a person for these arguments, in the
    approver's words (``mcp_servers[git].requires_confirmation[0] (matcher git_commit):
    commits change the shared history``); None when no rule names the tool."""
    override = spec.tools.get(listed.name)
    if override is not None and override.requires_confirmation is not None:
        return (f"mcp_servers[{spec.id}].tools.{listed.name}.requires_confirmation is true"
                if override.requires_confirmation else None)
    if spec.requires_confirmation is True:
        return f"mcp_servers[{spec.id}].requires_confirmation is true: every call needs a person"
    gate = _GateRules.of(listed, spec, agent_id, org_id)
    return None if gate is None else gate.flags(args).reason


def shadow_of(listed: types.Tool, spec: McpServerSpec, agent_id: str, org_id: str | None,
              args: Mapping[str, Any]) -> tuple[ShadowDecision, ...]:
    """What the server's gate rules in shadow mode that apply to these arguments would have
    decided (``ask``, with the rule's reason); none when a per-tool flag decides."""
    override = spec.tools.get(listed.name)
    if override is not None and override.requires_confirmation is not None:
        return ()
    gate = _GateRules.of(listed, spec, agent_id, org_id)
    return () if gate is None else gate.flags(args).shadow


class _GateRules:
    """The server's gate rules whose matcher names one tool, as the gate rules of the other
    paths (`CallRules`: which apply to a call, what the enforcing ones ask, what the ones in
    shadow mode would have decided). Built for each call, so each rule's mode is the one in
    force at that moment."""

    def __init__(self, name: str, rules: CallRules, agent_id: str,
                 org_id: str | None) -> None:
        self.name = name
        self.rules = rules
        self.agent_id = agent_id
        self.org_id = org_id

    @classmethod
    def of(cls, listed: types.Tool, spec: McpServerSpec, agent_id: str,
           org_id: str | None) -> _GateRules | None:
        if isinstance(spec.requires_confirmation, bool):
            return None
        rules = tuple(_tool_rule(f"mcp_servers[{spec.id}].requires_confirmation[{i}]", rule)
                      for i, rule in enumerate(spec.requires_confirmation)
                      if ToolMatcher.parse(rule.matcher).matches(listed.name))
        if not rules:
            return None
        return cls(tool_name(spec.id, listed.name), CallRules(rules), agent_id, org_id)

    def flags(self, args: Mapping[str, Any]) -> RuleFlags:
        # A condition that raises counts as holding (fail closed, as needs_confirmation).
        probe = HookContext(hook_point=HookPoint.PRE_TOOL_USE, tool_name=self.name,
                            tool_args=dict(args), agent_id=self.agent_id, user_id=None,
                            # Read before the call is traced: a `when` over provenance holds.
                            metadata={"org_id": self.org_id, PROVENANCE_KEY: NOT_TRACED})
        # Only requires_confirmation, its reason and the shadow decisions are read.
        return self.rules.flags(probe, writes=True, connector="")


def _tool_rule(named: str, rule: GateRule) -> ToolRule:
    # The matcher named the downstream tool (chosen in `_GateRules.of`); the rule then
    # applies to every call of it its ``when`` holds for.
    return ToolRule(ToolMatcher.parse("*"),
                    Condition(rule.when) if rule.when is not None else None,
                    requires_confirmation=True, writes=None, connector=None,
                    described=rule.describe(named), mode=_mode_now(named, rule),
                    reason=rule.reason, named=named)


def _mode_now(named: str, rule: GateRule) -> Mode:
    # The rule's mode in force (`mode_of`, the one reader); one that cannot be read
    # enforces (fail closed: the rule asks as it would enforcing, never lets a call by).
    try:
        return mode_of(rule.mode, named, rule)
    except Exception:
        log.exception("%s: its mode cannot be read; it enforces", named)
        return "enforce"


class McpTool(Tool):
    """A downstream tool: its arguments are checked against the full input schema and must
    be plain JSON (`Tool.validate`: finite numbers, no lone surrogates, bounded depth) before
    any hook sees them, so the person approving sees exactly what the downstream server will
    receive."""

    #: The gate rules' words for given arguments (`confirmation_reason_of`).
    reason_for: Callable[[Mapping[str, Any]], str | None] | None = None
    #: What its gate rules in shadow mode would decide for given arguments (`shadow_of`).
    shadow_for: Callable[[Mapping[str, Any]], tuple[ShadowDecision, ...]] | None = None

    def for_call(self, args: Mapping[str, Any]) -> McpTool:
        """This tool for one call: its ``confirmation_reason`` names the gate rules that
        ask for a person for ``args`` (the approver reads them on the card)."""
        if self.reason_for is None:
            return self
        called = dataclasses.replace(self, confirmation_reason=self.reason_for(args))
        called.reason_for, called.shadow_for = self.reason_for, self.shadow_for
        return called

    def validate(self, args: Any) -> dict[str, Any]:
        checked = super().validate(args)
        problem = schema_problem(self.parameters, checked, whose="the server's input")
        if problem is not None:
            raise ToolArgumentsError(f"invalid arguments for '{self.name}': {problem}")
        return checked


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
    tool = McpTool(
        name=tool_name(spec.id, downstream_name),
        description=listed.description or "",
        parameters=schema,
        _fn=call_downstream,
        requires_confirmation=confirmation_of(listed, spec, agent_id, org_id),
        connector=f"mcp__{spec.id}",
        writes=writes_of(listed, spec),
        untrusted_output=spec.untrusted_output,
    )
    tool.reason_for = functools.partial(confirmation_reason_of, listed, spec, agent_id, org_id)
    tool.shadow_for = functools.partial(shadow_of, listed, spec, agent_id, org_id)
    return tool


def with_shadow_rules(made: GuardedCall | RefusedCall) -> GuardedCall | RefusedCall:
    """``made`` with what its tool's gate rules in shadow mode would have decided about its
    (converted) arguments: the guarded path records it on the call's context (trace, audit
    detail, span, metric), and it never changes the call."""
    if not isinstance(made, GuardedCall) or not isinstance(made.tool, McpTool) \
            or made.tool.shadow_for is None:
        return made
    decisions = made.tool.shadow_for(made.arguments)
    return made.with_shadow(shadow_recorder(decisions)) if decisions else made


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
    problem = schema_problem(output_schema, result.structured_content,
                             whose="the tool's output")
    if problem is not None:
        return f"does not match the tool's output schema ({problem})"
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
