"""The contract every declarative hook speaks: Claude Code's hook JSON, in and out.

In: the object Claude Code gives a hook (``hook_event_name``, ``session_id``, ``cwd``,
``tool_name``, ``tool_input``, ``tool_use_id``, ``tool_response``; ``source`` at
SessionStart) plus hookgate's request facts (``agent_id``, ``user_id``, ``org_id``,
``metadata``). Out: Claude Code's answer (``hookSpecificOutput.permissionDecision``,
``updatedInput``, ``updatedToolOutput``, ``additionalContext``, top-level ``decision`` /
``reason``, ``continue`` / ``stopReason``, ``systemMessage``), turned into a HookResult.
Command, Python and HTTP hooks differ only in how these two cross. ``additionalContext`` of
PreToolUse and PostToolUse, and a PostToolUse block's reason, go next to the tool's output
(the guarded path appends them), as Claude Code shows them to its model.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hookgate.hooks.model import HookContext, HookPoint, HookResult

_PRE_DECISIONS = ("allow", "deny", "ask", "defer")
#: Claude Code's older PreToolUse form: top-level ``decision`` with ``reason``.
_LEGACY_PRE_DECISIONS = {"approve": "allow", "block": "deny"}


#: Metadata key of the run's transcript file (Claude Code's JSONL shape), when one is kept.
TRANSCRIPT_KEY = "transcript_path"


class HookProtocolError(Exception):
    """A hook's answer breaks the contract; the hook counts as failed (its fail mode applies)."""


class SessionStopped(Exception):
    """A SessionStart hook answered ``continue: false``: the session must not start."""


@dataclass(frozen=True, slots=True)
class HookReply:
    """What came back from a hook, before it is applied to the context.

    ``answer`` is the decoded JSON answer (None: nothing to say, i.e. allow); ``block_reason``
    is set by a command hook's exit status 2 (its stderr); ``text`` is plain, non-JSON
    output, which only SessionStart accepts (as context, as in Claude Code).
    """

    answer: Mapping[str, Any] | None = None
    block_reason: str | None = None
    text: str | None = None


def hook_input(ctx: HookContext, *, cwd: str) -> dict[str, Any]:
    """The JSON object a hook receives for ``ctx``, as plain JSON data (a copy)."""
    meta = ctx.metadata
    data: dict[str, Any] = {
        "hook_event_name": ctx.hook_point.value,
        "session_id": meta.get("run_id"),
        "transcript_path": meta.get(TRANSCRIPT_KEY) or "",
        "cwd": cwd,
        "permission_mode": meta.get("permission_mode") or "default",
    }
    # A hookgate run answers one prompt, so the run stands for Claude Code's prompt id.
    data["prompt_id"] = meta.get("prompt_id") or meta.get("run_id")
    if ctx.hook_point is HookPoint.SESSION_START:
        data["source"] = "startup"
    else:
        data["tool_name"] = ctx.tool_name
        data["tool_input"] = ctx.tool_args
        data["tool_use_id"] = meta.get("tool_call_id")
        if ctx.hook_point is HookPoint.POST_TOOL_USE:
            data["tool_response"] = ctx.tool_result
            started = meta.get("call_started")
            if isinstance(started, float):
                data["duration_ms"] = max(0, round((time.perf_counter() - started) * 1000))
    if meta.get("parent_agent_id") is not None:
        # As in Claude Code, agent_id and agent_type appear only inside a delegated agent.
        data["agent_id"] = ctx.agent_id
        data["agent_type"] = ctx.agent_id
    data["hookgate_agent_id"] = ctx.agent_id
    data["user_id"] = ctx.user_id
    data["org_id"] = meta.get("org_id")
    data["metadata"] = dict(meta)
    # The round trip makes every value plain JSON and cuts all ties to the live context.
    plain: dict[str, Any] = json.loads(json.dumps(data, ensure_ascii=False, default=str))
    return plain


def reply_from_text(text: str, point: HookPoint) -> HookReply:
    """Decode a command's stdout or an HTTP body: empty means allow; as in Claude Code,
    JSON only when it starts with ``{``, anything else plain text. Malformed JSON is a
    failure (a cut-off ``deny`` must not read as "allow")."""
    stripped = text.strip()
    if not stripped:
        return HookReply()
    if not stripped.startswith("{"):
        return HookReply(text=stripped)
    try:
        answer = json.loads(stripped)
    except json.JSONDecodeError as exc:
        raise HookProtocolError(
            f"the answer is not valid JSON ({exc.msg} at line {exc.lineno} column "
            f"{exc.colno}); it began {_excerpt(stripped)!r}"
        ) from None
    return reply_from_value(answer)


def reply_from_exit_2(stdout: str, stderr: str) -> HookReply:
    """Exit status 2 blocks; the reason is the JSON answer's where one is given (Claude
    Code's rule), else stderr."""
    reason = stderr
    stripped = stdout.strip()
    if stripped.startswith("{"):
        with contextlib.suppress(json.JSONDecodeError):
            answer = json.loads(stripped)
            if isinstance(answer, Mapping):
                specific = answer.get("hookSpecificOutput")
                given = (specific.get("permissionDecisionReason")
                         if isinstance(specific, Mapping) else None) or answer.get("reason")
                if isinstance(given, str) and given:
                    reason = given
    return HookReply(block_reason=reason)


def reply_from_value(value: object) -> HookReply:
    """A Python hook's return value (or decoded JSON): None or a JSON object."""
    if value is None:
        return HookReply()
    if not isinstance(value, Mapping):
        raise HookProtocolError(
            f"the answer must be a JSON object (or nothing), got {type(value).__name__}"
        )
    return HookReply(answer=value)


def apply_reply(reply: HookReply, ctx: HookContext, hook: str) -> HookResult:
    """Turn a hook's reply into its HookResult; an ``ask`` also flags ``ctx`` for a person.

    Raises HookProtocolError for an answer that breaks the contract and SessionStopped for
    ``continue: false`` at SessionStart.
    """
    point = ctx.hook_point
    if reply.block_reason is not None:
        if point is HookPoint.SESSION_START:
            # As in Claude Code, exit status 2 here is reported, not a stop (its stderr is
            # for people); `continue: false` is how a hook stops a session.
            why = f": {reply.block_reason}" if reply.block_reason else ""
            return HookResult(side_effects=[f"reported (exit status 2){why}"])
        return _block(point, hook, reply.block_reason, [], ctx)
    if reply.text is not None:
        if point is HookPoint.SESSION_START:
            return HookResult(additional_context=reply.text)
        # Claude Code shows plain stdout of other events to people only, never the model.
        return HookResult(side_effects=[f"printed {len(reply.text)} characters (ignored)"])
    answer = reply.answer
    if not answer:
        return HookResult()
    notes = []
    message = _text(answer, "systemMessage")
    if message:
        notes.append(f"message: {message}")
    specific = _specific_output(answer, point)
    go_on = answer.get("continue", True)
    if not isinstance(go_on, bool):
        raise HookProtocolError(f"'continue' must be true or false, got {go_on!r}")
    if not go_on:
        reason = _text(answer, "stopReason") or ""
        if point is HookPoint.SESSION_START:
            raise SessionStopped(reason or f"hook '{hook}' answered continue: false")
        # The whole run stops (the engine reads this), and this call does not go on.
        ctx.stop_run = reason or f"hook '{hook}' answered continue: false"
        return _block(point, hook, reason, notes, ctx)
    if point is HookPoint.PRE_TOOL_USE:
        return _pre_tool_use(answer, specific, ctx, hook, notes)
    if point is HookPoint.POST_TOOL_USE:
        return _post_tool_use(answer, specific, ctx, hook, notes)
    context = _text(specific, "additionalContext", "hookSpecificOutput.")
    return HookResult(additional_context=context or None, side_effects=notes)


def _pre_tool_use(answer: Mapping[str, Any], specific: Mapping[str, Any], ctx: HookContext,
                  hook: str, notes: list[str]) -> HookResult:
    decision = _text(specific, "permissionDecision", "hookSpecificOutput.")
    reason = _text(specific, "permissionDecisionReason", "hookSpecificOutput.")
    if decision is None:
        legacy = _text(answer, "decision")
        if legacy is not None:
            if legacy not in _LEGACY_PRE_DECISIONS:
                raise HookProtocolError(
                    f"'decision' must be 'approve' or 'block' at PreToolUse, got {legacy!r}"
                )
            decision = _LEGACY_PRE_DECISIONS[legacy]
            reason = _text(answer, "reason")
    elif decision not in _PRE_DECISIONS:
        raise HookProtocolError(
            f"'permissionDecision' must be one of {', '.join(_PRE_DECISIONS)}, got {decision!r}"
        )
    if decision == "deny":
        return _block(HookPoint.PRE_TOOL_USE, hook, reason or "", notes, ctx)
    effects = list(notes)
    if decision in ("ask", "defer"):
        # The approval gate runs after every other PreToolUse hook and takes any call with
        # this flag to a person; "allow" never clears it: a hook cannot approve for a person.
        # Kept so the approver reads which hook asked and why.
        ctx.ask_for_confirmation(hook, reason)
        effects.append("asked for a person's approval" + (f": {reason}" if reason else ""))
    elif decision == "allow" and reason:
        effects.append(f"allowed: {reason}")
    updated = specific.get("updatedInput")
    if updated is not None and not isinstance(updated, Mapping):
        raise HookProtocolError(
            f"'updatedInput' must be a JSON object, got {type(updated).__name__}"
        )
    _add_context(ctx, hook, _text(specific, "additionalContext", "hookSpecificOutput."),
                  effects)
    return HookResult(
        modified_args=dict(updated) if updated is not None else None, side_effects=effects
    )


def _post_tool_use(answer: Mapping[str, Any], specific: Mapping[str, Any], ctx: HookContext,
                   hook: str, notes: list[str]) -> HookResult:
    decision = _text(answer, "decision")
    if decision is not None and decision != "block":
        raise HookProtocolError(f"'decision' can only be 'block' at PostToolUse, got {decision!r}")
    effects = list(notes)
    if decision == "block":
        _add_context(ctx, hook, _text(answer, "reason") or f"hook '{hook}' flagged the result",
                     effects)
    _add_context(ctx, hook, _text(specific, "additionalContext", "hookSpecificOutput."),
                 effects)
    # updatedMCPToolOutput is the name Claude Code used before the rewrite covered all tools.
    output = specific.get("updatedToolOutput", specific.get("updatedMCPToolOutput"))
    return HookResult(modified_result=output, side_effects=effects)


def _block(point: HookPoint, hook: str, reason: str, notes: list[str], ctx: HookContext
           ) -> HookResult:
    why = f": {reason}" if reason else "."
    if point is HookPoint.PRE_TOOL_USE:
        return HookResult(allow=False, error=f"Blocked by hook '{hook}'{why}", side_effects=notes)
    # The tool already ran: as in Claude Code, the reason goes next to its output.
    effects = list(notes)
    _add_context(ctx, hook, reason or f"hook '{hook}' flagged the result", effects)
    return HookResult(side_effects=effects)


def _add_context(ctx: HookContext, hook: str, text: str | None, effects: list[str]) -> None:
    # Collected on the context; the guarded path puts it next to the tool's output (never
    # next to withheld output).
    if not text:
        return
    ctx.added_context.append(text)
    effects.append(f"context: {text}")


def _specific_output(answer: Mapping[str, Any], point: HookPoint) -> Mapping[str, Any]:
    specific = answer.get("hookSpecificOutput")
    if specific is None:
        return {}
    if not isinstance(specific, Mapping):
        raise HookProtocolError(
            f"'hookSpecificOutput' must be a JSON object, got {type(specific).__name__}"
        )
    event = specific.get("hookEventName")
    if event is not None and event != point.value:
        raise HookProtocolError(
            f"hookSpecificOutput.hookEventName is {event!r}, but this is a {point.value} hook"
        )
    return specific


def _text(data: Mapping[str, Any], key: str, prefix: str = "") -> str | None:
    value = data.get(key)
    if value is None or isinstance(value, str):
        return value
    raise HookProtocolError(f"'{prefix}{key}' must be a string, got {type(value).__name__}")


def _excerpt(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[:limit] + "…"
