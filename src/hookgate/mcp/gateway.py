"""`McpGateway`: what an MCP client of one agent may see and do, each call on the guarded path.

``tools/list`` shows the downstream tools the agent may use; ``tools/call`` runs through
`execute_tool_call` (hooks, read-only guard, rate limits, audit, truncation, the gate) and only
then reaches the downstream server. A call that needs a person waits on the gate in a task of
the gateway, not of the client's request: a client that disconnects and retries the identical
call joins the same attempt (see `hookgate.mcp.attempts`), and the approved call runs
downstream once. A principal that brings ``still_allowed`` keeps its wait only while it has
access: a revoked token, a disabled user or one moved to another org cancels the wait (and the
request with it) within ``access_recheck_s`` (see `hookgate.runtime.access_watch`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import mcp_types as types

from hookgate.agent import Agent
from hookgate.canonical import canonical_sha256
from hookgate.catalog.build import build_registry
from hookgate.catalog.builtin.audit_log import AuditLog
from hookgate.config.mcp_servers import AgentMcpAccess, McpServerSpec, split_tool_name, tool_name
from hookgate.hooks.errors import HookBuildError
from hookgate.hooks.model import HookContext, HookPoint
from hookgate.hooks.registry import HookRegistry
from hookgate.hooks.services import HookServices
from hookgate.mcp.attempts import Attempt, AttemptFinder, call_key, fresh_attempt
from hookgate.mcp.downstream import DownstreamServer
from hookgate.mcp.errors import DownstreamError
from hookgate.mcp.mapping import (
    McpTool,
    gateway_tool,
    listed_tool,
    result_of,
    with_shadow_rules,
)
from hookgate.mcp.tasks import TaskView, run_of_task, unfollowed_result, view_of
from hookgate.policies.modes import modes_version
from hookgate.runtime.access_watch import AccessEnded, StillAllowed, while_allowed
from hookgate.storage.confirmations import ConfirmationRecord
from hookgate.storage.database import Database
from hookgate.storage.types import utcnow
from hookgate.tools.calls import CallIdentity, ToolCall, ToolOutcome
from hookgate.tools.guarded import build_metadata, execute_tool_call
from hookgate.tools.guarded_call import new_call
from hookgate.tools.ledger import ExecutionLedger, PriorExecution
from hookgate.tools.tool import Tool

log = logging.getLogger(__name__)

DEFAULT_RETRY_WINDOW_S = 600.0
DEFAULT_PROGRESS_INTERVAL_S = 10.0
DEFAULT_ACCESS_RECHECK_S = 2.0
#: Finished gated calls whose results a task poll can still fetch from this process.
_FINISHED_KEPT = 1024
#: How often a call polls the ledger while another process runs the same approved call.
_SETTLE_POLL_S = 0.1


class GatewayRefusal(Exception):
    """A request the gateway does not serve (a resource or prompt the agent may not use)."""


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is on the other end of an MCP session: a hookgate user acting through an agent."""

    agent: Agent
    access: AgentMcpAccess
    user_id: str
    org_id: str
    session_id: str | None = None
    #: Whether the user may still act (hookgate.runtime.auth.still_allowed); None for a
    #: principal whose access cannot change (a library embedding the gateway).
    still_allowed: StillAllowed | None = None


class WaitReporter(Protocol):
    """How a served session keeps its client informed while a call waits for a person."""

    async def waiting(self, request_id: str, inbox_url: str | None, waited_s: float) -> None: ...

    async def finished(self, request_id: str) -> None: ...


@dataclass(eq=False)
class _Attempt:
    """One guarded call in flight in this process; identical calls join it."""

    found: Attempt | None = None
    #: (user, agent) of the principal that made the call: only they see it as a task.
    owner: tuple[str, str] = ("", "")
    created_at: datetime = field(default_factory=utcnow)
    request_id: str | None = None
    pending: asyncio.Event = field(default_factory=asyncio.Event)
    replayed: bool = False
    #: A person decided: an approved call may be running downstream, and is not interrupted.
    resolved: bool = False
    task: asyncio.Task[types.CallToolResult] | None = None

    def on_event(self, type_: str, data: dict[str, Any]) -> None:
        if type_ == "confirmation_pending":
            self.request_id = str(data.get("request_id"))
            self.pending.set()
        elif type_ == "confirmation_resolved":
            self.resolved = True


class _WatchedLedger:
    """The execution ledger, noting when it hands back an earlier result (a replay).

    A claim another process holds without a result yet is most likely that process running
    the same approved call right now (both took it at once): the claim waits up to
    ``settle_s`` for its result, so this caller gets it too instead of "outcome unknown".
    """

    def __init__(self, inner: ExecutionLedger, attempt: _Attempt, settle_s: float) -> None:
        self.inner = inner
        self.attempt = attempt
        self.settle_s = settle_s

    async def claim(self, run_id: str, tool_call_id: str, tool_name: str, args_sha256: str
                    ) -> PriorExecution | None:
        prior = await self.inner.claim(run_id, tool_call_id, tool_name, args_sha256)
        loop = asyncio.get_running_loop()
        give_up = loop.time() + self.settle_s
        while prior is not None and prior.observation is None and loop.time() < give_up:
            await asyncio.sleep(_SETTLE_POLL_S)
            prior = await self.inner.claim(run_id, tool_call_id, tool_name, args_sha256)
        if prior is not None:
            self.attempt.replayed = True
        return prior

    async def finish(self, run_id: str, tool_call_id: str, observation: str, ok: bool) -> None:
        await self.inner.finish(run_id, tool_call_id, observation, ok)


@dataclass(slots=True)
class _Share:
    """What one downstream server offers one agent, as of the server's listing ``generation``."""

    generation: int
    tools: dict[str, Tool]
    listed: dict[str, types.Tool]


@dataclass(slots=True)
class _Toolbox:
    tools: dict[str, Tool]
    listed: dict[str, types.Tool]
    unavailable: dict[str, str]


class McpGateway:
    """The gateway's state in one process: downstream connections, toolboxes, calls in flight."""

    def __init__(
        self,
        servers: Sequence[McpServerSpec],
        *,
        services: HookServices,
        db: Database,
        ledger: ExecutionLedger,
        inbox_url: Callable[[str], str | None] = lambda _id: None,
        retry_window_s: float = DEFAULT_RETRY_WINDOW_S,
        progress_interval_s: float = DEFAULT_PROGRESS_INTERVAL_S,
        access_recheck_s: float = DEFAULT_ACCESS_RECHECK_S,
    ) -> None:
        self.servers = {s.id: DownstreamServer(s) for s in servers}
        self.services = services
        self.ledger = ledger
        self.inbox_url = inbox_url
        self.progress_interval_s = progress_interval_s
        self.access_recheck_s = access_recheck_s
        self.attempts = AttemptFinder(db, retry_window_s)
        self.retry_window_s = retry_window_s
        #: Each agent's hook chain, and the version of the modes it was built with.
        self._shares: dict[tuple[str, str], _Share] = {}
        self._inflight: dict[str, _Attempt] = {}
        #: Gated calls in flight and recently finished, by task id (= their call id).
        self._by_task: dict[str, _Attempt] = {}
        self._finished: OrderedDict[str, tuple[_Attempt, types.CallToolResult]] = OrderedDict()
        self._resource_owner: dict[tuple[str, str], str] = {}
        self._tools_listeners: list[Callable[[str], Awaitable[None]]] = []
        #: Server starts a bounded listing stopped waiting for, and their announcements.
        self._starting: set[asyncio.Future[Any]] = set()
        for server in self.servers.values():
            server.on_tools_changed(self._downstream_tools_changed)

    def on_tools_changed(self, listener: Callable[[str], Awaitable[None]]) -> None:
        """Await ``listener(server id)`` when a downstream server's tools changed (the
        served sessions tell their clients ``notifications/tools/list_changed``)."""
        self._tools_listeners.append(listener)

    async def _downstream_tools_changed(self, server_id: str) -> None:
        # The toolboxes rebuild from the new listing on their next use (generation moved).
        log.info("MCP server '%s' changed its tools", server_id)
        for listener in list(self._tools_listeners):
            await listener(server_id)

    async def aclose(self) -> None:
        """Stop the calls in flight (their requests stay pending when the approval service
        is shutting down) and the downstream servers."""
        tasks = [a.task for a in self._inflight.values() if a.task is not None]
        tasks += [f for f in self._starting if isinstance(f, asyncio.Task)]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for server in self.servers.values():
            await server.close()

    async def cancel_waits_of(self, user_id: str) -> None:
        """Cancel the calls of ``user_id`` still waiting for a person (their requests are
        cancelled with them): the user lost access. An approved call running downstream
        finishes; its result is not shown (see `_run`)."""
        waiting = [a.task for a in self._inflight.values()
                   if a.owner[0] == user_id and not a.resolved and a.task is not None]
        for task in waiting:
            task.cancel()
        for task in waiting:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def warm(self, server_ids: Sequence[str]) -> None:
        """Start these downstream servers now, in the background, so the first listing
        finds them up (a failed start is logged; the next use tries again)."""
        for server_id in server_ids:
            server = self.servers.get(server_id)
            if server is None or server.running:
                continue
            started = asyncio.ensure_future(self._warm(server))
            self._starting.add(started)
            started.add_done_callback(self._starting.discard)

    @staticmethod
    async def _warm(server: DownstreamServer) -> None:
        try:
            await server.client()
        except DownstreamError as exc:
            log.warning("%s", exc)

    async def restart(self, server_id: str) -> None:
        """Restart one downstream server (DownstreamError if it does not come back)."""
        server = self.servers.get(server_id)
        if server is None:
            raise GatewayRefusal(f"no MCP server '{server_id}' "
                                 f"(mcp_servers: {', '.join(self.servers) or 'none'})")
        await server.restart()

    # -- tools ---------------------------------------------------------------------------------

    async def list_tools(self, who: Principal) -> list[types.Tool]:
        """The agent's tools, of every server that is up or comes up within its
        ``list_wait_s``; a server still starting then is listed once it is up, and the
        clients are told (``tools/list_changed``)."""
        box = await self._toolbox(who, bounded=True)
        return [listed_tool(box.tools[name], listed) for name, listed in box.listed.items()]

    async def prepare_call(self, who: Principal, name: str) -> None:
        """Have the tools of ``name``'s server ready for ``who`` (started and listed, unless
        the server fails to start), so `input_schema` can answer without waiting."""
        await self._toolbox(who, name)

    def input_schema(self, who: Principal, name: str) -> Mapping[str, Any] | None:
        """The input schema ``tools/list`` shows ``who`` for ``name``, from the listing at
        hand (no wait, no downstream request); None when ``who`` was not shown ``name`` or its
        server is not up and listed."""
        parts = split_tool_name(name)
        if parts is None or parts[0] not in self.servers \
                or parts[0] not in who.access.server_ids():
            return None
        share = self._ready_share(who, parts[0])
        listed = share.listed.get(name) if share is not None else None
        return listed.input_schema if listed is not None else None

    async def call_tool(self, who: Principal, name: str, args: Any,
                        reporter: WaitReporter | None = None) -> types.CallToolResult:
        """Run one call through the guarded path.

        A call that needs a person runs in a task of the gateway and is keyed (see
        `hookgate.mcp.attempts`): an identical call joins it while it waits, and after the
        decision meets the same outcome. Any other call simply runs, every time it is made.
        """
        box, attempt = await self._begin(who, name, args)
        if attempt is None:
            return await self._run(who, name, args, box, None, _Attempt())
        return await self._follow(attempt, reporter)

    async def start_task(self, who: Principal, name: str, args: Any) -> TaskView | None:
        """Start a call that needs a person in the background and return its task; None
        when the call needs no one (the caller runs it with `call_tool`)."""
        _box, attempt = await self._begin(who, name, args)
        if attempt is None or attempt.found is None:
            return None
        return await self.task_view(who, attempt.found.tool_call_id)

    async def waiting_request(self, who: Principal, name: str, args: Any, within_s: float
                              ) -> str | types.CallToolResult | None:
        """Start (or join) a call and, if it needs a person, the id of the request it waits
        on once the gate made it (up to ``within_s``); its result when it finished first;
        None for a call that needs no one (nothing has run: `call_tool` runs it)."""
        _box, attempt = await self._begin(who, name, args)
        if attempt is None or attempt.task is None:
            return None
        pending = asyncio.ensure_future(attempt.pending.wait())
        try:
            await asyncio.wait({attempt.task, pending}, timeout=within_s,
                               return_when=asyncio.FIRST_COMPLETED)
        finally:
            pending.cancel()
        if attempt.task.done() and attempt.request_id is None:
            return attempt.task.result()
        return attempt.request_id

    async def _begin(self, who: Principal, name: str, args: Any
                     ) -> tuple[_Toolbox, _Attempt | None]:
        # The toolbox, and for a gated call its attempt (joined, or started here).
        box = await self._toolbox(who, name)
        tool = box.tools.get(name) if isinstance(name, str) else None
        gated = who.agent.require_confirmation_for_all or (
            tool is not None and tool.needs_confirmation(args if isinstance(args, dict) else {}))
        if not gated:
            return box, None
        key = call_key(who.agent.id, who.user_id, name, args)
        attempt = self._inflight.get(key)
        if attempt is None:
            found = await self.attempts.attempt_for(key)
            attempt = self._inflight.get(key)  # started by another request meanwhile?
            if attempt is None:
                attempt = _Attempt(found=found, owner=(who.user_id, who.agent.id))
                self._inflight[key] = attempt
                self._by_task[found.tool_call_id] = attempt
                attempt.task = asyncio.create_task(
                    self._run(who, name, args, box, key, attempt), name=f"mcp-call-{key[:12]}")
                attempt.task.add_done_callback(functools.partial(self._done, key, attempt))
        return box, attempt

    def _done(self, key: str, attempt: _Attempt, task: asyncio.Task[types.CallToolResult]
              ) -> None:
        if self._inflight.get(key) is attempt:
            del self._inflight[key]
        if attempt.found is None:
            return
        task_id = attempt.found.tool_call_id
        if self._by_task.get(task_id) is attempt:
            del self._by_task[task_id]
        if not task.cancelled() and task.exception() is None:
            self._finished[task_id] = (attempt, task.result())
            self._finished.move_to_end(task_id)
            while len(self._finished) > _FINISHED_KEPT:
                self._finished.popitem(last=False)

    async def _follow(self, attempt: _Attempt, reporter: WaitReporter | None
                      ) -> types.CallToolResult:
        # The caller's request may be cancelled (the client went away); the attempt goes on.
        task = attempt.task
        assert task is not None
        loop = asyncio.get_running_loop()
        started = loop.time()
        pending = asyncio.ensure_future(attempt.pending.wait())
        try:
            await asyncio.wait({task, pending}, return_when=asyncio.FIRST_COMPLETED)
            while not task.done():
                if reporter is not None and attempt.request_id is not None:
                    await reporter.waiting(attempt.request_id,
                                           self.inbox_url(attempt.request_id),
                                           loop.time() - started)
                await asyncio.wait({task}, timeout=self.progress_interval_s)
        finally:
            pending.cancel()
        if reporter is not None and attempt.request_id is not None:
            await reporter.finished(attempt.request_id)
        return task.result()

    async def _run(self, who: Principal, name: str, args: Any, box: _Toolbox,
                   key: str | None, attempt: _Attempt) -> types.CallToolResult:
        try:
            registry = self._registry(who.agent)
        except HookBuildError as exc:
            return _refused(f"Error: agent '{who.agent.id}' cannot run: {exc}")
        # Only a keyed (gated) call has earlier attempts to join and a result to replay.
        found = attempt.found or fresh_attempt()
        ledger = _WatchedLedger(self.ledger, attempt, self._settle_s(name)) \
            if key is not None else None
        identity = CallIdentity(
            agent_id=who.agent.id, user_id=who.user_id, org_id=who.org_id,
            run_id=found.run_id, conversation_id=who.session_id, execution_path="mcp",
            require_confirmation_for_all=who.agent.require_confirmation_for_all,
            emit=attempt.on_event, facts_session=facts_session_of(who),
        )
        call = ToolCall(found.tool_call_id, name, args)
        tools = box.tools
        tool = tools.get(name) if key is not None else None
        if isinstance(tool, McpTool) and isinstance(args, dict):
            # A gated call: the approver reads which gate rules asked, for these arguments.
            tools = {**tools, name: tool.for_call(args)}
        # Its gate rules in shadow mode: recorded on the call's context, never deciding.
        guarded = execute_tool_call(with_shadow_rules(new_call(identity, call, tools)),
                                    registry=registry, ledger=ledger)
        try:
            # A gated call may wait long for a person: only while its caller keeps access.
            outcome = await while_allowed(
                guarded, who.still_allowed if key is not None else None,
                self.access_recheck_s, interruptible=lambda: not attempt.resolved)
        except AccessEnded as ended:
            log.info("MCP call %s of user %s ended: %s", call.id, who.user_id, ended)
            return _refused(
                f"Error: user '{who.user_id}' lost access while '{name}' waited for approval "
                "(token revoked or expired, user disabled, removed or moved to another org): "
                + ("it ran once approved, and its result is not shown." if ended.finished
                   else "it did not run, and its request was cancelled."))
        if attempt.replayed:
            await self._audit_replay(registry, identity, call, box.tools.get(name), outcome)
        note = None
        parts = split_tool_name(name) if isinstance(name, str) else None
        if outcome.status == "unknown_tool" and parts and parts[0] in box.unavailable:
            note = f"MCP server '{parts[0]}' is not available: {box.unavailable[parts[0]]}"
        listed = box.listed.get(name) if isinstance(name, str) else None
        return result_of(outcome, note=note, request_id=attempt.request_id,
                         output_schema=listed.output_schema if listed is not None else None)

    def _settle_s(self, name: Any) -> float:
        # As long as the tool may take downstream, and the time to record its result.
        parts = split_tool_name(name) if isinstance(name, str) else None
        server = self.servers.get(parts[0]) if parts else None
        return server.spec.timeout_s + 5 if server is not None else 5.0

    # -- tasks ---------------------------------------------------------------------------------

    async def task_view(self, who: Principal, task_id: str) -> TaskView:
        """The state of the gated call ``task_id`` of this principal (GatewayRefusal if there
        is none: another principal's task is as unknown as a made-up id)."""
        unknown = GatewayRefusal(f"no task {task_id!r} for this user and agent")
        run_id = run_of_task(task_id)
        if run_id is None:
            raise unknown
        owner = (who.user_id, who.agent.id)
        finished = self._finished.get(task_id)
        if finished is not None:
            attempt, result = finished
            if attempt.owner != owner:
                raise unknown
            row = await self.attempts.request_for(run_id, task_id)
            return self._view(task_id, attempt.created_at, row, result)
        attempt_here = self._by_task.get(task_id)
        if attempt_here is not None and attempt_here.owner != owner:
            raise unknown
        row = await self.attempts.request_for(run_id, task_id)
        if attempt_here is not None:
            return self._view(task_id, attempt_here.created_at, row, None)
        if row is None or (row.requested_by, row.agent_id) != owner:
            raise unknown
        if row.status != "pending":
            # Decided while no process here was following it (the client went away, the
            # process restarted): run it through the retry path, as a repeated call would.
            found = await self.attempts.attempt_for(
                call_key(who.agent.id, who.user_id, row.tool_name, row.args))
            if found.joined and found.tool_call_id == task_id:
                await self._begin(who, row.tool_name, row.args)
                return self._view(task_id, row.created_at, row, None)
            return self._view(task_id, row.created_at, row,
                              unfollowed_result(row, self.retry_window_s))
        return self._view(task_id, row.created_at, row, None)

    async def cancel_task(self, who: Principal, task_id: str) -> None:
        """Cancel ``task_id`` while it is checked or waits: its request is cancelled (the gate
        does that when its wait is cancelled). An approved call that runs finishes."""
        view = await self.task_view(who, task_id)
        if view.result is not None or view.approval not in ("checking", "waiting"):
            return
        attempt = self._by_task.get(task_id)
        if attempt is None:
            # Followed by no process here (its client's process is gone): follow it, then
            # cancel that wait, so the request ends the way the gate ends any wait.
            row = await self.attempts.request_for(run_of_task(task_id) or "", task_id)
            if row is None or row.status != "pending":
                return
            found = await self.attempts.attempt_for(
                call_key(who.agent.id, who.user_id, row.tool_name, row.args))
            if not (found.joined and found.tool_call_id == task_id):
                return
            _box, attempt = await self._begin(who, row.tool_name, row.args)
            if attempt is None or attempt.task is None:
                return
            # Cancelled once the gate waits (a cancel during its hooks would not reach the
            # request): the joined attempt meets the pending request at once.
            waiter = asyncio.ensure_future(attempt.pending.wait())
            try:
                await asyncio.wait({waiter, attempt.task}, timeout=10,
                                   return_when=asyncio.FIRST_COMPLETED)
            finally:
                waiter.cancel()
        if attempt.task is not None:
            attempt.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await attempt.task

    def _view(self, task_id: str, created_at: datetime, row: ConfirmationRecord | None,
              result: types.CallToolResult | None) -> TaskView:
        return view_of(task_id, created_at, row, result, int(self.retry_window_s * 1000))

    async def _audit_replay(self, registry: HookRegistry, identity: CallIdentity,
                            call: ToolCall, tool: Tool | None, outcome: ToolOutcome) -> None:
        # A replay runs no PostToolUse hook (nothing ran), yet the attempt is recorded.
        audit = registry.get("audit_log")
        if not isinstance(audit, AuditLog) or not isinstance(outcome.args, dict):
            return
        ctx = HookContext(hook_point=HookPoint.PRE_TOOL_USE, tool_name=outcome.tool_name,
                          tool_args=outcome.args, agent_id=identity.agent_id,
                          user_id=identity.user_id,
                          metadata=build_metadata(identity, call, tool, True))
        await audit.sink(audit.record(
            ctx, outcome.args, "ok", None,
            "replay: a retry of an approved call that had run already; its recorded result was "
            "returned and the downstream server was not called again"))

    def _registry(self, agent: Agent) -> HookRegistry:
        """The agent's hooks for one call, built as every path builds them:
        `build_registry` makes hookgate's own hooks that keep nothing per call once per
        declaration and modes in force, and every other hook (a third party's, the approval
        gate) for this call (decision record 0034)."""
        try:
            modes_version()  # each hook reads its entry's mode where it is built
        except Exception as exc:  # the call is refused, saying why (fail closed)
            raise HookBuildError(f"the modes in force cannot be read ({type(exc).__name__}: "
                                 f"{exc})") from exc
        return build_registry(agent, self.services)

    async def _toolbox(self, who: Principal, name: Any = None, *,
                       bounded: bool = False) -> _Toolbox:
        """The agent's tools: of every server it reaches, or for a call to ``name`` only
        of that tool's server (a call never waits for an unrelated server to start).
        ``bounded``: a server not up within its ``list_wait_s`` is left out for now."""
        ids = [i for i in who.access.server_ids() if i in self.servers]
        parts = split_tool_name(name) if isinstance(name, str) else None
        if parts is not None and parts[0] in ids:
            ids = [parts[0]]
        box = _Toolbox({}, {}, {})
        ready = [self._ready_share(who, i) for i in ids]
        if all(share is not None for share in ready):
            # Every server up and listed already: no task to start (the common call).
            for cached in ready:
                assert cached is not None
                box.tools.update(cached.tools)
                box.listed.update(cached.listed)
            return box
        # Servers start in parallel: a first listing waits for the slowest only.
        shares = {i: asyncio.ensure_future(self._share(who, i)) for i in ids}
        if bounded:
            await asyncio.gather(*(self._settle(i, found) for i, found in shares.items()))
        else:
            await asyncio.gather(*shares.values())
        for server_id, found in shares.items():
            if not found.done():
                # Still starting: it goes on, and the clients list again once it is up.
                box.unavailable[server_id] = f"MCP server '{server_id}' is still starting"
                self._starting.add(found)
                found.add_done_callback(functools.partial(self._started, server_id))
                continue
            share = found.result()
            if isinstance(share, DownstreamError):
                box.unavailable[server_id] = str(share)
            else:
                box.tools.update(share.tools)
                box.listed.update(share.listed)
        return box

    async def _settle(self, server_id: str, found: asyncio.Future[Any]) -> None:
        # Wait up to the server's list_wait_s; the start itself goes on regardless.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(found), self.servers[server_id].spec.list_wait_s)

    def _started(self, server_id: str, found: asyncio.Future[_Share | DownstreamError]
                 ) -> None:
        # A server a listing did not wait for came up: its tools are news to the clients.
        self._starting.discard(found)
        if found.cancelled() or found.exception() is not None or \
                isinstance(found.result(), DownstreamError):
            return
        told = asyncio.ensure_future(self._downstream_tools_changed(server_id))
        self._starting.add(told)
        told.add_done_callback(self._starting.discard)

    def _ready_share(self, who: Principal, server_id: str) -> _Share | None:
        # The cached share, while its server runs with the listing it was built from.
        server = self.servers[server_id]
        cached = self._shares.get((who.agent.id, server_id))
        if cached is not None and server.running and cached.generation == server.generation:
            return cached
        return None

    async def _share(self, who: Principal, server_id: str) -> _Share | DownstreamError:
        # One server's tools for one agent, rebuilt when the server (re)started.
        server = self.servers[server_id]
        cached = self._shares.get((who.agent.id, server_id))
        if cached is not None and server.running and cached.generation == server.generation:
            return cached
        try:
            downstream = await server.tools()
        except DownstreamError as exc:
            log.warning("%s", exc)
            return exc
        share = _Share(server.generation, {}, {})
        for entry in downstream:
            name = tool_name(server_id, entry.name)
            if who.access.allows(name):
                share.tools[name] = gateway_tool(server, entry, who.agent.id, who.agent.org_id)
                share.listed[name] = entry
        self._shares[(who.agent.id, server_id)] = share
        return share

    # -- resources and prompts (read-only pass-through) ------------------------------------------

    def _readable(self, who: Principal, what: str) -> list[DownstreamServer]:
        allowed = who.access.resources if what == "resources" else who.access.prompts
        if not allowed:
            return []
        return [self.servers[i] for i in who.access.server_ids() if i in self.servers]

    async def list_resources(self, who: Principal) -> list[types.Resource]:
        out: list[types.Resource] = []
        for server in self._readable(who, "resources"):
            try:
                listing = await server.list_resources()
            except DownstreamError as exc:
                log.info("%s", exc)
                continue
            for resource in listing.resources:
                self._resource_owner[(who.agent.id, str(resource.uri))] = server.id
                out.append(resource)
        return out

    async def read_resource(self, who: Principal, uri: str) -> types.ReadResourceResult:
        if not self._readable(who, "resources"):
            raise GatewayRefusal(f"agent '{who.agent.id}' may not read MCP resources")
        owner = self._resource_owner.get((who.agent.id, uri))
        if owner is None:
            await self.list_resources(who)
            owner = self._resource_owner.get((who.agent.id, uri))
        if owner is None:
            raise GatewayRefusal(f"no resource {uri!r} on the MCP servers of agent "
                                 f"'{who.agent.id}'")
        return await self.servers[owner].read_resource(uri)

    async def list_prompts(self, who: Principal) -> list[types.Prompt]:
        out: list[types.Prompt] = []
        for server in self._readable(who, "prompts"):
            try:
                listing = await server.list_prompts()
            except DownstreamError as exc:
                log.info("%s", exc)
                continue
            out.extend(p.model_copy(update={"name": tool_name(server.id, p.name)})
                       for p in listing.prompts)
        return out

    async def get_prompt(self, who: Principal, name: str,
                         args: Mapping[str, str] | None) -> types.GetPromptResult:
        parts = split_tool_name(name)
        servers = {s.id: s for s in self._readable(who, "prompts")}
        if parts is None or parts[0] not in servers:
            raise GatewayRefusal(f"agent '{who.agent.id}' has no MCP prompt {name!r}")
        return await servers[parts[0]].get_prompt(parts[1], dict(args) if args else None)


def _refused(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)


def facts_session_of(who: Principal) -> str:
    """The session whose facts (hookgate.provenance) an MCP call shares: each call is a run
    of its own, so its client session's (a client without one: the agent's user's)."""
    return _facts_session(who.agent.id, who.user_id, who.session_id)


@functools.lru_cache(maxsize=4096)
def _facts_session(agent_id: str, user_id: str, session_id: str | None) -> str:
    # The same few sessions call again and again: hashed once each.
    return "mcp-facts-" + canonical_sha256([agent_id, user_id, session_id])[:40]
