"""The configuration file's shape (SPEC §6, pinned): typed sections that forbid unknown keys.

`HookgateConfig` is what the loader returns; besides the sections it knows the tools the
file imported, and turns its declarations into `Agent` objects and models.
"""

from __future__ import annotations

import copy
import difflib
import hashlib
import hmac
import re
from typing import Annotated, Any, Literal

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from hookgate.agent import Agent, ApproverScope, ConfirmationMode, quorum_problem
from hookgate.approvals.quorum_rule import MAX_APPROVALS, QuorumRule
from hookgate.channels.validators import channel_types
from hookgate.config.errors import ConfigError
from hookgate.config.mcp_servers import AgentMcpAccess, McpOAuthSpec, McpServerSpec
from hookgate.config.oidc import OidcSpec
from hookgate.config.policies import with_org_policies
from hookgate.durations import Seconds
from hookgate.escalation_policy import EscalationPolicy, PolicyError, parse_duration
from hookgate.hooks.errors import HookBuildError
from hookgate.llm.base import ChatModel, ModelError
from hookgate.llm.openai_compat import DEFAULT_TIMEOUT_S, OpenAICompatibleModel
from hookgate.llm.scripted import ScriptedLLM, parse_turn
from hookgate.telemetry.setup import TelemetrySettings
from hookgate.tools.tool import Tool
from hookgate.workflows.schema import Workflow

DEFAULT_DATABASE = "sqlite+aiosqlite:///hookgate.db"
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")


class _Section(BaseModel):
    """A mapping in the file: unknown keys are errors, with a suggestion for typos."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    @model_validator(mode="before")
    @classmethod
    def _only_known_keys(cls, data: Any) -> Any:
        if isinstance(data, dict):
            known = list(cls.model_fields)
            for key in data:
                if key in known:
                    continue
                close = difflib.get_close_matches(str(key), known, n=1)
                hint = f"; did you mean '{close[0]}'?" if close else ""
                raise PydanticCustomError(
                    "unknown_key", "{detail}",
                    {"detail": f"unknown key '{key}'{hint} (allowed keys: {', '.join(known)})"},
                )
        return data


NonEmpty = Annotated[str, Field(min_length=1)]


class OrgSpec(_Section):
    id: NonEmpty
    name: str | None = None
    read_only: bool = False


class ChatIdentities(_Section):
    """Who a user is on each chat platform (to match an approver's click to a user)."""

    feishu_open_id: str | None = None
    slack_user_id: str | None = None
    wecom_userid: str | None = None
    #: The numeric Telegram user id, e.g. 123456789 (kept as text).
    telegram_user_id: str | None = None
    #: The Microsoft Entra object id of a Teams user (a GUID).
    teams_aad_object_id: str | None = None
    #: A Discord user id (a snowflake, kept as text).
    discord_user_id: str | None = None
    #: The address an email channel sends this person's decision links to.
    email: str | None = None
    #: This person's own ntfy topic.
    ntfy_topic: str | None = None

    @field_validator("telegram_user_id", "discord_user_id", mode="before")
    @classmethod
    def _numeric_id_as_text(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


#: What a user entry is: a person (decides) or a service identity (an agent's token: acts for
#: the people its calls name, never decides, votes or creates a standing rule).
USER_KINDS = ("person", "service")


class UserSpec(_Section):
    id: NonEmpty
    org: NonEmpty
    admin: bool = False
    #: ``person`` (the default) or ``service`` (see USER_KINDS).
    kind: Literal["person", "service"] = "person"
    name: str | None = None
    token: str | None = Field(default=None, repr=False)
    token_sha256: str | None = None
    #: When the token stops signing in (an ISO 8601 time with its zone, e.g. ...Z).
    token_expires_at: AwareDatetime | None = None
    chat: ChatIdentities = Field(default_factory=ChatIdentities)

    @field_validator("token_sha256")
    @classmethod
    def _hex_digest(cls, value: str | None) -> str | None:
        if value is None:
            return None
        value = value.strip().lower()
        if not _SHA256_HEX.fullmatch(value):
            raise ValueError("token_sha256 must be 64 hex digits (sha256 of the token)")
        return value

    @model_validator(mode="after")
    def _one_token_form(self) -> UserSpec:
        if self.kind == "service" and self.admin:
            raise ValueError("a service identity (kind: service) cannot be an admin: it "
                             "acts for people and never decides")
        if self.token is not None and self.token_sha256 is not None:
            raise ValueError("give 'token' or 'token_sha256', not both")
        if self.token is not None and not self.token:
            raise ValueError("'token' must not be empty")
        return self

    @property
    def token_digest(self) -> str | None:
        """sha256 hex of the user's API token, whichever way the file gave it."""
        if self.token is not None:
            return hashlib.sha256(self.token.encode("utf-8")).hexdigest()
        return self.token_sha256

    def has_token(self, presented: str) -> bool:
        """True when ``presented`` is this user's token (constant-time comparison)."""
        digest = self.token_digest
        if digest is None:
            return False
        given = hashlib.sha256(presented.encode("utf-8")).hexdigest()
        return hmac.compare_digest(given, digest)


class ChannelSpec(_Section):
    id: NonEmpty
    type: str
    org: NonEmpty
    config: dict[str, Any] = Field(default_factory=dict)
    enabled: bool = True

    @field_validator("type")
    @classmethod
    def _known_type(cls, value: str) -> str:
        known = channel_types()
        if value not in known:
            raise ValueError(f"unknown channel type '{value}' (known: {', '.join(known)})")
        return value


class OpenAIModelSpec(_Section):
    """A chat-completions endpoint; unset settings come from HOOKGATE_LLM_* at load time."""

    type: Literal["openai"]
    base_url: str | None = None
    api_key: str | None = Field(default=None, repr=False)
    model: str | None = None
    timeout: Seconds = Field(default=DEFAULT_TIMEOUT_S, gt=0)
    max_retries: int = Field(default=2, ge=0)
    extra_headers: dict[str, str] = Field(default_factory=dict)

    def build(self) -> ChatModel:
        return OpenAICompatibleModel(self.base_url, self.api_key, self.model,
                                     timeout=self.timeout, extra_headers=self.extra_headers,
                                     max_retries=self.max_retries)


class ScriptedModelSpec(_Section):
    """An offline model playing ``turns`` (see ScriptedLLM)."""

    type: Literal["scripted"]
    turns: list[dict[str, Any]] = Field(min_length=1)

    @field_validator("turns")
    @classmethod
    def _turns_parse(cls, turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for index, turn in enumerate(turns):
            try:
                parse_turn(turn, index)
            except ModelError as exc:
                raise ValueError(str(exc)) from None
        return turns

    def build(self) -> ChatModel:
        return ScriptedLLM(copy.deepcopy(self.turns))


ModelSpec = Annotated[OpenAIModelSpec | ScriptedModelSpec, Field(discriminator="type")]


class QuorumSpec(_Section):
    """An ``approval_quorum`` entry: calls matching ``matcher`` (and ``when``) need
    ``approvals_required`` distinct approvers; ``allow_self_approval: false`` adds four eyes."""

    matcher: str = "*"
    when: str | None = None
    approvals_required: int = Field(default=2, ge=1, le=MAX_APPROVALS)
    allow_self_approval: bool | None = None

    @model_validator(mode="after")
    def _parses(self) -> QuorumSpec:
        try:
            self.rule()
        except HookBuildError as exc:
            raise ValueError(str(exc)) from None
        return self

    def rule(self) -> QuorumRule:
        return QuorumRule.parse(self.matcher, self.when, self.approvals_required,
                                self.allow_self_approval)


class AgentSpec(_Section):
    id: NonEmpty
    name: str | None = None
    org: str | None = None
    owner: str | None = None
    model: NonEmpty
    instructions: str = ""
    tools: list[str] = Field(default_factory=list)
    require_confirmation_for_all: bool = False
    confirmation_mode: ConfirmationMode = "auto"
    confirmation_approver_scope: ApproverScope = "initiator"
    confirmation_timeout_s: Seconds = Field(default=3600.0, gt=0)
    approval_channel_id: str | None = None
    #: More channels each request goes to at once (hookgate.approvals.routing).
    approval_channel_ids: list[NonEmpty] = Field(default_factory=list)
    notify_on_completion: bool = False
    refuse_retry_after_rejection: bool = True
    #: Escalation of requests nobody decides (hookgate.escalation_policy):
    #: durations are seconds or text such as 15m, 90s, 2h.
    remind_after: float | str | None = None
    max_reminders: int = 1
    escalate_after: float | str | None = None
    escalate_to: list[NonEmpty] = Field(default_factory=list)
    escalation_channel_id: str | None = None
    on_timeout: str = "reject"
    allow_self_approval: bool = True
    approval_quorum: list[QuorumSpec] = Field(default_factory=list)
    #: Identity-provider groups (``oidc:``) of which a person must be in one to decide this
    #: agent's requests, on top of the approver scope; empty: no such restriction.
    approver_groups: list[NonEmpty] = Field(default_factory=list)
    model_config_json: dict[str, Any] = Field(default_factory=dict)
    #: What the agent may use through the MCP gateway (hookgate.mcp).
    mcp: AgentMcpAccess | None = None

    @model_validator(mode="after")
    def _followup_works(self) -> AgentSpec:
        try:
            self.escalation_policy().check_against(self.confirmation_timeout_s)
        except PolicyError as exc:
            raise ValueError(str(exc)) from None
        return self

    def escalation_policy(self) -> EscalationPolicy:
        """The agent's reminders, escalation and timeout fallback (PolicyError if unusable)."""
        return EscalationPolicy(
            remind_after_s=(None if self.remind_after is None
                            else parse_duration(self.remind_after, "remind_after")),
            max_reminders=self.max_reminders,
            escalate_after_s=(None if self.escalate_after is None
                              else parse_duration(self.escalate_after, "escalate_after")),
            escalate_to=tuple(self.escalate_to),
            escalation_channel_id=self.escalation_channel_id,
            on_timeout=self.on_timeout,  # type: ignore[arg-type]  # checked by the policy
        )

    @model_validator(mode="after")
    def _quorum_possible(self) -> AgentSpec:
        problem = quorum_problem(self.confirmation_approver_scope, self.allow_self_approval,
                                 [(q.approvals_required, q.allow_self_approval)
                                  for q in self.approval_quorum])
        if problem is not None:
            raise ValueError(problem)
        return self


class OrgPoliciesSpec(_Section):
    """``policies:``: a Cedar policy set for every agent of an org (hookgate.policies)."""

    org: NonEmpty
    #: A ``.cedar`` file or a folder of them, relative to the configuration file.
    path: NonEmpty
    #: What happens to a call no policy permits: an explicit choice, no implicit one.
    default: Literal["deny", "allow"]
    #: ``shadow``: the set is evaluated on every call and only records what it would have
    #: decided (hookgate.policies.shadow); ``enforce`` (the default) decides.
    mode: Literal["enforce", "shadow"] = "enforce"


class ServerSpec(_Section):
    public_url: str | None = None
    #: How often event streams and MCP sessions ask again whether their caller still has
    #: access (a revoked token, a disabled user or one moved to another org ends them).
    access_recheck_s: float = Field(2.0, gt=0, le=300)
    #: OAuth 2.1 access tokens for the MCP gateway (hookgate.mcp.oauth); None: API tokens only.
    mcp_oauth: McpOAuthSpec | None = None

    @model_validator(mode="after")
    def _oauth_audience(self) -> ServerSpec:
        # The tokens' audience is the configuration's; a request's Host never names it.
        if self.mcp_oauth is not None and not self.mcp_oauth.audience and not self.public_url:
            raise ValueError("mcp_oauth needs public_url (or mcp_oauth.audience): the MCP "
                             "access tokens' audience comes from the configuration, never "
                             "from the request's Host header")
        return self


class TelemetrySpec(_Section):
    """``telemetry:``: OpenTelemetry export; the OTEL_* variables configure the rest.

    ``enabled`` unset means on when an OTLP endpoint or exporter variable is set.
    """

    enabled: bool | None = None
    service_name: NonEmpty | None = None
    endpoint: NonEmpty | None = None
    capture_content: bool = False
    mask_patterns: list[NonEmpty] = Field(default_factory=list)

    def settings(self) -> TelemetrySettings:
        return TelemetrySettings(self.enabled, self.service_name, self.endpoint,
                                 self.capture_content, tuple(self.mask_patterns))


class WorkerSpec(_Section):
    """The run worker on PostgreSQL (ignored for a SQLite file): jobs run at once, the
    heartbeat interval, after how long without a heartbeat a worker counts as dead, the
    tick expiry jobs are grouped by, and how often an idle worker looks for jobs that
    became due."""

    concurrency: int = Field(default=100, ge=1, le=10_000)
    heartbeat_s: Seconds = Field(default=5.0, gt=0, le=3600)
    stalled_after_s: Seconds = Field(default=30.0, gt=0, le=86_400)
    shutdown_grace_s: Seconds = Field(default=5.0, ge=0, le=3600)
    expiry_tick_s: Seconds = Field(default=5.0, ge=0.1, le=3600)
    #: A scheduled job (a follow-up, an expiry) starts at most this long after it is due.
    poll_s: Seconds = Field(default=5.0, ge=0.1, le=3600)
    #: A run started on an instance that runs a worker advances there, its job inserted
    #: already taken (up to ``concurrency`` such runs at once), instead of going through
    #: the queue to whichever worker fetches it first.
    take_own_runs: bool = True


class HookgateConfig(_Section):
    """A loaded configuration file. Build it with `load_config` or `parse_config`."""

    database: NonEmpty = DEFAULT_DATABASE
    orgs: list[OrgSpec] = Field(default_factory=list)
    users: list[UserSpec] = Field(default_factory=list)
    channels: list[ChannelSpec] = Field(default_factory=list)
    tools: list[str] = Field(default_factory=list)
    models: dict[str, ModelSpec] = Field(default_factory=dict)
    agents: list[AgentSpec] = Field(default_factory=list)
    server: ServerSpec = Field(default_factory=ServerSpec)
    worker: WorkerSpec = Field(default_factory=WorkerSpec)
    #: Redis for the wake-ups of streams between instances (PostgreSQL only; see
    #: runs/redis_wakeups.py). Without it, PostgreSQL notifications carry them.
    redis_url: NonEmpty | None = None
    workflows: list[Workflow] = Field(default_factory=list)
    telemetry: TelemetrySpec = Field(default_factory=TelemetrySpec)
    mcp_servers: list[McpServerSpec] = Field(default_factory=list)
    policies: list[OrgPoliciesSpec] = Field(default_factory=list)
    #: OpenID Connect sign-in for people (hookgate.server.oidc); None: API tokens only.
    oidc: OidcSpec | None = None

    _source: str = PrivateAttr(default="<config>")
    _tool_objects: dict[str, Tool] = PrivateAttr(default_factory=dict)

    # -- what the loader resolved ------------------------------------------------------------

    @property
    def source(self) -> str:
        """The file this configuration came from (as given to the loader)."""
        return self._source

    @property
    def tool_objects(self) -> dict[str, Tool]:
        """The imported tools by name, plus the built-in ``channel_notify`` (a server binds
        it to its channels) when an agent lists it and no ``tools:`` entry takes the name."""
        from hookgate.channels.notify_tool import CHANNEL_NOTIFY, UNBOUND_CHANNEL_NOTIFY

        builtin = ({CHANNEL_NOTIFY: UNBOUND_CHANNEL_NOTIFY}
                   if any(CHANNEL_NOTIFY in a.tools for a in self.agents) else {})
        return {**builtin, **self._tool_objects}

    # -- lookups -----------------------------------------------------------------------------

    def org(self, org_id: str) -> OrgSpec | None:
        return next((o for o in self.orgs if o.id == org_id), None)

    def user(self, user_id: str) -> UserSpec | None:
        return next((u for u in self.users if u.id == user_id), None)

    def user_for_token(self, token: str) -> UserSpec | None:
        """The user whose API token this is, if any."""
        return next((u for u in self.users if u.has_token(token)), None)

    def channel(self, channel_id: str) -> ChannelSpec | None:
        return next((c for c in self.channels if c.id == channel_id), None)

    def agent_spec(self, agent_id: str) -> AgentSpec:
        """The agent declared as ``agent_id``; ConfigError naming the known ones if none."""
        found = next((a for a in self.agents if a.id == agent_id), None)
        if found is None:
            known = ", ".join(a.id for a in self.agents) or "none"
            raise ConfigError(self._source, "agents", f"no agent '{agent_id}' (agents: {known})")
        return found

    def workflows_by_id(self) -> dict[str, Workflow]:
        """The declared workflows (``workflows:``, see `hookgate.workflows`), by id."""
        return {w.id: w for w in self.workflows}

    # -- building ----------------------------------------------------------------------------

    def build_agent(self, agent_id: str) -> Agent:
        """The `Agent` for ``agent_id`` (``owner`` → owner_user_id, ``org`` → org_id)."""
        spec = self.agent_spec(agent_id)
        known = self.tool_objects
        return Agent(
            id=spec.id,
            name=spec.name or spec.id,
            instructions=spec.instructions,
            tools=[known[name] for name in spec.tools],
            model_config_json=with_org_policies(copy.deepcopy(spec.model_config_json),
                                                [p for p in self.policies if p.org == spec.org]),
            require_confirmation_for_all=spec.require_confirmation_for_all,
            confirmation_mode=spec.confirmation_mode,
            confirmation_approver_scope=spec.confirmation_approver_scope,
            owner_user_id=spec.owner,
            org_id=spec.org,
            approval_channel_id=spec.approval_channel_id,
            approval_channel_ids=tuple(spec.approval_channel_ids),
            confirmation_timeout_s=spec.confirmation_timeout_s,
            model=spec.model,
            notify_on_completion=spec.notify_on_completion,
            refuse_retry_after_rejection=spec.refuse_retry_after_rejection,
            followup=spec.escalation_policy(),
            allow_self_approval=spec.allow_self_approval,
            approval_quorum=tuple(q.rule() for q in spec.approval_quorum),
            approver_groups=tuple(spec.approver_groups),
        )

    def build_agents(self) -> dict[str, Agent]:
        """Every declared agent, by id, in file order."""
        return {spec.id: self.build_agent(spec.id) for spec in self.agents}

    def build_model(self, name: str) -> ChatModel:
        """A fresh model client for the model declared as ``name``."""
        spec = self.models.get(name)
        if spec is None:
            known = ", ".join(self.models) or "none"
            raise ConfigError(self._source, "models", f"no model '{name}' (models: {known})")
        try:
            return spec.build()
        except ModelError as exc:
            raise ConfigError(self._source, f"models.{name}", str(exc)) from exc

    def model_for(self, agent_id: str) -> ChatModel:
        """A fresh model client for the agent's ``model``."""
        return self.build_model(self.agent_spec(agent_id).model)
