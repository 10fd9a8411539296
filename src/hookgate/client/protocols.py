"""The guard interface every framework adapter codes against, async and sync; implemented
by the HTTP clients (hookgate.client.http) and the in-process guard (hookgate.client.local).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from hookgate.client.types import Decision, Observation, SessionStarted, Verdict


class AsyncGuard(Protocol):
    #: "langgraph", "openai-agents", "pydantic-ai", "adk", "crewai": recorded in audit rows.
    framework: str

    async def start_session(self, *, agent: str, session_id: str,
                            parent_session: str | None = None) -> SessionStarted: ...

    async def before_call(self, *, agent: str, session_id: str, call_id: str, tool: str,
                          arguments: Mapping[str, Any], description: str | None = None,
                          parameters: Mapping[str, Any] | None = None,
                          parent_session: str | None = None) -> Verdict:
        """``parameters``: the tool's JSON schema (arguments and an approver's edits are
        checked against it; without it a person can approve or reject, not edit).
        ``parent_session``: the session of the agent that delegated to this one; needed only
        when the session was not started with it (hookgate keeps a started session's parent
        and derives the delegation depth from it)."""
        ...

    async def wait(self, call: str, *, timeout: float) -> Verdict:  # noqa: ASYNC109
        """Long-poll: the verdict once decided, Pending if still undecided after timeout.
        Allowed means "run it now": the call is recorded as started."""
        ...

    async def decision(self, call: str, *, timeout: float) -> Decision:  # noqa: ASYNC109
        """Long-poll for what a person decided, starting nothing (for resuming a paused
        agent, which then asks again for the verdict)."""
        ...

    async def report(self, call: str, *, output: Any = None,
                     error: str | None = None) -> Observation: ...


class Guard(Protocol):
    framework: str

    def start_session(self, *, agent: str, session_id: str,
                      parent_session: str | None = None) -> SessionStarted: ...

    def before_call(self, *, agent: str, session_id: str, call_id: str, tool: str,
                    arguments: Mapping[str, Any], description: str | None = None,
                    parameters: Mapping[str, Any] | None = None,
                    parent_session: str | None = None) -> Verdict: ...

    def wait(self, call: str, *, timeout: float) -> Verdict: ...

    def decision(self, call: str, *, timeout: float) -> Decision: ...

    def report(self, call: str, *, output: Any = None,
               error: str | None = None) -> Observation: ...
