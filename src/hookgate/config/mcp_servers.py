"""The configuration of the MCP gateway: ``mcp_servers:`` entries and an agent's ``mcp:`` access.

A downstream server is a command over stdio (``command``, ``args``, ``env``, ``cwd``) or a
streamable-HTTP ``url`` with ``headers``; ``${VAR}`` works as everywhere in the file. Its tools
appear as ``mcp__<id>__<tool>``. Gate rules (``requires_confirmation``) use the matcher and
``when`` language of declarative hooks, matched against the downstream tool's own name; one
with ``mode: shadow`` never asks, what it would have decided is recorded (hookgate.mcp.mapping).
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from hookgate.hooks.errors import HookBuildError
from hookgate.matching import Condition, ToolMatcher
from hookgate.policies.shadow import mode_of

#: Gateway tool names: ``mcp__<server id>__<downstream tool name>``.
PREFIX = "mcp__"
_SERVER_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")


def tool_name(server_id: str, downstream: str) -> str:
    """The name a downstream tool has behind the gateway."""
    return f"{PREFIX}{server_id}__{downstream}"


def split_tool_name(name: str) -> tuple[str, str] | None:
    """``mcp__git__git_status`` → ``("git", "git_status")``; None for any other shape."""
    if not name.startswith(PREFIX):
        return None
    server, sep, downstream = name[len(PREFIX):].partition("__")
    if not sep or not server or not downstream:
        return None
    return server, downstream


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class GateRule(_Strict):
    """Calls matching ``matcher`` (and ``when``, if given) need a person's approval;
    ``reason`` tells the approver in words why (shown on the card with the rule);
    ``mode``: ``enforce`` (the default) or ``shadow`` (never asks, only records that it
    would: checked by the server's entry, which names the rule)."""

    matcher: str = "*"
    when: str | None = None
    reason: Annotated[str, Field(min_length=1, max_length=500)] | None = None
    mode: Any = None

    def describe(self, where: str) -> str:
        """The rule declared at ``where`` as an approver reads it: ``where (matcher X when
        C): reason``."""
        when = f" when {self.when}" if self.when else ""
        said = f": {self.reason}" if self.reason else ""
        return f"{where} (matcher {self.matcher}{when}){said}"

    @model_validator(mode="after")
    def _parses(self) -> GateRule:
        try:
            ToolMatcher.parse(self.matcher)
            if self.when is not None:
                Condition(self.when)
        except HookBuildError as exc:
            raise ValueError(str(exc)) from None
        return self


class ToolOverride(_Strict):
    """What the configuration says about one downstream tool, over its annotations."""

    writes: bool | None = None
    requires_confirmation: bool | None = None


class McpServerSpec(_Strict):
    """One downstream MCP server."""

    id: Annotated[str, Field(min_length=1, max_length=64)]
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict, repr=False)
    #: How long a started server may take to answer its handshake.
    startup_timeout_s: float = Field(default=30.0, gt=0)
    #: How long ``tools/list`` waits for this server to come up; past it the listing answers
    #: without its tools, and clients hear ``tools/list_changed`` once it is up.
    list_wait_s: float = Field(default=10.0, ge=0)
    #: How long one call may take downstream before it fails (outcome unknown).
    timeout_s: float = Field(default=60.0, gt=0)
    requires_confirmation: bool | list[GateRule] = False
    tools: dict[str, ToolOverride] = Field(default_factory=dict)
    #: What this server's tools return is untrusted content (web pages, mail, tickets
    #: anyone may write): argument values found only there are traced as untrusted.
    untrusted_output: bool = False

    @field_validator("id")
    @classmethod
    def _plain_id(cls, value: str) -> str:
        if not _SERVER_ID.fullmatch(value) or "__" in value:
            raise ValueError(f"server id {value!r} must be letters, digits, '-' and single '_' "
                             "(it becomes part of the tool names mcp__<id>__<tool>)")
        return value

    @model_validator(mode="after")
    def _gate_rule_modes(self) -> McpServerSpec:
        if isinstance(self.requires_confirmation, list):
            for i, rule in enumerate(self.requires_confirmation):
                try:
                    mode_of(rule.mode, f"mcp_servers[{self.id}].requires_confirmation[{i}]")
                except HookBuildError as exc:
                    raise ValueError(str(exc)) from None
        return self

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerSpec:
        if (self.command is None) == (self.url is None):
            raise ValueError("give 'command' (stdio) or 'url' (streamable HTTP), exactly one")
        if self.url is not None and (self.args or self.env or self.cwd):
            raise ValueError("'args', 'env' and 'cwd' are for stdio servers ('command')")
        if self.command is not None and self.headers:
            raise ValueError("'headers' are for streamable-HTTP servers ('url')")
        return self


class McpOAuthSpec(_Strict):
    """``server: mcp_oauth:``: access tokens of an OAuth 2.1 authorization server accepted by
    the HTTP gateway (beside hookgate's own API tokens), as the MCP specification describes."""

    #: The authorization server's issuer identifier (the tokens' ``iss``).
    issuer: Annotated[str, Field(min_length=1)]
    #: Where its signing keys are published (a JWKS document).
    jwks_url: Annotated[str, Field(min_length=1)]
    #: Scopes every token must carry; a token lacking one is refused (403).
    scopes: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=lambda: ["mcp"])
    #: The claim naming the hookgate user the token acts for.
    user_claim: Annotated[str, Field(min_length=1)] = "sub"
    #: The ``aud`` tokens are issued for; default: the gateway's URL (``/mcp`` or
    #: ``/mcp/<agent>`` on ``server.public_url``). One of the two must be configured.
    audience: Annotated[str, Field(min_length=1)] | None = None

    @field_validator("issuer", "jwks_url")
    @classmethod
    def _https(cls, value: str) -> str:
        if not value.startswith(("https://", "http://127.0.0.1", "http://localhost")):
            raise ValueError("must be an https:// URL (http only on loopback)")
        return value


class AgentMcpAccess(_Strict):
    """Which downstream servers, single tools, resources and prompts an agent may use."""

    servers: list[str] = Field(default_factory=list)
    tools: list[str] = Field(default_factory=list)
    resources: bool = False
    prompts: bool = False

    def allows(self, name: str) -> bool:
        """True when the gateway tool ``name`` is one this agent may see and call."""
        parts = split_tool_name(name)
        return parts is not None and (parts[0] in self.servers or name in self.tools)

    def server_ids(self) -> list[str]:
        """Every server this agent reaches (whole, or for single tools), in order."""
        out = list(self.servers)
        for name in self.tools:
            parts = split_tool_name(name)
            if parts is not None and parts[0] not in out:
                out.append(parts[0])
        return out


def check_access(agent_at: str, access: AgentMcpAccess,
                 servers: dict[str, McpServerSpec]) -> list[tuple[str, str]]:
    """Problems (key path, what) with an agent's ``mcp:`` against the declared servers."""
    known = ", ".join(servers) or "none"
    problems = []
    for i, server in enumerate(access.servers):
        if server not in servers:
            problems.append((f"{agent_at}.mcp.servers[{i}]",
                             f"unknown MCP server '{server}' (mcp_servers: {known})"))
    for i, name in enumerate(access.tools):
        parts = split_tool_name(name)
        if parts is None:
            problems.append((f"{agent_at}.mcp.tools[{i}]",
                             f"'{name}' is not an MCP tool name (mcp__<server>__<tool>)"))
        elif parts[0] not in servers:
            problems.append((f"{agent_at}.mcp.tools[{i}]",
                             f"unknown MCP server '{parts[0]}' (mcp_servers: {known})"))
    return problems

