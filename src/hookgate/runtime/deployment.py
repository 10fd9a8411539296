"""What a server runs: orgs, users, agents and their models, channels — independent of
where it was declared (the YAML configuration, the demo's defaults, a test)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hookgate.agent import Agent
from hookgate.config.mcp_servers import AgentMcpAccess, McpOAuthSpec, McpServerSpec
from hookgate.config.oidc import OidcSpec
from hookgate.llm.base import ChatModel
from hookgate.runs.executors.settings import WorkerSettings
from hookgate.storage.users import DeclaredUser, token_digest
from hookgate.workflows.schema import Workflow

__all__ = ["ChannelSpec", "Deployment", "OrgSpec", "UserSpec", "deployment_from_config",
           "token_digest"]


#: How often, by default, a long-lived connection asks again whether its caller may still see
#: it: revocation ends it within this time plus the token cache's (runtime/token_cache.py; at
#: once for a revocation in the same process, which clears the cache).
ACCESS_RECHECK_S = 2.0


@dataclass(slots=True)
class OrgSpec:
    id: str
    name: str = ""
    read_only: bool = False


#: A declared user (the configuration file's ``users:``); see `hookgate.storage.users`.
UserSpec = DeclaredUser


@dataclass(slots=True)
class ChannelSpec:
    id: str
    type: str
    org: str
    config: dict[str, Any] = field(default_factory=dict)
    enabled: bool = True


@dataclass
class Deployment:
    """Everything the server needs to know about what it serves."""

    database_url: str
    orgs: list[OrgSpec] = field(default_factory=list)
    users: list[UserSpec] = field(default_factory=list)
    agents: dict[str, Agent] = field(default_factory=dict)
    model_for: Callable[[str], ChatModel] | None = None
    channels: list[ChannelSpec] = field(default_factory=list)
    public_url: str | None = None
    max_steps: int = 20
    workflows: dict[str, Workflow] = field(default_factory=dict)
    #: Downstream MCP servers and, per agent id, what it may use of them (hookgate.mcp).
    mcp_servers: list[McpServerSpec] = field(default_factory=list)
    mcp_access: dict[str, AgentMcpAccess] = field(default_factory=dict)
    #: ``server: mcp_oauth``: OAuth access tokens the HTTP gateway accepts (hookgate.mcp.oauth).
    mcp_oauth: McpOAuthSpec | None = None
    #: ``worker:`` of the configuration (PostgreSQL only).
    worker: WorkerSettings = field(default_factory=WorkerSettings)
    #: ``redis_url`` of the configuration: stream wake-ups through Redis (PostgreSQL only).
    redis_url: str | None = None
    #: Agents served although they do not build (``serve --allow-broken-agents``): id →
    #: why, as `hookgate check` says it. Their runs end ``blocked_build``.
    broken_agents: dict[str, str] = field(default_factory=dict)
    #: ``server: access_recheck_s``: how often event streams and MCP sessions re-check their
    #: caller (hookgate.runtime.auth.still_allowed).
    access_recheck_s: float = ACCESS_RECHECK_S
    #: ``oidc:``: people sign in through an OpenID Connect provider (hookgate.server.oidc).
    oidc: OidcSpec | None = None


def deployment_from_config(cfg: Any) -> Deployment:
    """A Deployment from a loaded configuration (`hookgate.config.HookgateConfig`)."""
    return Deployment(
        database_url=cfg.database,
        orgs=[OrgSpec(o.id, o.name or o.id, o.read_only) for o in cfg.orgs],
        users=[
            UserSpec(
                id=u.id, org=u.org, admin=u.admin, token_sha256=u.token_digest,
                name=u.name or u.id, feishu_open_id=u.chat.feishu_open_id,
                slack_user_id=u.chat.slack_user_id, wecom_userid=u.chat.wecom_userid,
                telegram_user_id=u.chat.telegram_user_id,
                teams_aad_object_id=u.chat.teams_aad_object_id,
                discord_user_id=u.chat.discord_user_id,
                email_address=u.chat.email.lower() if u.chat.email else None,
                ntfy_topic=u.chat.ntfy_topic,
                token_expires_at=u.token_expires_at, service=u.kind == "service",
            )
            for u in cfg.users
        ],
        agents=cfg.build_agents(),
        model_for=cfg.model_for,
        channels=[ChannelSpec(c.id, c.type, c.org, dict(c.config), c.enabled)
                  for c in cfg.channels],
        public_url=cfg.server.public_url,
        workflows=cfg.workflows_by_id(),
        mcp_servers=list(cfg.mcp_servers),
        mcp_access={a.id: a.mcp for a in cfg.agents if a.mcp is not None},
        mcp_oauth=cfg.server.mcp_oauth,
        worker=WorkerSettings(**cfg.worker.model_dump()),
        redis_url=cfg.redis_url,
        access_recheck_s=cfg.server.access_recheck_s,
        oidc=cfg.oidc,
    )
