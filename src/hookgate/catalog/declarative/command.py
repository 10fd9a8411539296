"""Command hooks: a shell command gets the hook input on stdin and answers on stdout.

Exit status 0 answers (protocol.py: JSON when stdout starts with ``{``, else plain text);
2 blocks with the JSON reason if one is given, else stderr; anything else is a failure. The
command reaches ``sh -c`` exactly as written, with Claude Code's environment
(``CLAUDE_PROJECT_DIR`` …). Its stdio are unlinked temporary files, not pipes, so nothing it
leaves behind (even a grandchild that escaped with ``setsid``) can hold the call: the hook
ends when the shell exits or its timeout kills the shell's whole process group.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import IO, Any, ClassVar

from hookgate.catalog.declarative.protocol import (
    HookProtocolError,
    HookReply,
    reply_from_exit_2,
    reply_from_text,
)
from hookgate.hooks.errors import HookBuildError
from hookgate.hooks.model import HookPoint
from hookgate.telemetry.propagation import subprocess_env

#: Keys a command hook entry takes besides the common ones.
KEYS = frozenset({"command", "cwd", "shell"})
#: What is read of a command's stdout or stderr; the rest is cut (a hook's answer is small).
MAX_OUTPUT = 4 * 1024 * 1024
#: Shells a declaration may name (Claude Code's ``shell``); the command is passed with -c.
SHELLS = {"sh": "/bin/sh", "bash": "/bin/bash"}


@dataclass(frozen=True, slots=True)
class CommandRunner:
    """Runs ``command`` with ``sh -c`` (as Claude Code does) in ``cwd``, the project dir."""

    kind: ClassVar[str] = "command"
    command: str
    cwd: str | None = None
    shell: str = "/bin/sh"
    #: Variables added to the hook's environment (e.g. ``CLAUDE_PLUGIN_ROOT``).
    env: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_declaration(cls, entry: Mapping[str, Any]) -> CommandRunner:
        command = entry.get("command")
        if not isinstance(command, str) or not command.strip():
            raise HookBuildError("a command hook needs 'command', a non-empty string")
        cwd = entry.get("cwd")
        if cwd is not None and (not isinstance(cwd, str) or not os.path.isdir(cwd)):
            raise HookBuildError(f"'cwd' {cwd!r} is not a directory")
        shell = entry.get("shell", "sh")
        if shell not in SHELLS:
            raise HookBuildError(f"'shell' must be one of {', '.join(SHELLS)}, got {shell!r}")
        return cls(command, cwd, SHELLS[shell])

    async def ask(self, payload: dict[str, Any], point: HookPoint) -> HookReply:
        with _spool(json.dumps(payload, ensure_ascii=False).encode()) as stdin, \
                tempfile.TemporaryFile() as stdout, tempfile.TemporaryFile() as stderr:
            proc = await asyncio.create_subprocess_exec(
                self.shell, "-c", self.command,
                stdin=stdin, stdout=stdout, stderr=stderr,
                cwd=self.cwd, env=self._environment(payload), start_new_session=True,
            )
            try:
                status = await proc.wait()
            except BaseException:
                # Timed out (the registry cancels us) or interrupted: nothing in its
                # process group lives on.
                _kill_group(proc.pid)
                with contextlib.suppress(Exception):
                    await asyncio.shield(proc.wait())
                raise
            out, err = _read(stdout), _read(stderr).strip()
        if status == 0:
            return reply_from_text(out, point)
        if status == 2:
            return reply_from_exit_2(out, err)
        if status < 0:
            raise HookProtocolError(f"the command was killed by {_signal_name(-status)}")
        detail = f": {_tail(err)}" if err else ""
        raise HookProtocolError(f"the command exited with status {status}{detail}")

    def _environment(self, payload: Mapping[str, Any]) -> dict[str, str]:
        # The process's environment, with the trace context when a span is current.
        env = subprocess_env() or dict(os.environ)
        project = self.cwd or str(payload.get("cwd") or os.getcwd())
        env["CLAUDE_PROJECT_DIR"] = project
        env["CLAUDECODE"] = "1"
        env["CLAUDE_CODE_ENTRYPOINT"] = "hookgate"
        session = payload.get("session_id")
        if isinstance(session, str):
            env["CLAUDE_CODE_SESSION_ID"] = session
        env.update(self.env)
        return env

    def describe(self) -> str:
        return f"command={self.command!r}"


@contextlib.contextmanager
def _spool(data: bytes) -> Iterator[IO[bytes]]:
    with tempfile.TemporaryFile() as handle:
        handle.write(data)
        handle.seek(0)
        yield handle


def _read(handle: IO[bytes]) -> str:
    handle.seek(0)
    return handle.read(MAX_OUTPUT).decode("utf-8", "replace")


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _tail(text: str, limit: int = 500) -> str:
    return text if len(text) <= limit else "…" + text[-limit:]
