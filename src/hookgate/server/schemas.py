"""Request bodies of the HTTP API. Unknown fields are refused (422), and values are taken
as the JSON types they are: ``"yes"`` or ``1`` is not a boolean, ``"5"`` not a number."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

#: The longest ``message`` a run or workflow run takes, in characters (README: HTTP API).
MAX_MESSAGE_CHARS = 100_000


class ApiBody(BaseModel):
    """The base of every JSON body the API reads: strict types, no unknown fields."""

    model_config = ConfigDict(extra="forbid", strict=True)


class StartRun(ApiBody):
    agent_id: str = Field(min_length=1, max_length=128)
    message: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)
    conversation_id: str | None = Field(default=None, max_length=128)
    engine: Literal["react", "dag"] = "react"


class Remember(ApiBody):
    """Approve and remember: a standing rule made from this decision (approvals.rules)."""

    scope: Literal["run", "agent_user", "org"]
    #: Seconds until the rule stops matching; none: until revoked.
    expires_in: int | None = Field(default=None, ge=1, le=366 * 86_400)
    #: A constraint on the arguments, in the declarative hooks' ``when`` language.
    when: str | None = Field(default=None, min_length=1, max_length=2000)


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
    #: Approve and remember: also create a standing rule for calls like this one.
    remember: Remember | None = None
