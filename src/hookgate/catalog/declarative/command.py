"""Command hooks: a shell command gets the hook input on stdin and answers on stdout.

Exit status 0 with empty stdout allows; 0 with a JSON object answers (protocol.py); 2 blocks
with stderr as the reason; anything else is a failure. The command runs in its own process
group, so a timeout kills it together with everything it started.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from hookgate.catalog.declarative.protocol import HookProtocolError, HookReply, reply_from_text
from hookgate.hooks.errors import HookBuildError
from hookgate.hooks.model import HookPoint
from hookgate.telemetry.propagation import subprocess_env

#: Keys a command hook entry takes besides the common ones.
KEYS = frozenset({"command", "cwd"})


@dataclass(frozen=True, slots=True)
class CommandRunner:
    """Runs ``command`` with ``/bin/sh -c`` (as Claude Code does), in ``cwd`` if given."""

    kind: ClassVar[str] = "command"
    command: str
    cwd: str | None = None

    @classmethod
    def from_declaration(cls, entry: Mapping[str, Any]) -> CommandRunner:
        command = entry.get("command")
        if not isinstance(command, str) or not command.strip():
            raise HookBuildError("a command hook needs 'command', a non-empty string")
        cwd = entry.get("cwd")
        if cwd is not None and (not isinstance(cwd, str) or not os.path.isdir(cwd)):
            raise HookBuildError(f"'cwd' {cwd!r} is not a directory")
        return cls(command, cwd)

    async def ask(self, payload: dict[str, Any], point: HookPoint) -> HookReply:
        proc = await asyncio.create_subprocess_shell(
            self.command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=self.cwd,
            env=subprocess_env(),
            start_new_session=True,
        )
        try:
            out, err = await proc.communicate(json.dumps(payload, ensure_ascii=False).encode())
        except BaseException:
            # Timed out (the registry cancels us) or interrupted: nothing it started lives on.
            _kill_group(proc.pid)
            with contextlib.suppress(Exception):
                await proc.wait()
            raise
        stderr = err.decode("utf-8", "replace").strip()
        status = proc.returncode
        if status == 0:
            return reply_from_text(out.decode("utf-8", "replace"), point)
        if status == 2:
            return HookReply(block_reason=stderr)
        if status is not None and status < 0:
            raise HookProtocolError(f"the command was killed by {_signal_name(-status)}")
        detail = f": {_tail(stderr)}" if stderr else ""
        raise HookProtocolError(f"the command exited with status {status}{detail}")

    def describe(self) -> str:
        return f"command={self.command!r}"


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
