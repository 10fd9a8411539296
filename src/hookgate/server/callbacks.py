"""A chat platform's callback, from raw request to decision.

The channel verifies and parses it (signature, token, time window, decryption); then, in
order: a dedupe key seen before is a replay (401); the clicker must be a hookgate user of the
channel's org by their chat identity; the request must have been sent through this very
channel (one of its routed channels or its escalation's: approvals/routing.py), in its org;
and the approver scope must let that user decide. Any refusal leaves the request as it was
and the card answers "not allowed"; only a decision changes anything.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
import weakref
from collections.abc import Callable
from datetime import UTC, datetime

from hookgate.approvals.eligibility import Approver
from hookgate.approvals.errors import AlreadyDecided, NotEligible, RequestNotFound
from hookgate.approvals.persistent import PersistentApprovals
from hookgate.approvals.quorum import AlreadyVoted, progress_text
from hookgate.approvals.records import ConfirmationRequest
from hookgate.approvals.routing import sent_through
from hookgate.channels.base import (
    CallbackAction,
    CallbackRejected,
    CallbackReply,
    CallbackRequest,
    CardOutcome,
    Channel,
)
from hookgate.runtime.channel_directory import ConfiguredChannels
from hookgate.storage import people
from hookgate.storage.channel_callbacks import first_sighting
from hookgate.storage.database import Database

log = logging.getLogger(__name__)

#: Longer dedupe keys are stored as their sha256 (the column holds 512 characters).
MAX_DEDUPE_KEY = 512


#: Dedupe keys are kept at least this long: far beyond the ±5-minute window of a signed
#: platform request; a channel whose callbacks live longer (an email link) keeps them for its
#: `Channel.callback_lifetime_s` plus this margin.
SEEN_KEY_TTL_S = 3600.0
PRUNE_EVERY_S = 600.0


#: Deferred decisions in flight (held so they are not collected before they end).
_DEFERRED: set[asyncio.Task[None]] = set()
#: Dedupe keys of the deferred clicks each server (its channel directory) acknowledged:
#: {(channel id, key): when}. A replay reaching the same server is refused at once (401); one
#: reaching another instance is acknowledged there and refused by the database's record
#: before it decides anything.
_SEEN_HERE: weakref.WeakKeyDictionary[ConfiguredChannels, dict[tuple[str, str], float]] = (
    weakref.WeakKeyDictionary())


def _seen_here(channels: ConfiguredChannels, channel_id: str, action: CallbackAction) -> None:
    if not action.dedupe_key:
        raise CallbackRejected(400, "callback without a dedupe key")
    seen = _SEEN_HERE.setdefault(channels, {})
    now = time.monotonic()
    for old, at in list(seen.items()):
        if now - at > SEEN_KEY_TTL_S:
            del seen[old]
    key = (channel_id, action.dedupe_key)
    if key in seen:
        raise CallbackRejected(401, "replayed callback: this one was already received")
    seen[key] = now


class NotAllowed(Exception):
    """The click may not decide the request; the message is shown to the clicker."""


class ChannelCallbacks:
    """Handles callbacks for the server's configured channels."""

    def __init__(self, db: Database, approvals: PersistentApprovals,
                 channels: ConfiguredChannels, *, clock: Callable[[], float] = time.time
                 ) -> None:
        self.db = db
        self.approvals = approvals
        self.channels = channels
        self.clock = clock
        self._last_prune = 0.0

    async def handle(self, channel_id: str, request: CallbackRequest) -> CallbackReply:
        """The answer for the platform. Raises CallbackRejected (with the HTTP status) for
        an unknown (404) or disabled (403) channel, an unverified callback (401/400) and a
        replay (401); in each of those cases nothing changed."""
        channel = self._enabled(channel_id)
        await channel.prepare_callback(request)
        action = channel.parse_callback(request, self.clock())
        if action.kind != "decision":
            return channel.reply(request, action, outcome=None, message="")
        if channel.defers_decisions:
            # The platform's deadline is shorter than a slow database may take: acknowledge
            # now, decide after, and tell the clicker through the channel.
            _seen_here(self.channels, channel.id, action)
            task = asyncio.create_task(self._decide_later(channel, action))
            _DEFERRED.add(task)
            task.add_done_callback(_DEFERRED.discard)
            return channel.reply(request, action, outcome=None, message="")
        await self._first_delivery(channel, action)
        outcome, message = await self._decide(channel, action)
        return channel.reply(request, action, outcome=outcome, message=message)

    async def _decide_later(self, channel: Channel, action: CallbackAction) -> None:
        """A deferred click: the same replay check and decision, then the channel's
        follow-up to the clicker."""
        try:
            await self._first_delivery(channel, action)
            outcome, message = await self._decide(channel, action)
            await channel.deferred_result(action, outcome=outcome, message=message)
        except CallbackRejected as exc:
            log.warning("channel %s: deferred callback refused: %s", channel.id, exc.reason)
        except Exception:
            log.exception("channel %s: deferred callback for %s failed", channel.id,
                          action.request_id)

    def _enabled(self, channel_id: str) -> Channel:
        spec = self.channels.spec(channel_id)
        if spec is None:
            raise CallbackRejected(404, f"no channel '{channel_id}'")
        channel = self.channels.get(channel_id)
        if channel is None:  # declared with enabled: false
            raise CallbackRejected(403, f"channel '{channel_id}' is disabled")
        return channel

    async def _first_delivery(self, channel: Channel, action: CallbackAction) -> None:
        """Record the callback's dedupe key; a key already recorded is a replay."""
        key = action.dedupe_key
        if not key:
            raise CallbackRejected(400, "callback without a dedupe key")
        if len(key) > MAX_DEDUPE_KEY:
            key = "sha256:" + hashlib.sha256(key.encode()).hexdigest()
        now = self.clock()
        cutoff = None
        if now - self._last_prune > PRUNE_EVERY_S:
            # Callbacks older than the channels' time window are refused before they get
            # here, so their keys are no longer needed to spot a replay.
            self._last_prune = now
            keep = SEEN_KEY_TTL_S + self.channels.longest_callback_lifetime_s()
            cutoff = datetime.fromtimestamp(now - keep, UTC)
        if not await first_sighting(self.db, channel.id, key, forget_before=cutoff):
            log.warning("channel %s: replayed callback %s refused", channel.id, key)
            raise CallbackRejected(401, "replayed callback: this one was already received")

    async def _decide(self, channel: Channel, action: CallbackAction
                      ) -> tuple[CardOutcome | None, str]:
        """(the card's outcome, the clicker's message); no outcome when nothing changed."""
        assert action.request_id is not None and action.decision is not None
        try:
            approver = await self._approver(channel, action.platform_user_id)
            request = await self._request_of(channel, action.request_id)
            decided = await self.approvals.decide(request.id, action.decision, approver,
                                                  read=request)
        except (NotAllowed, NotEligible, RequestNotFound) as exc:
            log.warning("channel %s: %s user %s may not decide %s: %s", channel.id,
                        channel.type, action.platform_user_id, action.request_id, exc)
            return None, f"not allowed: {exc}"
        except (AlreadyDecided, AlreadyVoted) as exc:
            return None, str(exc)
        if decided.pending:  # one approval towards a quorum: the card still waits
            return None, f"Approval recorded: {progress_text(decided)}; waiting for more"
        return _outcome(decided), "Approved" if decided.status == "approved" else "Rejected"

    async def _approver(self, channel: Channel, platform_user_id: str | None) -> Approver:
        if not people.knows_chat(channel.type) or not platform_user_id:
            raise NotAllowed(f"{channel.type} clicks cannot be matched to hookgate users")
        users = await people.users_by_chat(self.db, channel.type, platform_user_id,
                                           channel.org_id)
        if len(users) != 1:
            linked = "is not linked to a" if not users else "is linked to more than one"
            raise NotAllowed(f"{channel.type} user '{platform_user_id}' {linked} hookgate "
                             f"user of org '{channel.org_id}' (users[].chat)")
        user = users[0]
        return Approver(user.id, user.org_id, user.admin,
                        channel_identity=f"{channel.type}:{platform_user_id}",
                        via=channel.type, service=user.service)

    async def _request_of(self, channel: Channel, request_id: str) -> ConfirmationRequest:
        request = await self.approvals.store.get(request_id)
        # One answer for "no such request", "another channel" and "another org", so a click
        # learns nothing about requests outside this channel.
        if (request is None or channel.id not in sent_through(request)
                or request.org_id != channel.org_id):
            raise NotAllowed(f"request '{request_id}' was not sent through this channel")
        return request


def _outcome(request: ConfirmationRequest) -> CardOutcome:
    return request.card_outcome()
