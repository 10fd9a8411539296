"""An agent's definition: instructions, tools, and the declarations hooks act on (SPEC §3)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from hookgate.escalation_policy import EscalationPolicy
from hookgate.tools.tool import Tool

if TYPE_CHECKING:
    from hookgate.approvals.quorum_rule import QuorumRule

ConfirmationMode = Literal["auto", "inline_only", "channel_only"]
ApproverScope = Literal["initiator", "agent_owner", "org_members"]

CONFIRMATION_MODES: tuple[str, ...] = ("auto", "inline_only", "channel_only")
APPROVER_SCOPES: tuple[str, ...] = ("initiator", "agent_owner", "org_members")


@dataclass(eq=False)
class Agent:
    """What an engine runs. Every field after ``tools`` has a default."""

    id: str
    name: str
    instructions: str
    tools: list[Tool]
    model_config_json: dict[str, Any] = field(default_factory=dict)
    require_confirmation_for_all: bool = False
    confirmation_mode: ConfirmationMode = "auto"
    confirmation_approver_scope: ApproverScope = "initiator"
    owner_user_id: str | None = None
    org_id: str | None = None
    approval_channel_id: str | None = None
    #: More channels each request goes to at once, after ``approval_channel_id``
    #: (hookgate.approvals.routing); a click in any of them decides.
    approval_channel_ids: tuple[str, ...] = ()
    confirmation_timeout_s: float = 3600.0
    model: str | None = None
    #: Post a summary (outcome, duration, tools used, answer, link) to the agent's chat
    #: channel when a run on a server ends.
    notify_on_completion: bool = False
    #: After a person rejected a call, the same tool with the same arguments in the same
    #: run is refused without asking anyone again (and the model is told so).
    refuse_retry_after_rejection: bool = True
    #: Reminders, escalation and the timeout fallback of its requests.
    followup: EscalationPolicy = field(default_factory=EscalationPolicy)
    #: False: whoever requested a call may not approve it themselves (four eyes).
    allow_self_approval: bool = True
    #: Calls that need several distinct approvers (and maybe four eyes), by tool and `when`.
    approval_quorum: tuple[QuorumRule, ...] = ()
    #: Identity-provider groups of which a person must be in one (as the provider said at
    #: their last sign-in or re-check) to decide this agent's requests, on top of the
    #: approver scope and four eyes (approvals/authority.py); empty: no such restriction.
    approver_groups: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.confirmation_mode not in CONFIRMATION_MODES:
            raise ValueError(
                f"agent '{self.id}': confirmation_mode must be one of "
                f"{', '.join(CONFIRMATION_MODES)}, not {self.confirmation_mode!r}"
            )
        if self.confirmation_approver_scope not in APPROVER_SCOPES:
            raise ValueError(
                f"agent '{self.id}': confirmation_approver_scope must be one of "
                f"{', '.join(APPROVER_SCOPES)}, not {self.confirmation_approver_scope!r}"
            )
        self.followup.check_against(self.confirmation_timeout_s)
        self._check_quorum()
        names = [t.name for t in self.tools]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"agent '{self.id}': tool names repeat: {', '.join(dupes)}")

    def _check_quorum(self) -> None:
        problem = quorum_problem(self.confirmation_approver_scope, self.allow_self_approval,
                                 [(r.approvals_required, r.allow_self_approval)
                                  for r in self.approval_quorum])
        if problem is not None:
            raise ValueError(f"agent '{self.id}': {problem}")

    def toolbox(self) -> dict[str, Tool]:
        """The agent's tools by exact name (no case folding: a near-miss is unknown)."""
        return {t.name: t for t in self.tools}

    def with_tools(self, extra: Iterable[Tool]) -> Agent:
        """A copy of this agent with more tools (e.g. the engine's ``call_agent``)."""
        from dataclasses import replace

        have = {t.name for t in self.tools}
        return replace(self, tools=[*self.tools, *(t for t in extra if t.name not in have)])


def quorum_problem(scope: str, allow_self_approval: bool,
                   rules: Iterable[tuple[int, bool | None]]) -> str | None:
    """Why a four-eyes or quorum declaration could never be satisfied under ``scope``
    (None when it can): such requests would only wait until they expire."""
    rules = list(rules)
    four_eyes = not allow_self_approval or any(own is False for _, own in rules)
    if four_eyes and scope == "initiator":
        return ("allow_self_approval: false with confirmation_approver_scope 'initiator' "
                "leaves nobody who may approve (use agent_owner or org_members)")
    several = max((n for n, _ in rules), default=1)
    if several > 1 and scope != "org_members":
        return (f"approvals_required {several} needs confirmation_approver_scope "
                f"'org_members' ('{scope}' is one person)")
    return None


def hook_declaration(agent: Agent) -> Mapping[str, Any]:
    """The agent's ``model_config_json.hooks`` section (empty when absent)."""
    hooks = (agent.model_config_json or {}).get("hooks")
    return hooks if isinstance(hooks, Mapping) else {}
