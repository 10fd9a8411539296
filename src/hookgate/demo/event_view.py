"""A run's events as readable lines: calls with their arguments, every hook decision
(blocks with the hook and its reason, rewrites, side effects, failures), results, the answer.
The demo prints them, and so do ``hookgate run`` and ``hookgate workflow`` (the CLI sits
above the demo and imports this view from here).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.text import Text

from hookgate.approvals.wording import changes_text
from hookgate.engines.events import RunEvent
from hookgate.engines.outcome import run_outcome
from hookgate.hooks.trace import ADMIN_OUTPUT_KEY

MAX_SHOWN_CHARS = 500
_LABEL_WIDTH = 10


def _brief(value: Any, limit: int = MAX_SHOWN_CHARS) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False,
                                                            default=str)
    if len(text) > limit:
        return f"{text[:limit]}… ({len(text) - limit} more characters)"
    return text


class EventView:
    """Prints each event of a run on ``console`` as it arrives."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.status: str | None = None
        #: Calls a hook blocked or whose output it withheld, in order.
        self.stopped_calls: list[str] = []
        #: Calls that did not run because the model asked for them wrongly (a tool the
        #: agent does not have, arguments its schema refuses), in order.
        self.refused_calls: list[str] = []
        #: A gated call of the run was rejected, expired or cancelled.
        self.not_approved = False
        #: Standing rules that approved a call of the run (no person was asked).
        self.approved_by_rule: list[str] = []
        self._render: dict[str, Callable[[dict[str, Any]], None]] = {
            "session_start": self._session_start,
            "model_turn": self._model_turn,
            "tool_call": self._tool_call,
            "tool_result": self._tool_outcome,
            "tool_blocked": self._tool_outcome,
            "confirmation_pending": self._confirmation_pending,
            "confirmation_resolved": self._confirmation_resolved,
            "answer": self._answer,
            "error": self._error,
            "done": self._done,
        }

    def show(self, event: RunEvent) -> None:
        render = self._render.get(event.type)
        if render is None:  # plan, delegate_start, … : shown plainly
            self._line(event.type, "dim", _brief(event.data))
        else:
            render(event.data)

    # -- lines -------------------------------------------------------------------------------

    def _line(self, label: str, style: str, message: str | Text, indent: int = 0) -> None:
        pad = " " * indent
        # A label as long as the column still gets a space before the message.
        width = max(_LABEL_WIDTH - indent, len(label) + 1)
        text = Text.assemble(pad, (label.ljust(width), style), message)
        self.console.print(text, soft_wrap=True)

    def _hook_lines(self, hooks: list[dict[str, Any]], final_args: Any,
                    skip_block_of: str | None = None) -> None:
        for h in hooks:
            name, kind, detail = h.get("hook"), h.get("kind"), h.get("detail", "")
            if kind == "blocked" and name == skip_block_of:
                continue
            if kind == "rewrote_args":
                self._line("rewrite", "cyan",
                           f"hook '{name}' rewrote the arguments → {_brief(final_args)}", 2)
            elif kind == "rewrote_result":
                self._line("rewrite", "cyan", f"hook '{name}' rewrote the result", 2)
            elif kind == "side_effect":
                self._line("effect", "blue", f"{name}: {detail}", 2)
            elif kind == "failed":
                mode = h.get("fail_mode") or "closed"
                said = detail if detail.startswith(f"hook '{name}'") else (
                    f"hook '{name}' failed: {detail}")
                # Whoever runs the CLI holds the configuration: they see what the hook
                # said (masked), as an org admin does on the server.
                output = h.get(ADMIN_OUTPUT_KEY)
                if output:
                    said = f"{said}: {output}"
                self._line("FAILED", "bold red", f"{said} (fail_mode={mode})", 2)
            elif kind == "blocked":
                self._line("blocked", "red", f"hook '{name}': {detail}", 2)
            else:
                self._line(str(kind), "dim", f"{name}: {detail}", 2)

    # -- events ------------------------------------------------------------------------------

    def _session_start(self, data: dict[str, Any]) -> None:
        self._line("session", "bold", f"started for agent '{data.get('agent_id')}'")
        if data.get("additional_context"):
            self._line("context", "cyan",
                       f"hooks added to the prompt: {_brief(data['additional_context'])}", 2)
        self._hook_lines(list(data.get("hooks") or []), None)

    def _model_turn(self, data: dict[str, Any]) -> None:
        calls = data.get("tool_calls") or []
        self._line("model", "dim", f"turn {data.get('step')}: {len(calls)} tool call(s)")

    def _tool_call(self, data: dict[str, Any]) -> None:
        self._line("call", "bold yellow",
                   Text.assemble((str(data.get("tool_name")), "bold"), " ",
                                 _brief(data.get("args"))))

    def _tool_outcome(self, data: dict[str, Any]) -> None:
        name, status = data.get("tool_name"), data.get("status")
        hooks = list(data.get("hooks") or [])
        blocked_by = data.get("blocked_by")
        if status == "blocked":
            self.stopped_calls.append(str(name))
            self._hook_lines(hooks, data.get("args"), skip_block_of=blocked_by)
            who = (f"hook '{blocked_by}'" if blocked_by and blocked_by != "approval_check"
                   else "the approval check")
            # "reason" is the error without its "Blocked by hook 'x':" (ToolOutcome.reason).
            reason = data.get("reason") or data.get("error")
            self._line("BLOCKED", "bold red", f"{name} by {who}: {reason}")
            return
        if status in ("invalid", "unknown_tool"):
            self.refused_calls.append(str(name))
            self._line("REJECTED", "bold red", f"{name} did not run: {data.get('error')}")
            return
        self._hook_lines(hooks, data.get("args"))
        if status == "ok":
            self._line("result", "green", f"{name}: {_brief(data.get('observation'))}")
        elif status == "withheld":
            self.stopped_calls.append(str(name))
            self._line("WITHHELD", "bold red",
                       f"{name} ran, its output was withheld: {data.get('error')}")
        else:
            self._line("ERROR", "bold red", f"{name}: {data.get('error')}")

    def _confirmation_pending(self, data: dict[str, Any]) -> None:
        where = (f"channel '{data['channel_id']}'" if data.get("channel_id")
                 else "the web inbox")
        again = " (resumed after a restart)" if data.get("resumed") else ""
        self._line("waiting", "magenta",
                   f"request {data.get('request_id')}: {data.get('tool_name')} needs a "
                   f"person's approval via {where} (approver: {data.get('approver_scope')}, "
                   f"expires {data.get('expires_at')}){again}", 2)

    def _confirmation_resolved(self, data: dict[str, Any]) -> None:
        who = f" by {data['decided_by']}" if data.get("decided_by") else ""
        if data.get("status") != "approved":
            self.not_approved = True
        if data.get("rule_id"):
            # No request was made: the id on the event names a use of the rule, which no
            # `hookgate approvals` command knows. Say the rule, never a "request".
            self.approved_by_rule.append(str(data["rule_id"]))
            self._line("decided", "magenta",
                       f"{data.get('tool_name')} {data.get('status')} without asking anyone: "
                       f"{data.get('reason') or 'by rule ' + str(data['rule_id'])}", 2)
            return
        why = f": {data['reason']}" if data.get("reason") else ""
        self._line("decided", "magenta",
                   f"request {data.get('request_id')} {data.get('status')}{who}{why}", 2)
        if data.get("changes"):
            self._line("edited", "magenta", changes_text(data["changes"]), 2)
        if data.get("message"):
            self._line("message", "magenta", str(data["message"]), 2)

    def _answer(self, data: dict[str, Any]) -> None:
        self._line("answer", "bold green", str(data.get("answer") or ""))

    def _error(self, data: dict[str, Any]) -> None:
        self._line("ERROR", "bold red", str(data.get("error")))

    def _done(self, data: dict[str, Any]) -> None:
        self.status = str(data.get("status"))
        stopped, refused = len(self.stopped_calls), len(self.refused_calls)
        note = f"; {stopped} tool call(s) stopped by a hook" if stopped else ""
        if refused:
            note += (f"; {refused} tool call(s) did not run (unknown tool or invalid "
                     "arguments)")
        style = "bold green" if self.exit_code == 0 else "bold red"
        said = ("completed, but a call was not approved" if self.outcome == "not_approved"
                else self.status)
        self._line("done", style, f"run {said}{note}")

    @property
    def exit_code(self) -> int:
        """0 when the run completed and every call it made ran (no hook stopped one, none
        was refused as an unknown tool or for its arguments), else 1 (the CLI's rule)."""
        ran = not self.stopped_calls and not self.refused_calls
        return 0 if self.status == "completed" and ran else 1

    @property
    def outcome(self) -> str | None:
        """The status, except that a run that completed although a person did not approve
        one of its calls is ``not_approved``, and one in which a hook stopped a call
        ``call_blocked`` (as the HTTP API's ``outcome``)."""
        if self.status is None:
            return None
        return run_outcome(self.status, not_approved=self.not_approved,
                           call_stopped=bool(self.stopped_calls))
