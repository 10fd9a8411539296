"""The guard in process: hookgate's own runtime (a configuration file, SQLite by default, or a
runtime already built) answers the framework's calls, with the same hooks, gate, ledger and
audit as a server. ``AsyncLocalGuard`` for async code, ``LocalGuard`` for sync code (it runs
the runtime on a loop of its own in a background thread).
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Coroutine, Mapping
from dataclasses import replace
from typing import Any, TypeVar

from hookgate.approvals.authority import NotActingFor, acting_for
from hookgate.client.arguments import ArgumentsNotJSON, checked_arguments
from hookgate.client.errors import GuardRefused, GuardUnavailable
from hookgate.client.types import (
    Allowed,
    AlreadyRan,
    Decided,
    Decision,
    Denied,
    Observation,
    Pending,
    SessionStarted,
    Verdict,
)
from hookgate.external.calls import Asker, CallAnswer, CallIdReused, CallNotFound, CallRefused
from hookgate.runtime.runtime import Runtime
from hookgate.storage.people import people

T = TypeVar("T")
__all__ = ["AsyncLocalGuard", "LocalGuard"]


def _verdict(answer: CallAnswer) -> Verdict:
    if answer.decision == "allow":
        return Allowed(answer.call, dict(answer.arguments or {}), answer.note)
    if answer.decision == "pending":
        return Pending(answer.call, str(answer.request_id), answer.reason)
    if answer.decision == "already_ran":
        return AlreadyRan(answer.call, str(answer.observation))
    return Denied(answer.call, answer.reason or "denied by hookgate")


class AsyncLocalGuard:
    """An AsyncGuard over hookgate's library in this process.

    ``source`` is a configuration file (loaded and started on first use, stopped by
    ``aclose``) or a Runtime (started if it is not; its owner stops it). Calls are made as
    ``user`` (default: each agent's owner); a service identity's calls act for ``acts_for``
    (the call's initiator, checked by `authority.acting_for` at every ask), unless a session
    or call names another.
    """

    def __init__(self, source: str | os.PathLike[str] | Runtime, *, framework: str,
                 user: str | None = None, acts_for: str | None = None) -> None:
        self.framework = framework
        self.user = user
        self.acts_for = acts_for
        self._source = source
        self._runtime: Runtime | None = source if isinstance(source, Runtime) else None
        self._owned = not isinstance(source, Runtime)
        self._lock = asyncio.Lock()

    async def runtime(self) -> Runtime:
        """The runtime, started."""
        async with self._lock:
            if self._runtime is None:
                from hookgate.config import ConfigError, load_config
                from hookgate.runtime.deployment import deployment_from_config

                assert not isinstance(self._source, Runtime)
                try:
                    cfg = load_config(self._source)
                except ConfigError as exc:
                    raise GuardUnavailable(f"hookgate cannot load its configuration: {exc}"
                                           ) from None
                self._runtime = Runtime(deployment_from_config(cfg))
            if not self._runtime.started:
                try:
                    await self._runtime.start()
                except Exception as exc:
                    raise GuardUnavailable(f"hookgate could not start ({type(exc).__name__}: "
                                           f"{exc}), so no guarded call runs") from exc
            return self._runtime

    async def aclose(self) -> None:
        if self._owned and self._runtime is not None and self._runtime.started:
            await self._runtime.stop()

    async def __aenter__(self) -> AsyncLocalGuard:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def _asker(self, agent_id: str | None) -> tuple[Runtime, Asker, Any]:
        rt = await self.runtime()
        agent = rt.runs.agents.get(agent_id) if agent_id is not None else None
        if agent_id is not None and agent is None:
            raise GuardRefused(f"no agent '{agent_id}' in this hookgate", 404)
        user = self.user or (agent.owner_user_id if agent is not None else None) or "local"
        org = agent.org_id if agent is not None else None
        return rt, Asker(user, org, self.framework), agent

    async def _acting(self, agent_id: str, acts_for: str | None
                      ) -> tuple[Runtime, Asker, Any]:
        """The asker of an ask or a session start, with whom it acts for (its initiator;
        GuardRefused 403 when ``acts_for`` names nobody the user may act for)."""
        rt, asker, agent = await self._asker(agent_id)
        record = (await people(rt.db, [asker.user_id])).get(asker.user_id)
        try:
            initiator = await acting_for(
                rt.db, asker.user_id, record.org_id if record is not None else str(asker.org_id),
                bool(record is not None and record.service), acts_for or self.acts_for)
        except NotActingFor as exc:
            raise GuardRefused(str(exc), 403) from None
        return rt, replace(asker, initiator=initiator), agent

    async def _guarded(self, work: Coroutine[Any, Any, T]) -> T:
        try:
            return await work
        except CallRefused as exc:
            raise GuardRefused(str(exc), 409 if isinstance(exc, CallIdReused) else 400) from None
        except CallNotFound as exc:
            raise GuardRefused(str(exc), 404) from None
        except (GuardRefused, GuardUnavailable):
            raise
        except Exception as exc:
            raise GuardUnavailable(f"hookgate could not decide ({type(exc).__name__}: {exc}), "
                                   "so the call does not run") from exc

    async def start_session(self, *, agent: str, session_id: str,
                            parent_session: str | None = None,
                            acts_for: str | None = None,
                            request: str | None = None) -> SessionStarted:
        rt, asker, found = await self._acting(agent, acts_for)
        answer = await self._guarded(rt.guarded.start_session(found, asker, session_id,
                                                               parent_session,
                                                               request=request))
        return SessionStarted(answer.session_id, answer.context, answer.stopped)

    async def before_call(self, *, agent: str, session_id: str, call_id: str, tool: str,
                          arguments: Mapping[str, Any], description: str | None = None,
                          parameters: Mapping[str, Any] | None = None,
                          parent_session: str | None = None,
                          acts_for: str | None = None) -> Verdict:
        try:
            arguments = checked_arguments(arguments)
        except ArgumentsNotJSON as exc:
            raise GuardRefused(f"hookgate cannot take these arguments: {exc}") from None
        rt, asker, found = await self._acting(agent, acts_for)
        return _verdict(await self._guarded(rt.guarded.ask(
            found, asker, session_id=session_id, call_id=call_id, tool=tool,
            arguments=arguments, description=description, parameters=parameters,
            parent_session=parent_session)))

    async def decision(self, call: str, *, timeout: float) -> Decision:  # noqa: ASYNC109
        rt, asker, _ = await self._asker(None)
        answer = await self._guarded(rt.guarded.peek(self._caller(asker), call, timeout))
        if answer.decision == "decided":
            return Decided(answer.call, str(answer.request_id), answer.approved is True,
                           answer.reason, answer.arguments)
        found = _verdict(answer)
        assert isinstance(found, Pending | AlreadyRan)
        return found

    async def wait(self, call: str, *, timeout: float) -> Verdict:  # noqa: ASYNC109
        rt, asker, _ = await self._asker(None)
        return _verdict(await self._guarded(rt.guarded.wait(
            rt.runs.agents, self._caller(asker), call, timeout)))

    async def report(self, call: str, *, output: Any = None,
                     error: str | None = None) -> Observation:
        rt, asker, _ = await self._asker(None)
        answer = await self._guarded(rt.guarded.report(
            rt.runs.agents, self._caller(asker), call, output=output, error=error))
        return Observation(answer.call, answer.text, answer.withheld)

    def _caller(self, asker: Asker) -> Asker:
        # Without a fixed user, the call's own user (found from the call) is the caller.
        return asker if self.user is not None else Asker("", None, self.framework)


class LocalGuard:
    """The same as AsyncLocalGuard, for synchronous code: the runtime lives on a loop in a
    background thread of its own; ``close`` stops both."""

    def __init__(self, source: str | os.PathLike[str] | Runtime, *, framework: str,
                 user: str | None = None, acts_for: str | None = None) -> None:
        self.framework = framework
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name="hookgate-local-guard")
        self._thread.start()
        self._inner = self._run(self._make(source, framework, user, acts_for))

    @staticmethod
    async def _make(source: str | os.PathLike[str] | Runtime, framework: str,
                    user: str | None, acts_for: str | None) -> AsyncLocalGuard:
        return AsyncLocalGuard(source, framework=framework, user=user, acts_for=acts_for)

    def _run(self, work: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(work, self._loop).result()

    def start_session(self, *, agent: str, session_id: str,
                      parent_session: str | None = None,
                      acts_for: str | None = None,
                      request: str | None = None) -> SessionStarted:
        return self._run(self._inner.start_session(agent=agent, session_id=session_id,
                                                   parent_session=parent_session,
                                                   acts_for=acts_for, request=request))

    def before_call(self, *, agent: str, session_id: str, call_id: str, tool: str,
                    arguments: Mapping[str, Any], description: str | None = None,
                    parameters: Mapping[str, Any] | None = None,
                    parent_session: str | None = None,
                    acts_for: str | None = None) -> Verdict:
        return self._run(self._inner.before_call(
            agent=agent, session_id=session_id, call_id=call_id, tool=tool,
            arguments=arguments, description=description, parameters=parameters,
            parent_session=parent_session, acts_for=acts_for))

    def wait(self, call: str, *, timeout: float) -> Verdict:
        return self._run(self._inner.wait(call, timeout=timeout))

    def decision(self, call: str, *, timeout: float) -> Decision:
        return self._run(self._inner.decision(call, timeout=timeout))

    def report(self, call: str, *, output: Any = None, error: str | None = None) -> Observation:
        return self._run(self._inner.report(call, output=output, error=error))

    def __enter__(self) -> LocalGuard:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self._run(self._inner.aclose())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
