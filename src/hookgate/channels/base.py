"""The channel interface: what the approval gate asks of a chat platform, and nothing more.

The gate owns the approval state machine; a channel owns one platform's mechanics: post the
approval card, update it after the decision, verify and parse a click, answer handshakes.
A fake platform in tests is just another base URL the channel talks to.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal


class ChannelError(Exception):
    """Base class of channel errors."""


class ChannelConfigError(ChannelError):
    """A channel's configuration is unusable (e.g. a secret needed to verify is missing)."""


class DeliveryError(ChannelError):
    """The platform did not take the card or update after the retries.

    The optional fields say where it failed: ``platform`` (``feishu``...), ``endpoint``
    (method and path, never the query, which may hold a token), the last HTTP ``status``
    (None after a transport error) and the start of the last response ``body``.
    """

    def __init__(
        self,
        message: str,
        *,
        platform: str | None = None,
        endpoint: str | None = None,
        status: int | None = None,
        body: str | None = None,
    ) -> None:
        super().__init__(message)
        self.platform = platform
        self.endpoint = endpoint
        self.status = status
        self.body = body


class CallbackRejected(ChannelError):
    """A callback failed verification or cannot be parsed; nothing may change.

    ``status`` is the HTTP status to answer (401 for bad signatures/tokens/staleness and
    replays, 400 for bodies that cannot be decrypted or parsed).
    """

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclass(frozen=True, slots=True)
class CardEdit:
    """One argument the approver changed, as a card line worded by the approvals: ``text``
    shows both values, ``masked`` the same line with both values masked (the channel shows
    it when a part of ``path`` looks like a secret under its masking patterns)."""

    path: str
    text: str
    masked: str


@dataclass(slots=True)
class ApprovalCard:
    """What an approval card shows. ``args`` are the arguments that will run as anyone may
    see them (values under secret-looking keys already masked, hookgate.hooks.withheld); the
    channel masks its own ``mask_patterns`` and cuts long values when it renders them."""

    request_id: str
    tool_name: str
    args: dict[str, Any]
    agent_id: str
    agent_name: str
    requester: str | None
    expires_at: datetime
    inbox_url: str | None = None
    org_id: str | None = None
    #: ``user_message``, ``tool_description`` and ``reasons`` (hookgate.approvals.context).
    context: dict[str, Any] | None = None
    #: Tells a further card of the same request (the escalation card) apart where a
    #: platform de-duplicates sends by key (Feishu's uuid, WeCom's task_id); default: the
    #: request id.
    delivery_key: str | None = None
    #: Why a person is asked, one line per rule that fired (worded by the approvals).
    reasons: tuple[str, ...] = ()
    #: The arguments' numbers grouped for reading, e.g. ``amount = 60,000`` (worded by the
    #: approvals; the exact arguments are shown beside it).
    numbers: str | None = None
    #: Whether approving with edited arguments can succeed (decided by the approvals); the
    #: card offers it (through its inbox link) only then.
    editable: bool = False

    @property
    def send_key(self) -> str:
        return self.delivery_key or self.request_id


@dataclass(slots=True)
class DeliveredCard:
    """Where the card landed: the platform ids needed to update it later (JSON-able)."""

    channel_id: str
    ref: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class CardOutcome:
    """The decision a card is updated with."""

    request_id: str
    status: Literal["approved", "rejected", "expired", "cancelled"]
    decided_by: str | None = None
    decided_at: datetime | None = None
    reason: str | None = None
    #: Through what the decision came (inbox, api, cli, feishu, slack, wecom).
    via: str | None = None
    #: What the approver changed before approving (hookgate.approvals.edits.changes), as
    #: anyone may see it: values under secret-looking keys masked (hooks.withheld).
    changes: list[dict[str, Any]] = field(default_factory=list)
    #: The approver's words to the model.
    message: str | None = None
    #: ``changes`` as card lines (worded by the approvals, hookgate.approvals.card_text).
    edits: tuple[CardEdit, ...] = ()


@dataclass(slots=True)
class CallbackRequest:
    """A platform's HTTP request to our callback URL, as received (raw body kept for
    signature checks). Header names are lower-cased."""

    method: str
    headers: dict[str, str]
    query: dict[str, str]
    body: bytes


@dataclass(slots=True)
class CallbackAction:
    """One verified callback, normalised across platforms.

    ``kind``: ``decision`` (a button click), ``handshake`` (URL verification: answer with
    ``handshake_reply``), or ``ignored`` (a verified event we do not act on).
    """

    kind: Literal["decision", "handshake", "ignored"]
    request_id: str | None = None
    decision: Literal["approve", "reject"] | None = None
    platform_user_id: str | None = None
    dedupe_key: str | None = None
    ref: dict[str, Any] = field(default_factory=dict)
    handshake_reply: bytes | None = None
    handshake_content_type: str = "application/json"


@dataclass(slots=True)
class CallbackReply:
    """The synchronous HTTP answer to a platform callback."""

    status_code: int = 200
    body: bytes = b""
    content_type: str = "application/json"

    @classmethod
    def handshake(cls, action: CallbackAction) -> CallbackReply:
        """The answer to a URL-verification handshake: the reply the channel prepared."""
        return cls(body=action.handshake_reply or b"", content_type=action.handshake_content_type)

    @classmethod
    def empty(cls) -> CallbackReply:
        """A bare 200 acknowledgement (Slack's ack; WeCom's "no passive reply")."""
        return cls(body=b"", content_type="text/plain")


class Channel(ABC):
    """One configured chat channel (one platform app and one destination)."""

    type: str = ""

    def __init__(self, channel_id: str, org_id: str, config: dict[str, Any]) -> None:
        self.id = channel_id
        self.org_id = org_id
        self.config = config

    @abstractmethod
    async def send_card(self, card: ApprovalCard) -> DeliveredCard:
        """Post the approval card; raise DeliveryError when it finally fails."""

    @abstractmethod
    async def update_card(self, delivered: DeliveredCard, outcome: CardOutcome) -> None:
        """Show the outcome (who, when) on the card, with no buttons left."""

    @abstractmethod
    def parse_callback(self, request: CallbackRequest, now: float) -> CallbackAction:
        """Verify (signature, token, time window, decryption) and parse a callback.

        Raise CallbackRejected for anything unverified. Replay detection by dedupe key is
        the caller's job (it keeps the seen keys), the time window is the channel's.
        """

    #: How long a callback of this channel stays valid after it was sent, in seconds, when
    #: that is longer than the ±5-minute window of a signed platform request (an email
    #: link, a phone's notification button): its dedupe key must be kept at least as long,
    #: or a used link could decide again once the key was pruned.
    callback_lifetime_s: float | None = None

    #: Clicks are acknowledged at once and decided after (a platform deadline shorter than
    #: a slow database may take): the reply is the acknowledgement, and the clicker hears
    #: the result through `deferred_result`.
    defers_decisions: bool = False

    async def deferred_result(self, action: CallbackAction, *,  # noqa: B027
                              outcome: CardOutcome | None, message: str) -> None:
        """Tell the clicker of a deferred click what came of it (``defers_decisions``)."""

    async def prepare_callback(self, request: CallbackRequest) -> None:  # noqa: B027
        """Fetch what parse_callback needs from the network before it runs (e.g. the
        platform's published signing keys); most channels need nothing."""

    @abstractmethod
    def reply(
        self,
        request: CallbackRequest,
        action: CallbackAction,
        *,
        outcome: CardOutcome | None,
        message: str,
    ) -> CallbackReply:
        """The immediate answer to a click: e.g. Feishu's toast and decided card.

        ``outcome`` is the request's state after the click (None if nothing changed);
        ``message`` is a short text for the clicker ("Approved", "not allowed", ...).
        """

    @abstractmethod
    async def notify(self, text: str) -> None:
        """Post a plain message to the channel's destination (channel_notify, summaries)."""

    async def aclose(self) -> None:  # noqa: B027 - optional for channels without clients
        """Release HTTP clients."""
