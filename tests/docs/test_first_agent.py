"""The "Your first agent" tutorial, end to end, as a reader follows it: its files written
into an empty folder, `hookgate check`, `hookgate serve` on 127.0.0.1, a run started with the
page's curl command and another with its Python sample, both approved with the page's
`hookgate approvals` commands, the audit log read with its curl and Python samples and its
chain checked with `hookgate audit verify` in a terminal of its own."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.docs.samples import DOCS, Block, blocks
from tests.instances import Instance

PAGE = DOCS / "getting-started" / "first-agent.md"
TOKEN = "dev-token-alice"


def shell(block: Block, cwd: Path, env: dict[str, str], url: str, **swap: str) -> str:
    """Run a shell block with bash, `hookgate` being this interpreter's hookgate."""
    script = block.code.replace("http://127.0.0.1:8000", url)
    for old, new in swap.items():
        script = script.replace(old, new)
    prelude = f'hookgate() {{ "{sys.executable}" -m hookgate.cli.main "$@"; }}\nset -e\n'
    done = subprocess.run(["bash", "-c", prelude + script], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{block.where}: {done.stdout}\n{done.stderr}"
    return done.stdout


def run_python(block: Block) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block.code, block.where, "exec"), {"__name__": "docs_sample"})
    return out.getvalue()


def wait_status(client: httpx.Client, run_id: str, wanted: str) -> dict[str, object]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        run = client.get(f"/api/runs/{run_id}").json()
        if run["status"] == wanted:
            return dict(run)
        time.sleep(0.1)
    raise AssertionError(f"run {run_id} never reached {wanted}: {run}")


def test_the_first_agent_tutorial_runs_as_written(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    page = blocks(PAGE)
    files = [b for b in page if b.file]
    assert [b.file for b in files] == ["shop_tools.py", "shop_hooks.py", "hookgate.yaml"]
    for block in files:
        (tmp_path / str(block.file)).write_text(block.code, encoding="utf-8")
    commands = [b for b in page if b.sample == "shell"]
    check, serve, start, listing, approve, audit_list, audit, verify = commands
    samples = [b for b in page if b.sample == "tutorial"]
    start_in_python, audit_in_python = samples

    repo = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "ALICE_TOKEN": TOKEN, "HOOKGATE_TOKEN": TOKEN,
           "PYTHONPATH": os.pathsep.join(
               [repo + "/src", repo, os.environ.get("PYTHONPATH", "")]),
           "COLUMNS": "100", "NO_COLOR": "1"}
    checked = shell(check, tmp_path, env, "")
    assert "refund_cap" in checked and "audit_log" in checked

    assert serve.code.strip() == "hookgate serve --config hookgate.yaml --port 8000"
    server = Instance("tutorial", tmp_path / "hookgate.yaml", tmp_path,
                      env={"ALICE_TOKEN": TOKEN})
    server.spawn()
    try:
        server.wait_up()
        env["HOOKGATE_URL"] = server.url
        monkeypatch.setenv("HOOKGATE_URL", server.url)
        monkeypatch.setenv("HOOKGATE_TOKEN", TOKEN)
        client = httpx.Client(base_url=server.url, timeout=20,
                              headers={"Authorization": f"Bearer {TOKEN}"})

        # Two runs: one started with curl, one with the Python sample; both wait for a person.
        from_curl = json.loads(shell(start, tmp_path, env, server.url))["run_id"]
        printed = run_python(start_in_python).split()
        from_python, status = printed
        assert status == "awaiting_approval"
        wait_status(client, from_curl, "awaiting_approval")
        pending = client.get("/api/confirmations", params={"status": "pending"}).json()
        ids = [r["id"] for r in pending]
        assert len(ids) == 2

        listed = shell(listing, tmp_path, env, server.url)
        assert all(i in listed for i in ids), listed
        for request_id in ids:
            shell(approve, tmp_path, env, server.url, REQUEST_ID=request_id)
        for run_id in (from_curl, from_python):
            assert wait_status(client, run_id, "completed")["answer"] == "The refund is done."

        table = shell(audit_list, tmp_path, env, server.url)
        assert all(i in table for i in ids) and "alice" in table, table
        rows = json.loads(shell(audit, tmp_path, env, server.url))["items"]
        assert [r["outcome"] for r in rows] == ["ok", "ok"]
        assert sorted(r["request_id"] for r in rows) == sorted(ids)
        assert all(r["approver"] == "alice" and r["wait_us"] > r["latency_us"] for r in rows)
        printed_rows = run_python(audit_in_python).splitlines()
        assert printed_rows == [
            "shop__refund ok approved by alice {'amount': 2500, 'order_id': 'A-1001'}"] * 2
        # audit verify runs in a terminal of its own, where only the page's export is set.
        verify_env = {k: v for k, v in env.items() if k != "ALICE_TOKEN"}
        verified = shell(verify, tmp_path, verify_env, server.url)
        assert "ok: 2 row(s) in 1 chain(s) verified" in verified, verified
        client.close()
    finally:
        server.stop()
