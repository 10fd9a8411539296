"""Stopping a downstream server that never completed its start does not wait: there is no
open connection to close gracefully, so the failed start is reported at once and the
server's process is ended in the background (a server that never answers its handshake used
to hold each stop for five seconds, then the SDK's own shutdown grace); closing the gateway
waits for what is still ending, and no process is left behind."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from hookgate.config.mcp_servers import McpServerSpec
from hookgate.mcp import downstream
from hookgate.mcp.downstream import DownstreamServer
from hookgate.mcp.errors import DownstreamError
from tests.channels.world import eventually

FLAKY = Path(__file__).with_name("flaky_server.py")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_a_server_that_never_answered_its_handshake_is_ended_without_waiting_out_the_grace(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A grace no test outlives: the stop below finishes only if it does not wait for it.
    monkeypatch.setattr(downstream, "STOP_GRACE_S", 3600.0)
    pid_file = tmp_path / "silent.pid"
    server = DownstreamServer(McpServerSpec(
        id="silent", command=sys.executable, args=[str(FLAKY)],
        env={"FLAKY_MODE": "silent", "FLAKY_PID": str(pid_file)}, startup_timeout_s=0.5))
    with pytest.raises(DownstreamError, match="did not complete its start"):
        await server.client()
    # Reported while its process is still being ended: the stop waited for nothing.
    assert server.ending == 1 and not server.running and server.starts == 0
    with pytest.raises(DownstreamError, match="did not complete its start"):
        await server.client()  # within the back-off: the same failure, no second start
    pid = int(await eventually(lambda: pid_file.exists() and pid_file.read_text(),
                               "the silent server's process id"))
    await server.close()
    assert server.ending == 0 and not alive(pid)
