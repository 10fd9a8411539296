"""`hookgate demo` end to end: a real subprocess in an 80-column terminal, read with
`hookgate approvals show`, decided with the `hookgate approvals approve` command it prints
(copied as printed) or with `reject`; the answer says what really happened."""

from __future__ import annotations

import concurrent.futures
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from hookgate.demo.model import demo_turn
from tests.live_server import free_port

HOOKGATE = [sys.executable, "-m", "hookgate.cli.main"]
ENV = {**os.environ, "COLUMNS": "80"}


def _start_demo(tmp_path: Path) -> tuple[subprocess.Popen[str], str, str, list[str]]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    demo = subprocess.Popen(
        [*HOOKGATE, "demo", "--port", str(port), "--dir", str(tmp_path), "--exit-after-run"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ENV)
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
    return demo, url, token, lines


def _rest(demo: subprocess.Popen[str], timeout: float) -> str:
    """What the demo prints until it exits. Not ``communicate()``: it reads the pipe's file
    descriptor directly, so whatever ``readline()`` already buffered would be lost."""
    assert demo.stdout is not None
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        rest = pool.submit(demo.stdout.read)
        try:
            out = rest.result(timeout=timeout)
        except concurrent.futures.TimeoutError:
            demo.kill()
            raise
    demo.wait(timeout=30)
    return out


def _printed_approve(demo: subprocess.Popen[str], lines: list[str],
                     with_edit: bool = False) -> list[str]:
    """The `hookgate approvals approve …` command the demo printed (``with_edit``: the one
    that approves a lowered amount), split as a shell would."""
    assert demo.stdout is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = demo.stdout.readline()
        if not line:
            break
        lines.append(line)
        if line.strip().startswith("hookgate approvals approve") and (
                ("--set" in line) == with_edit):
            return shlex.split(line)
    raise AssertionError("".join(lines))


def _pending(url: str, token: str) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    pending: list[dict[str, Any]] = []
    while not pending and time.monotonic() < deadline:
        r = httpx.get(f"{url}/api/confirmations?status=pending",
                      headers={"Authorization": f"Bearer {token}"}, timeout=5)
        pending = r.json()
        time.sleep(0.1)
    [request] = pending
    return request


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*HOOKGATE, "approvals", *args], capture_output=True, text=True,
                          timeout=60, env=ENV)


def test_demo_shows_the_approvers_context_and_completes_once_approved(tmp_path: Path) -> None:
    demo, url, token, lines = _start_demo(tmp_path)
    command = _printed_approve(demo, lines)
    request = _pending(url, token)
    assert request["payload"]["args"] == {"amount": 60000.0, "vendor": "ACME"}
    # The printed command, whole on one line, is exactly the one to run.
    assert command == ["hookgate", "approvals", "approve", request["id"], "--url", url,
                       "--token", token]

    shown = _cli("show", request["id"], "--url", url, "--token", token)
    assert shown.returncode == 0, shown.stderr
    out = " ".join(shown.stdout.split())
    assert "user asked Pay ACME for the Q3 hardware order: 12,000 now and the 60,000" in out
    assert "what it does Pay a vendor through the OA system." in out
    assert ("why approval the tool's rule: payments above 50,000 need a person's approval"
            in out)
    assert '{"amount": 60000.0, "vendor": "ACME"} (amount = 60,000)' in out
    assert request["payload"]["args_sha256"] in out
    listed = _cli("list", "--url", url, "--token", token)
    assert "payments above 50,000" in listed.stdout

    approve = _cli(*command[2:], "--reason", "budgeted")
    assert approve.returncode == 0, approve.stderr
    assert "approved by alice via cli" in approve.stdout

    out = _rest(demo, timeout=60)
    transcript = "".join(lines) + out
    assert demo.returncode == 0, transcript
    # The terminal walkthrough shows the same context next to the exact arguments.
    flat = " ".join(transcript.split())
    assert "User asked: Pay ACME for the Q3 hardware order" in flat
    assert "Why: the tool's rule: payments above 50,000 need a person's approval" in flat
    assert '{"amount": 60000.0, "vendor": "ACME"} (amount = 60,000)' in flat
    assert "Paid 60,000.00 to ACME" in transcript
    assert "Paid ACME 12,000. Paid ACME 60,000." in flat
    assert "run finished: completed" in transcript
    assert (tmp_path / "hookgate-demo.db").exists()


def test_demo_walkthrough_approves_a_lowered_amount_and_the_answer_says_so(
        tmp_path: Path) -> None:
    demo, url, token, lines = _start_demo(tmp_path)
    _printed_approve(demo, lines)
    command = _printed_approve(demo, lines, with_edit=True)
    request = _pending(url, token)
    assert command[:6] == ["hookgate", "approvals", "approve", request["id"], "--set",
                           "amount=40000"]
    approve = _cli(*command[2:])
    assert approve.returncode == 0, approve.stderr
    assert "amount: 60000.0 → 40000.0" in approve.stdout
    out = _rest(demo, timeout=60)
    transcript = "".join(lines) + out
    flat = " ".join(transcript.split())
    assert demo.returncode == 0, transcript
    assert "or approve a lowered amount" in flat
    assert "edited amount: 60000.0 → 40000.0" in flat
    assert "40,000 now; the rest once the hardware is delivered" in flat
    assert "Paid 40,000.00 to ACME" in flat
    assert "Paid ACME 12,000. Paid ACME 40,000 (alice changed it from 60,000)." in flat
    assert "run finished: completed" in flat


def _printed_reject(demo: subprocess.Popen[str], lines: list[str]) -> list[str]:
    """The `hookgate approvals reject …` command the demo printed, split as a shell would."""
    assert demo.stdout is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = demo.stdout.readline()
        if not line:
            break
        lines.append(line)
        if line.strip().startswith("hookgate approvals reject"):
            return shlex.split(line)
    raise AssertionError("".join(lines))


def test_demo_rejected_with_the_printed_command_says_the_payment_did_not_happen(
        tmp_path: Path) -> None:
    demo, url, token, lines = _start_demo(tmp_path)
    command = _printed_reject(demo, lines)
    request = _pending(url, token)
    assert command[:4] == ["hookgate", "approvals", "reject", request["id"]]
    assert command[-4:] == ["--url", url, "--token", token]
    reject = _cli(*command[2:], "--reason", "not budgeted")
    assert reject.returncode == 0, reject.stderr
    out = _rest(demo, timeout=60)
    flat = " ".join(("".join(lines) + out).split())
    assert demo.returncode == 0, flat
    assert "Paid ACME 12,000. Did not pay ACME 60,000: Not approved" in flat
    assert "not budgeted" in flat and "once approved" not in flat
    assert "Not this quarter; ask finance first" in flat  # the printed --message
    assert "run finished: completed, but a payment was not approved" in flat


def test_ctrl_c_on_a_waiting_demo_says_it_stopped_and_nothing_after(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    demo = subprocess.Popen(  # no --exit-after-run: the demo would keep serving
        [*HOOKGATE, "demo", "--port", str(port), "--dir", str(tmp_path)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ENV)
    lines: list[str] = []
    command = _printed_approve(demo, lines)
    _printed_approve(demo, lines)  # the last command printed ("and remember")
    token = command[command.index("--token") + 1]
    request = _pending(url, token)
    demo.send_signal(signal.SIGINT)
    out = _rest(demo, timeout=60)
    assert demo.returncode == 130, out
    said = [line.strip() for line in out.splitlines() if line.strip()]
    # The last words say the demo stopped with the request undecided; no "run finished"
    # (it did not), no "press Ctrl-C to stop" (it was pressed).
    assert said, out
    flat = " ".join(said)
    assert flat.startswith("demo stopped before its run finished; request "
                           f"{request['id']} was not decided."), out
    assert "run finished" not in flat.replace("before its run finished", "")
    assert "Ctrl-C" not in flat


@pytest.mark.parametrize(("message", "calls"), [
    ("Pay ACME 60000 for the servers", [60000.0]),
    ("pay globex 1,200.50 and 70,000", [1200.5, 70000.0]),
])
def test_the_demo_model_pays_what_the_message_asks(message: str, calls: list[float]) -> None:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "x"},
                                      {"role": "user", "content": message}]
    assert demo_turn(messages) == {"tool_calls": [{"name": "oa__list_vendors", "args": {}}]}
    paid = []
    for _ in calls:
        messages.append({"role": "assistant", "content": None})
        turn = demo_turn(messages)
        paid.append(turn["tool_calls"][0]["args"]["amount"])
    assert paid == calls


def test_the_demo_model_asks_when_the_message_names_no_vendor_or_amount() -> None:
    turn = demo_turn([{"role": "user", "content": "hello"}])
    assert "Tell me which vendor and how much" in turn["answer"]


def test_demo_approve_and_remember_lets_the_second_order_through_by_the_rule(
        tmp_path: Path) -> None:
    demo, url, token, lines = _start_demo(tmp_path)
    _printed_approve(demo, lines)
    remember = _printed_approve(demo, lines)  # the next printed approve: "and remember"
    assert "--remember" in remember
    request = _pending(url, token)
    assert remember[3] == request["id"]
    approved = _cli(*remember[2:])
    assert approved.returncode == 0, approved.stderr
    assert "remembered: ar_" in " ".join(approved.stdout.split())

    out = _rest(demo, timeout=90)
    flat = " ".join(("".join(lines) + out).split())
    assert demo.returncode == 0, flat
    rule = re.search(r"Standing rule (ar_\w+) by alice", flat)
    assert rule, flat
    # The second order pays 70,000 without a request: approved by the rule, on the trace.
    assert f"approved by rule {rule.group(1)}, created by alice" in flat
    assert "Paid ACME 70,000." in flat
    assert "second run finished: completed" in flat
    assert flat.count("needs a person's approval") == 1  # only the first order asked


def _remember_and_finish(tmp_path: Path) -> str:
    """A first demo whose approver remembered the decision; the rule's id."""
    demo, _, _, lines = _start_demo(tmp_path)
    _printed_approve(demo, lines)
    remember = _printed_approve(demo, lines)
    approved = _cli(*remember[2:])
    assert approved.returncode == 0, approved.stderr
    out = _rest(demo, timeout=90)
    flat = " ".join(("".join(lines) + out).split())
    assert demo.returncode == 0, flat
    rule = re.search(r"Standing rule (ar_\w+) by alice", flat)
    assert rule, flat
    return rule.group(1)


def test_a_second_demo_in_the_same_folder_asks_again_for_the_payment(tmp_path: Path) -> None:
    rule = _remember_and_finish(tmp_path)

    demo, url, token, lines = _start_demo(tmp_path)
    request = _pending(url, token)  # the rule of the first demo is gone: a person is asked
    assert request["payload"]["args"] == {"amount": 60000.0, "vendor": "ACME"}
    assert _cli("reject", request["id"], "--url", url, "--token", token).returncode == 0
    out = _rest(demo, timeout=60)
    flat = " ".join(("".join(lines) + out).split())
    assert "new: an earlier demo's data was removed (--keep-data keeps it)" in flat
    assert rule not in flat


def test_a_demo_that_keeps_its_data_says_the_rule_approved_and_shows_no_rule_as_a_request(
        tmp_path: Path) -> None:
    rule = _remember_and_finish(tmp_path)
    port = free_port()

    done = subprocess.run(
        [*HOOKGATE, "demo", "--port", str(port), "--dir", str(tmp_path), "--exit-after-run",
         "--keep-data"], capture_output=True, text=True, env=ENV, timeout=120)

    flat = " ".join(done.stdout.split())
    assert done.returncode == 0, flat + done.stderr
    assert "kept from an earlier demo (--keep-data)" in flat
    assert f"No one was asked: standing rule {rule} from an earlier demo approved the " \
           "payment. Start with --fresh to see the approval." in flat
    assert f"oa__purchase_pay approved without asking anyone: approved by rule {rule}, " \
           "created by alice" in flat
    assert f"request {rule}" not in flat and "needs a person's approval" not in flat
    assert "Paid ACME 12,000. Paid ACME 60,000." in flat
