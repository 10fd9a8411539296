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


class Respond(ApiBody):
    decision: Literal["approve", "reject"]
    reason: str | None = Field(default=None, max_length=2000)
    #: Where the person decided; chat channels are set by their callbacks, never here.
    via: Literal["inbox", "api", "cli"] = "api"
