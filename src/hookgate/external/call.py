"""The typed call of the external path: built once per ask from what a caller sent (the
guarded-call API, a Claude Code or Codex hook) by the guarded path's one constructor
(`hookgate.tools.guarded_call.new_call`), with the tool's declaration and the validated,
converted arguments; the external core decides it and observes its result.

A tool the agent declares in its hookgate configuration (``agent.tools``) is that
declaration: its own approval condition, parameter types and connector decide, and the
agent's rules may only add a person's approval. Any other tool is a stand-in built from the
rules and the JSON schema the caller sends (`SchemaTool`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hookgate.agent import Agent
from hookgate.external.policy import (
    ANY_OBJECT,
    TOOL_SCHEMA_KEY,
    CallRules,
    ExternalToolRan,
    RuleFlags,
    probe_context,
    shadow_recorder,
)
from hookgate.external.schema_tool import SchemaTool
from hookgate.policies.shadow import ShadowDecision
from hookgate.tools.calls import CallIdentity, ToolCall
from hookgate.tools.errors import ToolArgumentsError
from hookgate.tools.guarded_call import GuardedCall, RefusedCall, new_call
from hookgate.tools.tool import Tool

__all__ = ["ACTING_SERVICE_KEY", "ExternalCall", "build_call", "tool_call"]

#: The hooks' metadata key naming the service identity that asked a call acting for someone
#: else (None: the initiator asked themself); the audit row records it beside the initiator.
ACTING_SERVICE_KEY = "acting_service"
#: The connector of a tool no declaration and no rule names (never the client's header).
DEFAULT_CONNECTOR = "guarded_calls"


@dataclass(frozen=True, slots=True)
class ExternalCall:
    """One call from outside: the agent (whose hooks decide) and the typed call every
    caller hands to the guarded path (`GuardedCall`, made by `new_call`): who asks, whom it
    acts for, the session, the tool as declared and the converted arguments."""

    agent: Agent
    call: GuardedCall

    @property
    def identity(self) -> CallIdentity:
        return self.call.identity

    @property
    def user_id(self) -> str | None:
        """Who asks: the token's user (a person, or a service identity)."""
        return self.call.asker

    @property
    def initiator(self) -> str | None:
        """Whom the call acts for (the gate's requester)."""
        return self.call.initiator

    @property
    def run_id(self) -> str:
        return self.call.run_id

    @property
    def call_id(self) -> str:
        return self.call.call_id

    @property
    def tool(self) -> Tool:
        return self.call.tool

    @property
    def arguments(self) -> dict[str, Any]:
        return self.call.arguments

    @property
    def metadata(self) -> Mapping[str, Any]:
        """Request facts for the hooks (the framework, Claude Code's cwd, the schema, ...)."""
        return self.call.metadata

    @property
    def tool_call(self) -> ToolCall:
        return self.call.tool_call


def build_call(agent: Agent, rules: CallRules, *, user_id: str, initiator: str | None,
               org_id: str | None,
               session_id: str, call_id: str, run_id: str, tool_name: str,
               arguments: Mapping[str, Any], writes: bool, connector: str,
               schema: Mapping[str, Any] | None = None, description: str | None = None,
               metadata: Mapping[str, Any] | None = None, depth: int = 0,
               parent_session: str | None = None, parent_agent_id: str | None = None,
               transcript_path: str | None = None, checked: bool = True,
               facts_session: str | None = None) -> ExternalCall:
    """The typed call, made by the one constructor (`new_call`). ``writes``/``connector``:
    a stand-in tool's defaults, which the rules may change. ``checked``: validate and
    convert ``arguments`` (ToolArgumentsError says what is wrong); False for arguments that
    were (a call's final arguments, reported). ``initiator``: whom the call acts for (the
    ``user_id`` of the call's identity); when it is not ``user_id`` (a service identity
    asks), the hooks read the asker as ``metadata.acting_service``. ``org_id``: the org the
    asker belongs to when asking (the agent's org wins). ``facts_session``: the session whose
    facts the call shares (a sub-agent's: its root session's run).
    HookBuildError: the agent's rules cannot be applied."""
    declared = agent.toolbox().get(tool_name)
    facts = dict(metadata or {})
    facts[ACTING_SERVICE_KEY] = user_id if initiator != user_id else None
    if declared is not None:
        base: Tool = declared
        facts[TOOL_SCHEMA_KEY] = declared.parameters
        facts["tool_description"] = declared.description or None
    else:
        base = SchemaTool(name=tool_name, description=description or "",
                          parameters=dict(schema) if schema else ANY_OBJECT,
                          _fn=_never_run)
        facts[TOOL_SCHEMA_KEY] = dict(schema) if schema is not None else None
        facts["tool_description"] = description

    shadow: list[ShadowDecision] = []

    def shaped(tool: Tool, args: dict[str, Any]) -> Tool:
        # The rules read the converted arguments; they may only add a person's approval
        # to a declared tool, and give a stand-in its flags. Rules in shadow mode give
        # nothing: what they would decide goes with the call, for its context.
        probe = probe_context(tool_name, args, agent, initiator, facts)
        if declared is not None:
            flags = rules.flags(probe, writes=declared.writes,
                                connector=declared.connector or connector)
            shadow.extend(flags.shadow)
            return _declared_with_rules(declared, flags)
        flags = rules.flags(probe, writes=writes, connector=connector)
        shadow.extend(flags.shadow)
        return rules.stand_in(tool_name, flags, schema=schema, description=description)

    identity = CallIdentity(agent_id=agent.id, user_id=initiator,
                            org_id=agent.org_id or org_id, run_id=run_id,
                            conversation_id=session_id, execution_path="external",
                            require_confirmation_for_all=agent.require_confirmation_for_all,
                            parent_agent_id=parent_agent_id, depth=depth,
                            parent_session=parent_session, transcript_path=transcript_path,
                            facts_session=facts_session)
    made = new_call(identity, ToolCall(call_id, tool_name, dict(arguments)), {tool_name: base},
                    asker=user_id, metadata=facts, shape=shaped, checked=checked)
    if isinstance(made, RefusedCall):
        # The one tool is there: only its arguments can be refused.
        raise made.error or ToolArgumentsError(made.message)
    if shadow:
        made = made.with_shadow(shadow_recorder(tuple(shadow)))
    return ExternalCall(agent, made)


def tool_call(call: ExternalCall, arguments: dict[str, Any]) -> ToolCall:
    """The call with other (final) arguments, as the hooks' metadata names it."""
    return ToolCall(call.call_id, call.tool.name, arguments)


def _declared_with_rules(declared: Tool, flags: RuleFlags) -> Tool:
    # The declaration decides (its condition, types, connector, writes); a rule that asks
    # for a person adds that, it never removes the declaration's own condition.
    if not flags.requires_confirmation:
        return declared
    reason = "; ".join(r for r in (declared.confirmation_reason, flags.reason) if r)
    return dataclasses.replace(declared, requires_confirmation=True,
                               confirmation_reason=reason or None)


def _never_run(**_: Any) -> None:
    raise ExternalToolRan("an external agent's tools run in that agent, never in hookgate")
