"""Request bodies of the HTTP API. Unknown fields are refused (422), and values are taken
as the JSON types they are: ``"yes"`` or ``1`` is not a boolean, ``"5"`` not a number."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from hookgate.tools.arguments import ArgumentsRefused, check_arguments

#: The longest ``message`` a run or workflow run takes, in characters (docs: Reference → HTTP API).
MAX_MESSAGE_CHARS = 100_000


class ApiBody(BaseModel):
    """The base of every JSON body the API reads: strict types, no unknown fields."""

    model_config = ConfigDict(extra="forbid", strict=True)


#: ``acts_for`` on a guarded call or session (``/api/v1/calls``, ``/api/v1/sessions``): the
#: person a service identity's call acts for, its initiator; checked by
#: ``hookgate.approvals.authority.acting_for`` at every ask.
ActsFor = Annotated[str | None, Field(
    default=None, min_length=1, max_length=128,
    description="The person this call acts for (a service identity's token only; an enabled "
                "person of the agent's org): the call's initiator, whom approver scope "
                "'initiator' lets decide. A person's token acts for themself. A service "
                "never decides.")]


class StartRun(ApiBody):
    agent_id: str = Field(min_length=1, max_length=128)
    message: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)
    conversation_id: str | None = Field(default=None, max_length=128)
    engine: Literal["react", "dag"] = "react"


#: The longest approver's ``message`` to the model, in characters.
MAX_DECISION_MESSAGE_CHARS = 2000
#: How many requests one batch decision takes.
MAX_BATCH = 100


def storable_text(value: str | None) -> str | None:
    """Words a person gives with a decision, refused if no store could keep them exactly
    (a lone surrogate, a NUL): the model and the record must read what was written."""
    if value is not None:
        try:
            check_arguments(value)
        except ArgumentsRefused as exc:
            raise ValueError(str(exc).replace("arguments: ", "", 1)) from None
    return value


class Remember(ApiBody):
    """Approve and remember: a standing rule made from this decision (approvals.rules)."""

    scope: Literal["run", "agent_user", "org"]
    #: Seconds until the rule stops matching; none: until revoked.
    expires_in: int | None = Field(default=None, ge=1, le=366 * 86_400)
    #: A constraint on the arguments, in the declarative hooks' ``when`` language.
    when: str | None = Field(default=None, min_length=1, max_length=2000)
    #: ``shadow``: the rule never decides, it records that it would have allowed a call;
    #: ``enforce`` (the default) decides. Checked by approvals.rules.
    mode: str | None = Field(default=None, max_length=16)


class UpdateRule(ApiBody):
    """A standing rule's mode switched (``PATCH /api/approval-rules/{id}``)."""

    mode: str = Field(max_length=16, description="shadow or enforce")


class CreateRule(Remember):
    """A standing rule created directly (``POST /api/approval-rules``)."""

    agent_id: str = Field(min_length=1, max_length=128)
    tool_name: str = Field(min_length=1, max_length=256)
    run_id: str | None = Field(default=None, max_length=64)
    user_id: str | None = Field(default=None, max_length=128)


class Respond(ApiBody):
    decision: Literal["approve", "reject"]
    reason: str | None = Field(default=None, max_length=2000)
    #: Where the person decided; chat channels are set by their callbacks, never here.
    via: Literal["inbox", "api", "cli"] = "api"
    #: Approve with edits: the arguments that run instead (checked by approvals/edits.py).
    arguments: dict[str, Any] | None = None
    #: Words for the model, read with the decision (approve or reject).
    message: str | None = Field(default=None, max_length=MAX_DECISION_MESSAGE_CHARS)
    #: Approve and remember: also create a standing rule for calls like this one.
    remember: Remember | None = None

    _texts = field_validator("reason", "message")(storable_text)


class RespondBatch(ApiBody):
    """One decision for several requests (e.g. the parallel calls of one turn); each is
    decided on its own: eligibility, binding and first-decision-wins per request."""

    ids: list[str] = Field(min_length=1, max_length=MAX_BATCH)
    decision: Literal["approve", "reject"]
    reason: str | None = Field(default=None, max_length=2000)
    via: Literal["inbox", "api", "cli"] = "api"
    message: str | None = Field(default=None, max_length=MAX_DECISION_MESSAGE_CHARS)

    _texts = field_validator("reason", "message")(storable_text)
