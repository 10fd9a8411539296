"""`hookgate demo` end to end: a real subprocess in an 80-column terminal, approved with the
`hookgate approvals approve` command it prints, copied as printed."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.live_server import free_port

HOOKGATE = [sys.executable, "-m", "hookgate.cli.main"]


def test_demo_waits_for_approval_and_completes_once_approved(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "COLUMNS": "80"}
    demo = subprocess.Popen(
        [*HOOKGATE, "demo", "--port", str(port), "--dir", str(tmp_path), "--exit-after-run"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    assert demo.stdout is not None
    lines: list[str] = []
    token = None
    deadline = time.monotonic() + 60
    while token is None and time.monotonic() < deadline:
        line = demo.stdout.readline()
        if not line:
            break
        lines.append(line)
        m = re.search(r"Token:\s+(demo-[A-Za-z0-9_-]+)", line)
        if m:
            token = m.group(1)
    assert token, "".join(lines)

    command = None
    while command is None and time.monotonic() < deadline:
        line = demo.stdout.readline()
        if not line:
            break
        lines.append(line)
        if line.strip().startswith("hookgate approvals approve"):
            command = shlex.split(line)
    assert command, "".join(lines)

    pending = httpx.get(f"{url}/api/confirmations?status=pending",
                        headers={"Authorization": f"Bearer {token}"}, timeout=5).json()
    [request] = pending
    assert request["payload"]["args"] == {"amount": 60000.0, "vendor": "ACME"}
    # The printed command, whole on one line, is exactly the one to run.
    assert command == ["hookgate", "approvals", "approve", request["id"], "--url", url,
                       "--token", token]
    approve = subprocess.run(
        [*HOOKGATE, *command[1:], "--reason", "budgeted"],
        capture_output=True, text=True, timeout=60, env=env)
    assert approve.returncode == 0, approve.stderr
    assert "approved by alice" in approve.stdout

    out, _ = demo.communicate(timeout=60)
    transcript = "".join(lines) + out
    assert demo.returncode == 0, transcript
    assert "needs a person's approval" in transcript
    assert "Paid 60,000.00 to ACME" in transcript
    assert "run finished: completed" in transcript
    assert (tmp_path / "hookgate-demo.db").exists()
