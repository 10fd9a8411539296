"""Cursor's side of its hook protocol, as documented (cursor.com/docs/agent/hooks) — there is
no Cursor CLI to run here. ``CursorHost`` reads the ``hooks.json`` that ``hookgate cursor
install`` wrote and runs each entry exactly as Cursor does: ``sh -c COMMAND`` in the project,
the documented JSON payload on stdin, killed at the entry's ``timeout`` (seconds). It reads the
answer by Cursor's rules: exit 0 parses stdout's flat JSON (``permission``, ``user_message``,
``agent_message``, ``additional_context``); exit 2 blocks (stdout's text is the reason); any
other failure — another exit code, a timeout, no output, output that is not JSON — lets the
tool run unless the entry says ``"failClosed": true``. Then it runs the shell tool for real.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: What the model reads when a hook answered with no reason.
NO_REASON = "blocked by a hook that gave no reason"


@dataclass
class Answer:
    """One hook's answer as Cursor reads it."""

    allowed: bool
    reason: str = ""
    body: dict[str, Any] = field(default_factory=dict)
    failed: str | None = None


@dataclass
class Turn:
    """One Shell call of the model: whether it ran and what the model read."""

    ran: bool
    read: str
    #: The answer that blocked the call.
    denied: Answer | None = None


class CursorHost:
    def __init__(self, project: Path, env: dict[str, str]) -> None:
        self.project = project
        self.env = env
        self.conversation = str(uuid.uuid4())
        self.generation = str(uuid.uuid4())
        self.started = False
        #: additional_context the model received, in order.
        self.context: list[str] = []

    def entries(self, event: str) -> list[dict[str, Any]]:
        config = json.loads((self.project / ".cursor" / "hooks.json").read_text())
        assert config.get("version") == 1, config
        return list(config["hooks"].get(event, []))

    def run_hook(self, entry: dict[str, Any], payload: dict[str, Any]) -> Answer:
        """One entry, run and read as Cursor does."""
        closed = entry.get("failClosed") is True
        try:
            done = subprocess.run(["sh", "-c", entry["command"]], input=json.dumps(payload),
                                  text=True, capture_output=True, cwd=self.project,
                                  env=self.env, timeout=entry.get("timeout", 60), check=False)
        except subprocess.TimeoutExpired:
            return Answer(not closed, "hook timed out", failed="timeout")
        if done.returncode == 2:
            return Answer(False, done.stdout.strip() or NO_REASON)
        if done.returncode != 0:
            return Answer(not closed, done.stdout, failed=f"exit {done.returncode}")
        try:
            body = json.loads(done.stdout) if done.stdout.strip() else None
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return Answer(not closed, done.stdout, failed="no JSON answer")
        allowed = body.get("permission", "allow") == "allow"
        return Answer(allowed, str(body.get("user_message") or ""), body)

    def fire(self, event: str, payload: dict[str, Any]) -> list[Answer]:
        base = {"hook_event_name": event, "conversation_id": self.conversation,
                "generation_id": self.generation, "model": "default",
                "cursor_version": "3.9.16", "workspace_roots": [str(self.project)],
                "user_email": None, "transcript_path": None}
        answers = [self.run_hook(e, {**base, **payload}) for e in self.entries(event)]
        # Under failClosed an empty or unreadable answer is a failed hook, at every event.
        assert not [a for a in answers if a.failed], (event, answers)
        for answer in answers:
            note = answer.body.get("additional_context")
            if isinstance(note, str):
                self.context.append(note)
        return answers

    def start(self) -> None:
        """sessionStart, once."""
        if not self.started:
            self.started = True
            self.fire("sessionStart", {"session_id": self.conversation,
                                       "is_background_agent": False, "composer_mode": "agent"})

    def prompt(self, text: str) -> Answer:
        """The user sends ``text``: beforeSubmitPrompt; the prompt goes on only if every
        answer says ``"continue": true``."""
        self.start()
        answers = self.fire("beforeSubmitPrompt", {"prompt": text, "attachments": []})
        assert answers, "no hook ran before the prompt"
        stopped = next((a for a in answers if a.body.get("continue") is not True), None)
        return stopped or answers[0]

    def shell(self, command: str) -> Turn:
        """The model's Shell tool call: sessionStart once, the hooks before the tool (every
        answer must allow), the command, then the hooks after it."""
        self.start()
        call_id = str(uuid.uuid4())
        tool_input = {"command": command, "cwd": "", "timeout": 30000}
        before = [*self.fire("preToolUse", {"tool_name": "Shell", "tool_input": tool_input,
                                            "tool_use_id": call_id, "cwd": ""}),
                  *self.fire("beforeShellExecution", {"command": command, "cwd": "",
                                                      "sandbox": False})]
        assert before, "no hook ran before the tool: the installed hooks would never fire"
        denied = next((a for a in before if not a.allowed), None)
        if denied is not None:
            return Turn(False, denied.reason, denied)
        done = subprocess.run(["sh", "-c", command], cwd=self.project, text=True,
                              capture_output=True, timeout=60, check=False)
        output = done.stdout + done.stderr
        self.fire("postToolUse", {"tool_name": "Shell", "tool_input": tool_input,
                                  "tool_output": json.dumps({"output": output,
                                                             "exitCode": done.returncode}),
                                  "tool_use_id": call_id, "cwd": "", "duration": 12.5})
        self.fire("afterShellExecution", {"command": command, "output": output,
                                          "duration": 12.5, "sandbox": False})
        return Turn(True, output)
