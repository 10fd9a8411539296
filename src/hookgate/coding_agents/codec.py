"""The codec protocol every coding agent implements: its hook's stdin becomes a `HookInput`
(event, session, the user's prompt or a tool call in hookgate's names), and hookgate's
`Outcome` becomes the `Reply` the forwarder turns into exactly what that agent accepts (a
2xx body printed as is, or a non-2xx one-line reason that becomes exit 2: a deny).
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from hookgate.external.keys import BadId, checked_id

__all__ = ["BadHookInput", "Codec", "Event", "HookInput", "Outcome", "Reply", "event_and_session",
           "hook_event", "optional_text", "prompt_of", "render_command_hook", "session_of"]


class BadHookInput(ValueError):
    """The body is not a hook input of this agent that hookgate can act on."""


class Event(enum.Enum):
    """The hook events hookgate answers, in its own words."""

    SESSION_START = "SessionStart"
    #: The user submitted a prompt: hookgate keeps it as the session's request (what the
    #: user gave, hookgate.provenance), then the agent goes on. A refusal here (a stopped
    #: session) is only said: the prompt's hook never blocks the prompt, which runs nothing.
    USER_PROMPT = "UserPromptSubmit"
    PRE_TOOL_USE = "PreToolUse"
    POST_TOOL_USE = "PostToolUse"


@dataclass(frozen=True, slots=True)
class HookInput:
    """One hook call, typed: the tool call already in hookgate's names (coding_agents.tools)."""

    event: Event
    session_id: str
    cwd: str | None = None
    tool_name: str | None = None
    arguments: dict[str, Any] = field(default_factory=dict)
    #: The agent's id of this tool call (Codex: ``tool_use_id``).
    call_id: str | None = None
    #: What the tool returned (PostToolUse).
    result: Any = None
    transcript_path: str | None = None
    #: What the user asked (USER_PROMPT).
    prompt: str | None = None
    #: Request facts for hooks, audit rows and approval cards (the agent, its folder, ...).
    facts: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Outcome:
    """hookgate's answer in the agent's neutral words: go on (with context for the model),
    refuse with a reason (a deny before the call; after it, the reason replaces the output
    the model reads), or, after the call, replace the output the model reads."""

    refused: str | None = None
    context: str | None = None
    #: PostToolUse: what the model reads instead of the tool's output (a hook rewrote it).
    replaced: str | None = None
    #: PreToolUse: who let the call run without asking again (a person's approval, a standing
    #: rule), for an agent whose allow can skip its own prompt (Copilot CLI); else None.
    approved: str | None = None


@dataclass(frozen=True, slots=True)
class Reply:
    """What the route sends: ``status`` 200 and the exact body the agent reads, or a non-2xx
    status and a one-line reason the forwarder prints to stderr before ``exit 2``."""

    status: int
    body: str
    media_type: str = "application/json"


class Codec(Protocol):
    """One coding agent's wire format."""

    #: The agent's name in routes, run ids, audit facts and connectors (``codex``).
    kind: str

    def parse(self, body: dict[str, Any]) -> HookInput:
        """The typed hook input (BadHookInput says what is wrong)."""
        ...

    def render(self, hook: Event, outcome: Outcome) -> Reply:
        """The answer this agent accepts for ``outcome`` at ``hook``."""
        ...


#: The status of a refusal: the forwarder prints the reason and exits 2 (a deny).
REFUSED = 403
_REASON_LIMIT = 1000


def refusal(reason: str) -> Reply:
    """The one-line reason of a refusal, as every agent's forwarder expects it."""
    line = " ".join(reason.split())
    if len(line) > _REASON_LIMIT:
        line = line[:_REASON_LIMIT - 1] + "…"
    return Reply(REFUSED, line, "text/plain; charset=utf-8")


def optional_text(body: dict[str, Any], key: str) -> str | None:
    """``body[key]``: None, or a string of at most 4096 characters (else BadHookInput)."""
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > 4096:
        raise BadHookInput(f"'{key}' must be a string of at most 4096 characters")
    return value


def prompt_of(body: dict[str, Any], key: str = "prompt") -> str:
    """The user's prompt, ``body[key]``: a string (else BadHookInput)."""
    value = body.get(key)
    if not isinstance(value, str):
        raise BadHookInput(f"'{key}' must be a string")
    return value


def hook_event(body: dict[str, Any], events: Mapping[str, Event]) -> tuple[str, Event]:
    """The agent's name of the event (``hook_event_name``) and hookgate's, of ``events``."""
    name = body.get("hook_event_name")
    event = events.get(name) if isinstance(name, str) else None
    if event is None:
        raise BadHookInput(f"hook_event_name must be one of {', '.join(events)}, got {name!r}")
    return str(name), event


def session_of(name: str, value: object) -> str:
    """The session's id, printable text of at most 4096 characters."""
    try:
        return checked_id(name, value, 4096)
    except BadId as exc:
        raise BadHookInput(str(exc)) from None


def event_and_session(body: dict[str, Any], events: Mapping[str, Event]
                      ) -> tuple[str, Event, str]:
    """The agent's event name, hookgate's event for it (``events`` maps the agent's names)
    and the session id (``session_id``) of a hook input (else BadHookInput)."""
    name, event = hook_event(body, events)
    return name, event, session_of("session_id", body.get("session_id"))


def render_command_hook(hook: Event, outcome: Outcome,
                        replaced: Callable[[str], dict[str, Any]]) -> Reply:
    """The answer of an agent whose command hooks read Claude Code's words: a refusal as
    `refusal`; after a call, ``replaced(text)`` — that agent's body making its model read
    ``text`` instead of the output; SessionStart context as
    ``hookSpecificOutput.additionalContext``; else exactly ``{}`` (an allow, or at a prompt:
    go on)."""
    if outcome.refused is not None:
        return refusal(outcome.refused)
    if hook is Event.POST_TOOL_USE and outcome.replaced is not None:
        return Reply(200, json.dumps(replaced(outcome.replaced)))
    if hook is Event.SESSION_START and outcome.context:
        return Reply(200, json.dumps({"hookSpecificOutput": {
            "hookEventName": "SessionStart", "additionalContext": outcome.context}}))
    return Reply(200, "{}")
