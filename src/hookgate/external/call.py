"""The typed call of the external path: built once per ask from what a caller sent (the
guarded-call API, a Claude Code hook), with the tool's declaration and the validated,
converted arguments; the external core decides it and observes its result.

A tool the agent declares in its hookgate configuration (``agent.tools``) is that
declaration: its own approval condition, parameter types and connector decide, and the
agent's rules may only add a person's approval. Any other tool is a stand-in built from the
rules and the JSON schema the caller sends (`SchemaTool`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hookgate.agent import Agent
from hookgate.external.policy import (
    TOOL_SCHEMA_KEY,
    CallRules,
    ExternalToolRan,
    RuleFlags,
    probe_context,
)
from hookgate.external.schema_tool import SchemaTool
from hookgate.tools.calls import CallIdentity, ToolCall
from hookgate.tools.tool import Tool

__all__ = ["ACTING_SERVICE_KEY", "ExternalCall", "build_call", "tool_call"]

#: The hooks' metadata key naming the service identity that asked a call acting for someone
#: else (None: the initiator asked themself); the audit row records it beside the initiator.
ACTING_SERVICE_KEY = "acting_service"
#: The connector of a tool no declaration and no rule names (never the client's header).
DEFAULT_CONNECTOR = "guarded_calls"


@dataclass(frozen=True, slots=True)
class ExternalCall:
    """One call from outside: who asks, in which session, the tool as declared and the
    arguments as validated and converted by the tool's parameter types."""

    agent: Agent
    #: Who asks: the token's user (a person, or a service identity). The call, its session
    #: and its approval's use are theirs; waits, peeks and reports are checked against them.
    user_id: str
    #: Whom the call acts for: its initiator, the gate's requester (whom approver scope
    #: ``initiator`` lets decide). A person acts for themself; a service for the person its
    #: ``acts_for`` names (authority.acting_for), or for nobody (None: only an escalation
    #: can then decide an initiator-scoped request).
    initiator: str | None
    #: The org the asker belongs to when asking (the agent's org: the codecs check it).
    org_id: str | None
    session_id: str
    call_id: str
    run_id: str
    tool: Tool
    arguments: dict[str, Any]
    #: Request facts for the hooks (the framework, Claude Code's cwd, the schema, ...).
    metadata: Mapping[str, Any] = field(default_factory=dict)
    #: How many delegations down from a session without a parent (0: top-level).
    depth: int = 0
    parent_session: str | None = None
    parent_agent_id: str | None = None
    transcript_path: str | None = None
    #: The session whose facts the call shares (a sub-agent's: its root session's run).
    facts_session: str | None = None

    @property
    def identity(self) -> CallIdentity:
        agent = self.agent
        return CallIdentity(agent_id=agent.id, user_id=self.initiator,
                            org_id=agent.org_id or self.org_id, run_id=self.run_id,
                            conversation_id=self.session_id, execution_path="external",
                            require_confirmation_for_all=agent.require_confirmation_for_all,
                            parent_agent_id=self.parent_agent_id, depth=self.depth,
                            parent_session=self.parent_session,
                            transcript_path=self.transcript_path,
                            facts_session=self.facts_session)

    @property
    def tool_call(self) -> ToolCall:
        return ToolCall(self.call_id, self.tool.name, self.arguments)


def build_call(agent: Agent, rules: CallRules, *, user_id: str, initiator: str | None,
               org_id: str | None,
               session_id: str, call_id: str, run_id: str, tool_name: str,
               arguments: Mapping[str, Any], writes: bool, connector: str,
               schema: Mapping[str, Any] | None = None, description: str | None = None,
               metadata: Mapping[str, Any] | None = None, depth: int = 0,
               parent_session: str | None = None, parent_agent_id: str | None = None,
               transcript_path: str | None = None, checked: bool = True,
               facts_session: str | None = None) -> ExternalCall:
    """The typed call. ``writes``/``connector``: a stand-in tool's defaults, which the rules
    may change. ``checked``: validate and convert ``arguments`` (ToolArgumentsError says
    what is wrong); False for arguments that were (a call's final arguments, reported).
    ``initiator``: whom the call acts for (see `ExternalCall.initiator`); when it is not
    ``user_id`` (a service identity asks), the hooks read the asker as
    ``metadata.acting_service``.
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
                          parameters=dict(schema) if schema else {"type": "object"},
                          _fn=_never_run)
        facts[TOOL_SCHEMA_KEY] = dict(schema) if schema is not None else None
        facts["tool_description"] = description
    args = base.validate(dict(arguments)) if checked else dict(arguments)
    probe = probe_context(tool_name, args, agent, initiator, facts)
    if declared is not None:
        flags = rules.flags(probe, writes=declared.writes,
                            connector=declared.connector or connector)
        tool = _declared_with_rules(declared, flags)
    else:
        tool = rules.tool(tool_name, probe, writes=writes, connector=connector, schema=schema,
                          description=description)
    return ExternalCall(agent, user_id, initiator, org_id, session_id, call_id, run_id, tool, args,
                        facts, depth, parent_session, parent_agent_id, transcript_path,
                        facts_session)


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
