"""The database tables (SQLAlchemy 2 ORM). Schema changes go through Alembic migrations."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    SmallInteger,
    String,
    Text,
    UniqueConstraint,
    false,
    text,
    true,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from hookgate.storage.types import UTCDateTime, utcnow


class Base(DeclarativeBase):
    type_annotation_map = {datetime: UTCDateTime(), dict[str, Any]: JSON()}


class Org(Base):
    __tablename__ = "orgs"

    id: Mapped[str] = mapped_column(String(128), primary_key=True)
    name: Mapped[str] = mapped_column(String(256), default="")
    read_only: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class User(Base):
    __tablename__ = "users"

    id: Mapped[str] = mapped_column(String(128), primary_key=True)
    org_id: Mapped[str] = mapped_column(ForeignKey("orgs.id"), index=True)
    name: Mapped[str] = mapped_column(String(256), default="")
    admin: Mapped[bool] = mapped_column(Boolean, default=False)
    #: sha256 of the API token; the token itself is never stored.
    token_sha256: Mapped[str | None] = mapped_column(String(64), unique=True, nullable=True)
    feishu_open_id: Mapped[str | None] = mapped_column(String(128), nullable=True, index=True)
    slack_user_id: Mapped[str | None] = mapped_column(String(128), nullable=True, index=True)
    wecom_userid: Mapped[str | None] = mapped_column(String(128), nullable=True, index=True)
    #: The Telegram user id (an integer, kept as text) of callback_query.from.id.
    telegram_user_id: Mapped[str | None] = mapped_column(String(128), nullable=True,
                                                         index=True)
    #: The Microsoft Entra (AAD) object id of a Teams user (activity.from.aadObjectId).
    teams_aad_object_id: Mapped[str | None] = mapped_column(String(128), nullable=True,
                                                            index=True)
    #: A Discord user's id (a snowflake, kept as text).
    discord_user_id: Mapped[str | None] = mapped_column(String(128), nullable=True,
                                                        index=True)
    #: The address an email channel sends a person's decision links to (lower case).
    email_address: Mapped[str | None] = mapped_column(String(320), nullable=True, index=True)
    #: A person's own ntfy topic, where their approval notifications go.
    ntfy_topic: Mapped[str | None] = mapped_column(String(128), nullable=True, index=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    #: A disabled user cannot sign in, start runs or decide (see storage/users.py).
    disabled: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    #: Declared by the configuration file, which is then the source of truth for the user.
    declared: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    token_expires_at: Mapped[datetime | None] = mapped_column(nullable=True)
    #: A service (agent) identity: signs in to act for people, never decides, votes or
    #: creates a standing rule (approvals/authority.py).
    service: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())


class RevokedToken(Base):
    """A token digest revoked for good: it never signs in again, whatever a file says."""

    __tablename__ = "revoked_tokens"

    token_sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[str] = mapped_column(String(128))
    revoked_by: Mapped[str | None] = mapped_column(String(128), nullable=True)
    revoked_at: Mapped[datetime] = mapped_column(default=utcnow)


class AgentRow(Base):
    __tablename__ = "agents"

    id: Mapped[str] = mapped_column(String(128), primary_key=True)
    org_id: Mapped[str | None] = mapped_column(ForeignKey("orgs.id"), nullable=True, index=True)
    name: Mapped[str] = mapped_column(String(256), default="")
    owner_user_id: Mapped[str | None] = mapped_column(String(128), nullable=True)
    definition: Mapped[dict[str, Any]] = mapped_column(default=dict)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)


class ChannelRow(Base):
    __tablename__ = "channels"

    id: Mapped[str] = mapped_column(String(128), primary_key=True)
    org_id: Mapped[str] = mapped_column(ForeignKey("orgs.id"), index=True)
    type: Mapped[str] = mapped_column(String(32))
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    #: The channel's config (secrets included), encrypted with the secrets key (Fernet).
    config_encrypted: Mapped[str] = mapped_column(Text, default="")
    position: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class ConfirmationRequestRow(Base):
    __tablename__ = "confirmation_requests"
    __table_args__ = (
        UniqueConstraint("run_id", "tool_call_id", name="uq_confirmation_run_call"),
        Index("ix_confirmation_org_status", "org_id", "status"),
        Index("ix_confirmation_responded_at", "responded_at"),
        # The expiry sweep: pending requests whose deadline passed (migration 0008).
        Index("ix_confirmation_status_expires", "status", "expires_at"),
        # The requests of a root run's delegated children (migration 0013).
        Index("ix_confirmation_root_run", "root_run_id"),
    )

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    run_id: Mapped[str] = mapped_column(String(64))
    #: For a delegated child's call: the stored run the child runs inside (its decision
    #: continues that run); None for a root run's own call (migration 0013).
    root_run_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    tool_call_id: Mapped[str] = mapped_column(String(128))
    agent_id: Mapped[str] = mapped_column(String(128))
    requested_by: Mapped[str | None] = mapped_column(String(128), nullable=True)
    org_id: Mapped[str | None] = mapped_column(String(128), nullable=True)
    mode: Mapped[str] = mapped_column(String(16))
    channel_id: Mapped[str | None] = mapped_column(String(128), nullable=True)
    approver_scope: Mapped[str] = mapped_column(String(32))
    agent_owner_id: Mapped[str | None] = mapped_column(String(128), nullable=True)
    # Indexed (leading) by ix_confirmation_status_expires.
    status: Mapped[str] = mapped_column(String(16), default="pending")
    tool_name: Mapped[str] = mapped_column(String(256))
    args: Mapped[dict[str, Any]] = mapped_column(default=dict)
    args_sha256: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[datetime]
    responded_at: Mapped[datetime | None] = mapped_column(nullable=True)
    responded_by: Mapped[str | None] = mapped_column(String(128), nullable=True)
    responder_channel_identity: Mapped[str | None] = mapped_column(String(256), nullable=True)
    reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    delivery_ref: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    #: What the approver reads besides the arguments (hookgate.approvals.context).
    context: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    #: Through what the decision came: inbox, api, cli, feishu, slack or wecom.
    decided_via: Mapped[str | None] = mapped_column(String(16), nullable=True)
    #: The agent's reminder / escalation / timeout policy, as it was when the request was
    #: made (hookgate.escalation_policy; migration 0012).
    followup: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    #: Reminders sent: raised by compare-and-set, so one instance sends each reminder.
    reminders_sent: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    last_reminded_at: Mapped[datetime | None] = mapped_column(nullable=True)
    escalated_at: Mapped[datetime | None] = mapped_column(nullable=True)
    #: The users who became eligible by the escalation.
    escalated_to: Mapped[list[str] | None] = mapped_column(JSON, nullable=True)
    #: Where the escalation cards landed ({channel_id, ...platform ids}), to update them.
    escalation_refs: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON, nullable=True)
    #: Why no approver can be reached (no approver resolved, every delivery failed).
    unreachable: Mapped[str | None] = mapped_column(Text, nullable=True)
    #: The arguments an approver changed before approving (migration 0010); with them,
    #: their digest is what may run, not ``args_sha256``.
    edited_args: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    edited_args_sha256: Mapped[str | None] = mapped_column(String(64), nullable=True)
    #: The approver's words to the model, given with the decision (migration 0010).
    message: Mapped[str | None] = mapped_column(Text, nullable=True)
    #: How many distinct eligible people must approve (quorum; migration 0011).
    approvals_required: Mapped[int] = mapped_column(Integer, default=1, server_default="1")
    #: False: the requester may not approve their own call (four eyes).
    allow_self_approval: Mapped[bool] = mapped_column(Boolean, default=True,
                                                      server_default=true())
    #: Who approved so far ({user_id, via, at}), kept with the row the votes lock.
    approvals: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON, nullable=True)


class ApprovalRuleRow(Base):
    """A standing rule: calls it covers are approved without asking (approvals.rules)."""

    __tablename__ = "approval_rules"
    __table_args__ = (Index("ix_approval_rules_lookup", "org_id", "agent_id", "tool_name"),)

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    org_id: Mapped[str | None] = mapped_column(String(128), nullable=True)
    agent_id: Mapped[str] = mapped_column(String(128))
    tool_name: Mapped[str] = mapped_column(String(256))
    #: run (one run), agent_user (this agent for one user), org (this agent, any user).
    scope: Mapped[str] = mapped_column(String(16))
    run_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    user_id: Mapped[str | None] = mapped_column(String(128), nullable=True)
    when: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_by: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[datetime | None] = mapped_column(nullable=True)
    from_request_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    revoked_at: Mapped[datetime | None] = mapped_column(nullable=True)
    revoked_by: Mapped[str | None] = mapped_column(String(128), nullable=True)
    uses: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    last_used_at: Mapped[datetime | None] = mapped_column(nullable=True)
    #: Set when its creator's token was revoked: the rule matches nothing until an admin
    #: enables it again (``POST /api/approval-rules/{id}/enable``).
    suspended_at: Mapped[datetime | None] = mapped_column(nullable=True)
    suspended_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    #: ``shadow``: the rule never decides a call, it records that it would have allowed it;
    #: ``enforce`` (the default) decides. Switched by an update (approvals.rules).
    mode: Mapped[str] = mapped_column(String(16), default="enforce", server_default="enforce")


class ApprovalVoteRow(Base):
    """One person's decision on one request; unique per person, so a quorum counts people."""

    __tablename__ = "approval_votes"
    __table_args__ = (UniqueConstraint("request_id", "user_id", name="uq_approval_vote_person"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    request_id: Mapped[str] = mapped_column(String(64))
    user_id: Mapped[str] = mapped_column(String(128))
    decision: Mapped[str] = mapped_column(String(16))
    via: Mapped[str | None] = mapped_column(String(16), nullable=True)
    channel_identity: Mapped[str | None] = mapped_column(String(256), nullable=True)
    reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class RunRow(Base):
    __tablename__ = "runs"
    __table_args__ = (Index("ix_runs_status", "status"),)

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    agent_id: Mapped[str] = mapped_column(String(128))
    org_id: Mapped[str | None] = mapped_column(String(128), nullable=True, index=True)
    user_id: Mapped[str | None] = mapped_column(String(128), nullable=True)
    conversation_id: Mapped[str | None] = mapped_column(String(128), nullable=True)
    engine: Mapped[str] = mapped_column(String(32), default="react")
    status: Mapped[str] = mapped_column(String(32))
    state_json: Mapped[str] = mapped_column(Text)
    answer: Mapped[str | None] = mapped_column(Text, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)
    #: Raised by every executor that takes the run over (see storage.fencing).
    fence: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    #: Whether the run's writes wake other processes (PostgreSQL NOTIFY): set by a stream
    #: in another process and by every takeover, never cleared (see runs/events_bus.py).
    followed: Mapped[bool] = mapped_column(Boolean, server_default=false())


class RunEventRow(Base):
    __tablename__ = "run_events"

    # Keyed by run and seq, the one index: every read and write goes by them (a serial id
    # cost each event a nextval and an index insert, and ran out at 2^31: migration 0031).
    run_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    type: Mapped[str] = mapped_column(String(64))
    data: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class ToolExecutionRow(Base):
    """Claimed before a tool runs: makes each (run, tool call) run at most once."""

    __tablename__ = "tool_executions"

    run_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    tool_call_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    tool_name: Mapped[str] = mapped_column(String(256))
    args_sha256: Mapped[str] = mapped_column(String(64))
    started_at: Mapped[datetime] = mapped_column(default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(nullable=True)
    observation: Mapped[str | None] = mapped_column(Text, nullable=True)
    ok: Mapped[bool | None] = mapped_column(Boolean, nullable=True)


class ChannelCallbackSeen(Base):
    """Dedupe keys of channel callbacks already acted on (replays change nothing)."""

    __tablename__ = "channel_callbacks_seen"

    channel_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    dedupe_key: Mapped[str] = mapped_column(String(512), primary_key=True)
    seen_at: Mapped[datetime] = mapped_column(default=utcnow)


class ConnectorCallLog(Base):
    """One tool call as the audit log saw it, hash-chained to the row before it in its chain.

    ``args_json`` keeps the masked arguments as the exact text that was hashed, so checking
    a row never depends on how a database round-trips JSON. ``storage/audit.py`` defines
    the canonical form and the chain.
    """

    __tablename__ = "connector_call_logs"
    __table_args__ = (
        UniqueConstraint("chain", "seq", name="uq_call_log_chain_seq"),
        Index("ix_call_log_org_created", "org_id", "created_at"),
        Index("ix_call_log_org_tool", "org_id", "tool_name"),
        Index("ix_call_log_org_agent", "org_id", "agent_id"),
        Index("ix_call_log_org_user", "org_id", "user_id"),
        Index("ix_call_log_org_session", "org_id", "session_id"),
    )

    id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True)
    chain: Mapped[str] = mapped_column(String(128))
    seq: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[datetime]
    tool_name: Mapped[str] = mapped_column(String(256))
    connector: Mapped[str | None] = mapped_column(String(128), nullable=True)
    agent_id: Mapped[str | None] = mapped_column(String(128), nullable=True)
    user_id: Mapped[str | None] = mapped_column(String(128), nullable=True)
    org_id: Mapped[str | None] = mapped_column(String(128), nullable=True)
    run_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    tool_call_id: Mapped[str | None] = mapped_column(String(128), nullable=True)
    execution_path: Mapped[str | None] = mapped_column(String(32), nullable=True)
    args_json: Mapped[str] = mapped_column(Text)
    args_sha256: Mapped[str] = mapped_column(String(64))
    outcome: Mapped[str] = mapped_column(String(16))
    blocked_by: Mapped[str | None] = mapped_column(String(256), nullable=True)
    detail: Mapped[str | None] = mapped_column(Text, nullable=True)
    result_chars: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    result_sha256: Mapped[str | None] = mapped_column(String(64), nullable=True)
    latency_us: Mapped[int] = mapped_column(BigInteger)
    #: Who decided the call (a user id, or "rule ar_… (created by alice)"), the request it
    #: waited on and how long that took: hashed in version 3 rows.
    approver: Mapped[str | None] = mapped_column(Text, nullable=True)
    request_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    wait_us: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    #: A sub-agent's call: the session (on the engines, the run) that delegated to it, and
    #: how many delegations down it is (1: a direct sub-agent); both null for a top-level
    #: call. Hashed in version 4 rows.
    parent_session: Mapped[str | None] = mapped_column(Text, nullable=True)
    depth: Mapped[int | None] = mapped_column(SmallInteger, nullable=True)
    #: The session (or conversation) the call belongs to, as the agent named it (an
    #: external agent's session id; a run's conversation id); hashed in version 5 rows.
    session_id: Mapped[str | None] = mapped_column(Text, nullable=True)
    #: The service identity that asked a call acting for ``user_id`` (its initiator); null
    #: when the initiator asked themself. Hashed in version 6 rows.
    acting_service: Mapped[str | None] = mapped_column(String(128), nullable=True)
    prev_hash: Mapped[str] = mapped_column(String(64))
    row_hash: Mapped[str] = mapped_column(String(64))
    #: Which canonical form ``row_hash`` covers (storage/audit.py): 1 for rows written
    #: before RFC 8785 (the migration that added it marked them), 2 since, 3 for rows that
    #: record a decision (approver, request id, wait), 4 for a sub-agent's rows (parent
    #: session, depth; the decision too), 5 for rows that name their session (all of it),
    #: 6 for a service's calls acting for a person (acting_service; everything else too).
    hash_v: Mapped[int] = mapped_column(SmallInteger, server_default=text("2"))


class AuditChainHead(Base):
    """The last row of each audit chain: appends lock it, and it shows a cut-off tail."""

    __tablename__ = "audit_chain_heads"

    chain: Mapped[str] = mapped_column(String(128), primary_key=True)
    last_seq: Mapped[int] = mapped_column(BigInteger)
    last_hash: Mapped[str] = mapped_column(String(64))


class RateLimitCounter(Base):
    """One fixed-window counter per (connector, user or org): the window and its count."""

    __tablename__ = "rate_limit_counters"

    key: Mapped[str] = mapped_column(String(512), primary_key=True)
    window_start: Mapped[int] = mapped_column(BigInteger)
    count: Mapped[int] = mapped_column(Integer)


class SessionFactRow(Base):
    """What a session has seen: the user's request and each tool result, trusted or not
    (hookgate.provenance reads them to trace where a call's argument values came from)."""

    __tablename__ = "session_facts"
    __table_args__ = (
        Index("ix_session_facts_session", "session", "id"),
        # A session's requests alone: the check that a request is kept once reads these,
        # not every result of the session (migration 0032).
        Index("ix_session_facts_requests", "session",
              postgresql_where=text("kind = 'request'"), sqlite_where=text("kind = 'request'")),
    )

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"),
                                    primary_key=True, autoincrement=True)
    session: Mapped[str] = mapped_column(String(256))
    kind: Mapped[str] = mapped_column(String(16))
    trusted: Mapped[bool] = mapped_column(Boolean)
    source: Mapped[str] = mapped_column(String(256))
    call_id: Mapped[str | None] = mapped_column(String(128), nullable=True)
    text: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class LimitClaimRow(Base):
    """One claim on a session-aware limit (storage/session_limits.py): a call in flight or
    done counts ``amount`` (ten-thousandths) against ``limit_key`` from ``at`` (epoch
    seconds); a released claim is deleted. ``kind`` ``approved`` rows say a session had an
    approved call of a tool."""

    __tablename__ = "limit_claims"
    __table_args__ = (Index("ix_limit_claims_key_at", "limit_key", "at"),
                      Index("ix_limit_claims_call", "call_key"))

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"),
                                    primary_key=True, autoincrement=True)
    limit_key: Mapped[str] = mapped_column(String(512))
    call_key: Mapped[str] = mapped_column(String(512))
    kind: Mapped[str] = mapped_column(String(16))
    amount: Mapped[int] = mapped_column(BigInteger)
    at: Mapped[float] = mapped_column(Float(precision=53))


class OidcLogin(Base):
    """A sign-in under way at the OpenID Connect provider: its state, nonce and PKCE
    verifier, taken (deleted) once by the callback, so neither is ever accepted twice."""

    __tablename__ = "oidc_logins"

    state: Mapped[str] = mapped_column(String(128), primary_key=True)
    nonce: Mapped[str] = mapped_column(String(128))
    code_verifier: Mapped[str] = mapped_column(String(128))
    #: sha256 of the secret the browser (its cookie) or the CLI that started the sign-in
    #: holds: a callback only finishes where it started (no login CSRF).
    binding_sha256: Mapped[str] = mapped_column(String(64))
    return_to: Mapped[str] = mapped_column(String(512), default="/")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class OidcIdentity(Base):
    """The hookgate user a person of an identity provider is (``iss`` + ``sub``; the email
    is for display only), and the groups the provider said last."""

    __tablename__ = "oidc_identities"

    issuer: Mapped[str] = mapped_column(String(512), primary_key=True)
    subject: Mapped[str] = mapped_column(String(255), primary_key=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id"), unique=True)
    email: Mapped[str | None] = mapped_column(String(320), nullable=True)
    groups: Mapped[list[str]] = mapped_column(JSON, default=list)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)
    #: When the provider last refused the person (a failed re-check): their user is
    #: disabled then, and enabled again by their next sign-in (not one an admin disabled).
    refused_at: Mapped[datetime | None] = mapped_column(nullable=True)


class OidcSession(Base):
    """A person signed in through the provider (a browser's cookie or the CLI's
    credentials). Only the session id's sha256 is stored; ``checked_at`` is when the
    provider last confirmed the person, read by every instance."""

    __tablename__ = "oidc_sessions"

    id_sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id"), index=True)
    issuer: Mapped[str] = mapped_column(String(512))
    subject: Mapped[str] = mapped_column(String(255))
    #: ``browser`` (the cookie; state changes need ``csrf_token``) or ``cli``.
    kind: Mapped[str] = mapped_column(String(16))
    csrf_token: Mapped[str] = mapped_column(String(64))
    refresh_token: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[datetime] = mapped_column()
    checked_at: Mapped[datetime] = mapped_column(default=utcnow)
    ended_at: Mapped[datetime | None] = mapped_column(nullable=True)
    ended_reason: Mapped[str | None] = mapped_column(String(512), nullable=True)
