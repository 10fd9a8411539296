"""The MCP server hookgate serves to clients, built on the SDK's low-level `Server`.

The same server object serves stdio and streamable HTTP; ``principal_of`` tells each request's
handler who is asking (fixed for stdio, from the bearer token and path for HTTP). While a call
waits for a person the client gets progress notifications and, where its protocol allows,
one URL-mode elicitation pointing at the request in the inbox (on the 2026-07-28 protocol an
``input_required`` result carrying it, after which the client calls again and waits). What
the client's user answers to that elicitation is ignored: only an eligible approver decides,
in the inbox or a channel.
A client that negotiates the tasks extension gets a gated call as a task instead (see
`hookgate.mcp.tasks`); connected clients hear when a downstream server's tools changed (see
`hookgate.mcp.announce`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Any

import mcp_types as types
from mcp import MCPError
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from hookgate.mcp.announce import ToolChangeAnnouncer
from hookgate.mcp.errors import DownstreamError
from hookgate.mcp.gateway import GatewayRefusal, McpGateway, Principal
from hookgate.mcp.tasks import TASKS_EXTENSION, TaskIdParams
from hookgate.telemetry.mcp_spans import ServedSpanAttributes
from hookgate.version import __version__

log = logging.getLogger(__name__)

PrincipalOf = Callable[[ServerRequestContext[Any, Any]], Principal]

#: Who asks in the HTTP request being served. The SDK checks a per-request (2026-07-28)
#: call's ``Mcp-Param-*`` headers against the tool's input schema before any handler runs,
#: knowing only the tool's name; this says whose listing the schema comes from.
ASKING: ContextVar[Principal | None] = ContextVar("hookgate_mcp_asking", default=None)


def build_mcp_server(gateway: McpGateway, principal_of: PrincipalOf) -> Server[Any]:
    """The served MCP server: tools, resources and prompts of the asking agent."""

    announcer = ToolChangeAnnouncer()
    gateway.on_tools_changed(announcer.announce)

    async def list_tools(ctx: ServerRequestContext[Any, Any],
                         params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        who = principal_of(ctx)
        announcer.watch(ctx, who.session_id)
        return types.ListToolsResult(tools=await gateway.list_tools(who))

    async def call_tool(ctx: ServerRequestContext[Any, Any],
                        params: types.CallToolRequestParams
                        ) -> types.CallToolResult | types.InputRequiredResult | dict[str, Any]:
        who = principal_of(ctx)
        if _wants_tasks(ctx):
            task = await gateway.start_task(who, params.name, params.arguments or {})
            if task is not None:
                return task.handle()
        if params.input_responses is None and _elicits_url_per_request(ctx):
            asked = await _inbox_elicitation(gateway, who, params)
            if asked is not None:
                return asked
        return await gateway.call_tool(who, params.name, params.arguments or {},
                                       _SessionReporter(ctx))

    async def get_task(ctx: ServerRequestContext[Any, Any],
                       params: TaskIdParams) -> dict[str, Any]:
        with _as_protocol_errors():
            return (await gateway.task_view(principal_of(ctx), params.task_id)).detailed()

    async def cancel_task(ctx: ServerRequestContext[Any, Any],
                          params: TaskIdParams) -> dict[str, Any]:
        # Acknowledged whatever the id (the extension's rule); only the owner's task stops.
        with contextlib.suppress(GatewayRefusal):
            await gateway.cancel_task(principal_of(ctx), params.task_id)
        return {}

    async def update_task(ctx: ServerRequestContext[Any, Any],
                          params: TaskIdParams) -> dict[str, Any]:
        # The gateway never asks a task's client for input: nothing to take, only the ack.
        return {}

    async def list_resources(ctx: ServerRequestContext[Any, Any],
                             params: types.PaginatedRequestParams | None
                             ) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=await gateway.list_resources(principal_of(ctx)))

    async def read_resource(ctx: ServerRequestContext[Any, Any],
                            params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        with _as_protocol_errors():
            return await gateway.read_resource(principal_of(ctx), str(params.uri))

    async def list_prompts(ctx: ServerRequestContext[Any, Any],
                           params: types.PaginatedRequestParams | None
                           ) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=await gateway.list_prompts(principal_of(ctx)))

    async def get_prompt(ctx: ServerRequestContext[Any, Any],
                         params: types.GetPromptRequestParams) -> types.GetPromptResult:
        with _as_protocol_errors():
            return await gateway.get_prompt(principal_of(ctx), params.name, params.arguments)

    def input_schema(name: str) -> Mapping[str, Any] | None:
        # The listing this caller was shown, as held (the SDK would otherwise run a whole
        # tools/list through the server for every call); None skips the check, as the SDK
        # does for a tool its listing does not show.
        who = ASKING.get()
        return gateway.input_schema(who, name) if who is not None else None

    server: Server[Any] = _GatewayServer(
        "hookgate", version=__version__, get_tool_input_schema=input_schema,
        instructions="Tools behind hookgate: some calls wait for a person's approval.",
        on_list_tools=list_tools, on_call_tool=call_tool,  # type: ignore[arg-type]
        on_list_resources=list_resources, on_read_resource=read_resource,
        on_list_prompts=list_prompts, on_get_prompt=get_prompt,
        on_subscriptions_listen=announcer.listen,
    )
    # Inside the SDK's span middleware (first in the list), which opens each SERVER span.
    server.middleware.append(ServedSpanAttributes(lambda ctx: principal_of(ctx).session_id))
    server.extensions[TASKS_EXTENSION] = {}
    server.add_request_handler("tasks/get", TaskIdParams, get_task)
    server.add_request_handler("tasks/cancel", TaskIdParams, cancel_task)
    server.add_request_handler("tasks/update", TaskIdParams, update_task)
    return server


class _GatewayServer(Server[Any]):
    """The SDK's server, announcing ``tools.listChanged`` to handshake-era clients too (the
    streamable-HTTP manager asks for the default initialization options)."""

    def create_initialization_options(
        self, notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or NotificationOptions(tools_changed=True),
            experimental_capabilities, extensions)


#: How long a call of a client that takes URL elicitation per request waits for its request
#: to exist before it is answered without one (it then waits as any call does).
ELICIT_WITHIN_S = 5.0


def _elicits_url_per_request(ctx: ServerRequestContext[Any, Any]) -> bool:
    # The 2026-07-28 protocol asks the user through an input_required result; the client
    # says per request that it takes URL-mode elicitations.
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return False
    caps = ctx.session.client_capabilities
    return caps is not None and caps.elicitation is not None and caps.elicitation.url is not None


async def _inbox_elicitation(gateway: McpGateway, who: Principal,
                             params: types.CallToolRequestParams
                             ) -> types.InputRequiredResult | types.CallToolResult | None:
    """For a call that waits for a person: ask the client's user (URL mode) to follow the
    request in the inbox. The client answers and calls again; that call joins the waiting
    attempt (it is keyed by its arguments). What the user answers decides nothing."""
    found = await gateway.waiting_request(who, params.name, params.arguments or {},
                                          ELICIT_WITHIN_S)
    if found is None or isinstance(found, types.CallToolResult):
        return found
    url = gateway.inbox_url(found)
    if not url:
        return None
    ask = types.ElicitRequest(params=types.ElicitRequestURLParams(
        message=_ELICIT_MESSAGE.format(request_id=found), url=url, elicitation_id=found))
    return types.InputRequiredResult(input_requests={"approval": ask})


_ELICIT_MESSAGE = ("A person must approve this call: request {request_id}. Open the inbox to "
                   "follow it (approving here does not count; an eligible approver decides).")


def _wants_tasks(ctx: ServerRequestContext[Any, Any]) -> bool:
    # The extension lives on the per-request capabilities of the 2026-07-28 protocol.
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return False
    caps = ctx.session.client_capabilities
    return caps is not None and TASKS_EXTENSION in (caps.extensions or {})


@contextlib.contextmanager
def _as_protocol_errors() -> Any:
    try:
        yield
    except GatewayRefusal as exc:
        raise MCPError(INVALID_PARAMS, str(exc)) from None
    except DownstreamError as exc:
        raise MCPError(INTERNAL_ERROR, str(exc)) from None


class _SessionReporter:
    """Tells one client request about the approval its call waits for."""

    def __init__(self, ctx: ServerRequestContext[Any, Any]) -> None:
        self.ctx = ctx
        self._elicitation: asyncio.Task[None] | None = None
        self._reports = 0

    async def waiting(self, request_id: str, inbox_url: str | None, waited_s: float) -> None:
        where = f" at {inbox_url}" if inbox_url else " in the hookgate inbox"
        message = (f"Waiting for a person to approve request {request_id}{where} "
                   f"({waited_s:.0f}s so far)")
        self._reports += 1
        try:
            # Progress must grow with every notification; the count of reports does.
            await self.ctx.session.report_progress(float(self._reports), None, message)
        except Exception as exc:  # the client went away: the call goes on without it
            log.debug("progress for request %s not delivered: %s", request_id, exc)
        if self._elicitation is None and inbox_url and self._can_elicit_url():
            self._elicitation = asyncio.create_task(self._elicit(request_id, inbox_url))

    async def finished(self, request_id: str) -> None:
        if self._elicitation is None:
            return
        self._elicitation.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._elicitation
        with contextlib.suppress(Exception):
            await self.ctx.session.send_elicit_complete(request_id, self.ctx.request_id)

    def _can_elicit_url(self) -> bool:
        session = self.ctx.session
        caps = session.client_capabilities
        return (caps is not None and caps.elicitation is not None
                and caps.elicitation.url is not None and session.can_send_request
                and self.ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS)

    async def _elicit(self, request_id: str, url: str) -> None:
        try:
            answer = await self.ctx.session.elicit_url(
                _ELICIT_MESSAGE.format(request_id=request_id), url, request_id,
                related_request_id=self.ctx.request_id)
        except Exception as exc:
            log.debug("URL elicitation for request %s not delivered: %s", request_id, exc)
            return
        # Deliberately not a decision: the client's user may not be an eligible approver.
        log.info("client answered the elicitation of request %s with %r (ignored)",
                 request_id, answer.action)
