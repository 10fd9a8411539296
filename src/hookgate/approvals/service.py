"""The contract between the approval gate (a hook) and whatever keeps and decides requests."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from hookgate.agent import Agent
from hookgate.hooks.approval import AskedBy, CallBinding
from hookgate.hooks.coverage import RetryReuse
from hookgate.hooks.model import EventEmitter, HookContext, HookPoint
from hookgate.policies.shadow import ShadowDecision

DecisionStatus = Literal["approved", "rejected", "expired", "cancelled"]


@dataclass(slots=True)
class ApprovalAsk:
    """A call that needs a person: who asks, for which exact arguments, in which run."""

    agent: Agent
    run_id: str
    tool_call_id: str
    tool_name: str
    args: dict[str, Any]
    args_sha256: str
    user_id: str | None
    org_id: str | None
    conversation_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    emit: EventEmitter | None = None
    #: The hooks that asked for a person's approval of this call, and why.
    asked_by: list[AskedBy] = field(default_factory=list)
    #: Records on the call's context what standing rules in shadow mode would have decided
    #: (hookgate.policies.shadow.record_shadow; the flag: ``counted``, False when already
    #: counted for this call): they never decide the call.
    on_shadow: Callable[[Sequence[ShadowDecision], bool], object] | None = None
    #: What the standing rules in shadow mode decided about this call (approvals.rules).
    shadow: list[ShadowDecision] = field(default_factory=list)
    #: Completes ``metadata`` before the call is judged anew (a standing rule matched, a
    #: quorum's conditions read, a request made): the gate traces the call's provenance
    #: here, one read of the session's facts. A call whose request exists already is
    #: decided by that request and needs none of it. None: ``metadata`` is complete.
    complete: Callable[[], Awaitable[None]] | None = None

    async def completed(self) -> None:
        """Run `complete` once (a failure, e.g. facts that cannot be read, is raised)."""
        complete, self.complete = self.complete, None
        if complete is not None:
            await complete()

    @property
    def binding(self) -> CallBinding:
        """The one call this ask is about (its org: the asked one, else the agent's, as
        the request stores it)."""
        return CallBinding(self.run_id, self.tool_call_id, self.tool_name, self.agent.id,
                           self.args_sha256,
                           self.org_id if self.org_id is not None else self.agent.org_id)

    def condition_context(self) -> HookContext:
        """The call as a ``when`` condition reads it (quorum entries, standing rules)."""
        return HookContext(hook_point=HookPoint.PRE_TOOL_USE, tool_name=self.tool_name,
                           tool_args=dict(self.args), agent_id=self.agent.id,
                           user_id=self.user_id, metadata={**self.metadata, "org_id": self.org_id},
                           asked_by=list(self.asked_by))


@dataclass(slots=True)
class ApprovalDecision:
    """How a request ended. Only ``approved`` for exactly the asked call lets it run.

    ``binding`` is the call the request was made for (run, call id, tool, agent, digest);
    the gate refuses a decision whose binding is not the call it asked about.
    """

    request_id: str
    status: DecisionStatus
    args_sha256: str
    decided_by: str | None = None
    reason: str | None = None
    responded_at: str | None = None
    binding: CallBinding | None = None
    #: Set when nobody was asked: the id of the earlier request a person rejected for the
    #: same tool and arguments in this run.
    repeat_of: str | None = None
    #: The arguments the approver changed (and their digest): with them, only this call
    #: may run, not the asked one.
    edited_args: dict[str, Any] | None = None
    edited_args_sha256: str | None = None
    #: The approver's words to the model.
    message: str | None = None
    #: Set when nobody was asked because a standing rule approved the call (its id).
    rule_id: str | None = None
    #: The identity the decider was verified by, as the request records it: a chat
    #: platform's (``slack:U1``) or a provider's sign-in (``oidc:<issuer>#<subject>``).
    decided_identity: str | None = None
    #: When the request was created (ISO-8601): with ``responded_at``, how long it waited.
    requested_at: str | None = None
    #: Set when the request is an earlier call's that gave up, joined by its identical
    #: retry under that named exception (hookgate.hooks.coverage); None: the call's own.
    retry: RetryReuse | None = None


class ApprovalService(Protocol):
    """Creates (or finds) the request for a call and waits for its decision.

    A service that judges a call anew (matches a rule, reads a quorum's conditions, makes a
    request) awaits ``ask.completed()`` first: until then ``ask.metadata`` may lack what the
    gate adds only for such a call (its provenance). A call whose request exists already is
    decided by that request."""

    async def request_and_wait(self, ask: ApprovalAsk) -> ApprovalDecision:
        ...
