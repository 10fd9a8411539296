"""Attacks on the Codex, Gemini CLI and Cursor hook routes through a real served hookgate and
the installed hook commands run as each agent runs them (``sh -c COMMAND``, payload on stdin).

A call "gets through" when hookgate answers it with what the agent reads as an allow
(Codex and Gemini: exit 0 with ``{}``/nothing; Cursor: ``{"permission":"allow"}``) although
a person had to decide, or when a report runs PostToolUse twice.

Tally: 196 attempts (SQLite and PostgreSQL counted apart); 38 got through before this
branch's fixes: a shell call carrying both ``command`` and ``cmd`` (3 agents), look-alike shell
names (``Shell ``, ``ＳＨＥＬＬ``, ``run_shell_command ``, ``BASH``, a zero-width space,
``Run_Shell_Command``), one PostToolUse report sent twice with a non-JSON value (``1e999``,
a lone surrogate, Cursor's ``NaN`` output: ran twice), another tool's report under the
shell call's id (the shell's PostToolUse hooks skipped), a call approved after its caller's
token was revoked (allowed), and ``install --wait`` of -100 or 1e12 (a Node-timed hook
timeout that fires at once: the tool runs).
"""

from __future__ import annotations

import itertools
import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from hookgate.cli.main import app
from hookgate.coding_agents import codex_config, cursor_config, gemini_config
from hookgate.coding_agents.forwarder import Accept, command
from tests.adversarial_tally import Tally
from tests.claude_code.scene import TOKEN, coder
from tests.coding_agents.failing_hookgate import failing_hookgate
from tests.conftest import BACKENDS, migrated_database_url
from tests.engines.world import ALICE
from tests.live_server import LiveServer, live_server

pytestmark = pytest.mark.both_databases

PUSH = '"git push" in args.command and "main" in args.command'
RULES = [
    {"matcher": "Bash", "when": PUSH, "requires_confirmation": True,
     "reason": "pushing to main needs a person"},
    {"matcher": "mcp__git__push", "requires_confirmation": True,
     "reason": "an MCP push needs a person"},
]
ROUTES = {"codex": "/api/codex/hooks", "gemini": "/api/gemini/hooks",
          "cursor": "/api/cursor/hooks"}


MALLORY = "tok-mallory-of-globex"


@pytest.fixture(scope="module", params=BACKENDS)
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[LiveServer]:
    """One server per backend for the module's attempts (`srv` holds them apart)."""
    from hookgate.runtime.deployment import OrgSpec, UserSpec, token_digest

    deployment = coder(wait_s=0.3, rules=RULES)
    deployment.database_url = migrated_database_url(request, tmp_path_factory.mktemp("agents"))
    deployment.orgs.append(OrgSpec("globex", "Globex"))
    deployment.users.append(UserSpec("mallory", "globex", admin=True,
                                     token_sha256=token_digest(MALLORY)))
    with live_server(deployment) as server:
        yield server


#: A session field as ``json.dumps`` writes it in every agent's hook input.
_SESSION_FIELD = re.compile(rb'("(?:session_id|conversation_id)": ")')
_tests = itertools.count()


@dataclass
class Served:
    """The module's server as one test sees it: every session its calls name (``s-1``,
    ``s-A``, ``s-1 `` …) gets a prefix of the test's own, so no approval, pending request,
    call id or report of another test is in any session it uses, and each test meets the
    server as a fresh one would meet it (the token-revocation tests keep a server each)."""

    server: LiveServer
    tag: str

    @property
    def url(self) -> str:
        return self.server.url

    def content(self, body: Any = None, raw: bytes | None = None) -> bytes:
        """``body`` (or ``raw``) as sent, its sessions the test's own."""
        content = raw if raw is not None else json.dumps(body).encode()
        return _SESSION_FIELD.sub(rb"\g<1>" + self.tag.encode(), content)


@pytest.fixture
def srv(served: LiveServer) -> Served:
    return Served(served, f"t{next(_tests)}~")


# -- each agent's hook inputs --------------------------------------------------------------

def codex(tool: str, args: dict[str, Any], call_id: str = "call_1", session: str = "s-1",
          event: str = "PreToolUse", **extra: Any) -> dict[str, Any]:
    return {"hook_event_name": event, "session_id": session, "cwd": "/work/repo",
            "tool_name": tool, "tool_input": args, "tool_use_id": call_id, **extra}


def gemini(tool: str, args: dict[str, Any], stamp: str = "2026-12-06T07:00:00.000Z",
           session: str = "s-1", event: str = "BeforeTool", **extra: Any) -> dict[str, Any]:
    return {"hook_event_name": event, "session_id": session, "cwd": "/work/repo",
            "timestamp": stamp, "tool_name": tool, "tool_input": args, **extra}


def cursor(tool: str, args: dict[str, Any], call_id: str = "call_1", session: str = "s-1",
           event: str = "preToolUse", **extra: Any) -> dict[str, Any]:
    return {"hook_event_name": event, "conversation_id": session, "generation_id": "g-1",
            "workspace_roots": ["/work/repo"], "tool_name": tool, "tool_input": args,
            "tool_use_id": call_id, **extra}


def send(srv: Served, kind: str, body: Any, *, raw: bytes | None = None,
         token: str = TOKEN, agent: str = "coder") -> httpx.Response:
    content = srv.content(body, raw)
    return httpx.post(f"{srv.url}{ROUTES[kind]}", params={"agent": agent}, content=content,
                      headers={"Authorization": f"Bearer {token}",
                               "Content-Type": "application/json"}, timeout=60)


def allowed(kind: str, r: httpx.Response) -> bool:
    """Whether the agent would read this answer as an allow (its forwarder passes it on)."""
    if r.status_code != 200:
        return False
    if kind == "cursor":
        return r.text.startswith('{"permission":"allow"')
    return r.text == "{}"


def requests(srv: Served | LiveServer) -> list[dict[str, Any]]:
    return list(httpx.get(f"{srv.url}/api/confirmations",
                          headers={"Authorization": f"Bearer {TOKEN}"}).json())


def approve(srv: Served, request_id: str) -> None:
    r = httpx.post(f"{srv.url}/api/confirmations/{request_id}/respond",
                   json={"decision": "approve"}, headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 200, r.text


def audit(srv: Served) -> list[dict[str, Any]]:
    r = httpx.get(f"{srv.url}/api/audit", params={"limit": 100},
                  headers={"Authorization": f"Bearer {TOKEN}"})
    return list(r.json()["items"])


# -- the rule "git push to main needs a person", in each agent's shape ---------------------

PUSH_SHAPES = [
    ("codex", codex("Bash", {"command": "git push origin main"})),
    ("codex", codex("exec_command", {"cmd": ["git", "push", "origin", "main"]})),
    ("codex", codex("shell", {"command": ["bash", "-lc", "git push origin main"]})),
    ("codex", codex("mcp__git__push", {"branch": "main"})),
    ("gemini", gemini("run_shell_command", {"command": "git push origin main",
                                            "description": "publish"})),
    ("gemini", gemini("push", {"branch": "main"},
                      mcp_context={"server_name": "git", "tool_name": "push"})),
    ("cursor", cursor("Shell", {"command": "git push origin main", "cwd": ""})),
    ("cursor", cursor("MCP:git:push", {"branch": "main"})),
    ("cursor", {"hook_event_name": "beforeShellExecution", "conversation_id": "s-1",
                "command": "git push origin main", "cwd": "/work/repo"}),
    ("cursor", {"hook_event_name": "beforeMCPExecution", "conversation_id": "s-1",
                "tool_name": "git:push", "tool_input": json.dumps({"branch": "main"})}),
]


@pytest.mark.parametrize(("kind", "body"), PUSH_SHAPES)
def test_a_push_to_main_needs_a_person_in_every_agents_shape(
        srv: Served, kind: str, body: dict[str, Any], attempt: Tally) -> None:
    r = send(srv, kind, body)
    attempt.record(f"{kind} push to main {body.get('tool_name') or body['hook_event_name']}",
                   got_through=allowed(kind, r))
    assert not allowed(kind, r), r.text
    assert "pending: repeat the identical call" in r.text, r.text


# -- look-alike tool names and ambiguous shell arguments ------------------------------------

@pytest.mark.parametrize(("kind", "body"), [
    ("codex", codex("exec_command", {"command": "ls", "cmd": "git push origin main"})),
    ("gemini", gemini("run_shell_command", {"command": "ls", "cmd": "git push origin main"})),
    ("cursor", cursor("Shell", {"command": "ls", "cmd": "git push origin main"})),
])
def test_a_shell_call_with_two_commands_is_not_judged_by_the_harmless_one(
        srv: Served, kind: str, body: dict[str, Any], attempt: Tally) -> None:
    r = send(srv, kind, body)
    attempt.record(f"{kind} shell call with command and cmd", got_through=allowed(kind, r))
    assert not allowed(kind, r), r.text


@pytest.mark.parametrize(("kind", "tool"), [
    ("cursor", "Shell "), ("cursor", "ＳＨＥＬＬ"), ("gemini", "run_shell_command "),
    ("codex", "BASH"), ("codex", "\u200bBash"), ("gemini", "Run_Shell_Command"),
])
def test_a_look_alike_of_a_shell_tools_name_is_not_waved_through(
        srv: Served, kind: str, tool: str, attempt: Tally) -> None:
    shape = {"codex": codex, "gemini": gemini, "cursor": cursor}[kind]
    r = send(srv, kind, shape(tool, {"command": "git push origin main"}))
    attempt.record(f"{kind} look-alike shell name {tool!r}", got_through=allowed(kind, r))
    assert not allowed(kind, r), r.text
    assert r.status_code == 403 or '"permission":"deny"' in r.text


def test_cursors_mcp_name_and_the_mcp_double_underscore_name_meet_one_rule(
        srv: Served, attempt: Tally) -> None:
    for i, tool in enumerate(["MCP:git:push", "mcp__git__push"]):
        r = send(srv, "cursor", cursor(tool, {"branch": "main"}, call_id=f"m{i}"))
        attempt.record(f"cursor mcp spelling {tool}", got_through=allowed("cursor", r))
        assert not allowed("cursor", r), r.text


# -- approvals, call ids and sessions across agents -----------------------------------------

def _pending(srv: Served, kind: str, body: dict[str, Any]) -> str:
    before = {q["id"] for q in requests(srv)}  # other tests' requests on the shared server
    r = send(srv, kind, body)
    assert "pending" in r.text, r.text
    [request] = [q for q in requests(srv) if q["status"] == "pending" and q["id"] not in before]
    return str(request["id"])


def test_an_approval_of_one_agents_call_does_not_cover_another_agents_identical_call(
        srv: Served, attempt: Tally) -> None:
    request_id = _pending(srv, "gemini", gemini("run_shell_command",
                                                {"command": "git push origin main"}))
    approve(srv, request_id)
    for kind, body in [("codex", codex("Bash", {"command": "git push origin main"})),
                       ("cursor", cursor("Shell", {"command": "git push origin main"}))]:
        r = send(srv, kind, body)
        attempt.record(f"gemini approval used by {kind}", got_through=allowed(kind, r))
        assert not allowed(kind, r), r.text


def test_a_reused_call_id_in_another_session_or_agent_takes_no_approval(
        srv: Served, attempt: Tally) -> None:
    request_id = _pending(srv, "codex", codex("Bash", {"command": "git push origin main"},
                                              call_id="call_X", session="s-A"))
    approve(srv, request_id)
    tries = [("codex", codex("Bash", {"command": "git push origin main"}, call_id="call_X",
                             session="s-B")),
             ("cursor", cursor("Shell", {"command": "git push origin main"},
                               call_id="call_X", session="s-A"))]
    for kind, body in tries:
        r = send(srv, kind, body)
        attempt.record(f"codex call id reused by {kind}", got_through=allowed(kind, r))
        assert not allowed(kind, r), r.text


def test_a_codex_call_id_shaped_like_geminis_takes_no_gemini_approval(
        srv: Served, attempt: Tally) -> None:
    import hookgate.canonical as canonical
    stamp, args = "2026-12-06T07:00:00.000Z", {"command": "git push origin main"}
    request_id = _pending(srv, "gemini", gemini("run_shell_command", args, stamp=stamp))
    approve(srv, request_id)
    forged = "gemini-" + canonical.canonical_sha256([stamp, "Bash", args])[:40]
    r = send(srv, "codex", codex("Bash", args, call_id=forged))
    attempt.record("codex call id forged as gemini's", got_through=allowed("codex", r))
    assert not allowed("codex", r), r.text


def test_another_orgs_token_and_an_unknown_agent_are_refused(
        srv: Served, attempt: Tally) -> None:
    for kind, body in [("codex", codex("Bash", {"command": "ls"})),
                       ("gemini", gemini("run_shell_command", {"command": "ls"})),
                       ("cursor", cursor("Shell", {"command": "ls"}))]:
        for r in (send(srv, kind, body, token=MALLORY), send(srv, kind, body, agent="ghost")):
            attempt.record(f"{kind} foreign token or agent", got_through=r.status_code == 200)
            assert r.status_code in (401, 404), r.text


# -- bodies that are not plain JSON -----------------------------------------------------------

@pytest.mark.parametrize("kind", ["codex", "gemini", "cursor"])
@pytest.mark.parametrize("raw", [
    b'{"x": NaN}', b'{"x": Infinity}', b'{"x": -Infinity}',
    b"[" * 100_000 + b"]" * 100_000,
    b'{"a": ' + b"x" * 2_000_000 + b"}",
])
def test_a_body_that_is_not_plain_json_is_refused_in_one_line(
        srv: Served, kind: str, raw: bytes, attempt: Tally) -> None:
    r = send(srv, kind, None, raw=raw)
    attempt.record(f"{kind} non-JSON body {raw[:12]!r}", got_through=r.status_code == 200)
    assert r.status_code in (403, 413), r.text
    assert "\n" not in r.text.strip()


@pytest.mark.parametrize(("kind", "body"), [
    ("codex", codex("Bash", {"command": "git push origin main\ud800"})),
    ("gemini", gemini("run_shell_command", {"command": "git push origin main\udfff"})),
    ("cursor", cursor("Shell", {"command": "git push origin main\ud800"})),
    ("codex", codex("Bash", {"command": "git push origin main", "n": 1e999})),
    ("codex", codex("Bash", {"command": "git push origin main\u0000"})),
    ("gemini", gemini("run_shell_command", {"command": "git push origin main",
                                            "\u0000": "x"})),
    ("cursor", cursor("Shell", {"command": "git push origin main",
                                "deep": json.loads("[" * 900 + "]" * 900)})),
])
def test_a_gated_command_with_a_lone_surrogate_or_huge_number_is_not_allowed(
        srv: Served, kind: str, body: dict[str, Any], attempt: Tally) -> None:
    raw = json.dumps(body).replace("Infinity", "1e999").encode()
    r = send(srv, kind, None, raw=raw)
    attempt.record(f"{kind} gated command with surrogate/1e999", got_through=allowed(kind, r))
    assert not allowed(kind, r), r.text


@pytest.mark.parametrize(("kind", "raw"), [
    ("codex", json.dumps(codex("mcp__git__status", {}, event="PostToolUse",
                               tool_response={"n": 1})).replace('"n": 1', '"n": 1e999')),
    ("gemini", json.dumps(gemini("status", {}, event="AfterTool",
                                 mcp_context={"server_name": "git", "tool_name": "status"},
                                 tool_response={"llmContent": "\ud800"}))),
    ("cursor", json.dumps(cursor("Read", {"path": "a"}, event="postToolUse",
                                 tool_output="NaN"))),
])
def test_one_report_sent_twice_runs_post_tool_use_once(
        srv: Served, kind: str, raw: str, attempt: Tally) -> None:
    seen = {row["id"] for row in audit(srv)}  # other tests' rows on the shared server
    for _ in range(2):
        r = send(srv, kind, None, raw=raw.encode())
        assert r.status_code in (200, 403), r.text
    rows = [row for row in audit(srv) if row["id"] not in seen]
    attempt.record(f"{kind} report twice with a non-JSON value", got_through=len(rows) > 1)
    assert len(rows) <= 1, rows


# -- the installed hook commands, run as the agent runs them ---------------------------------

def _run(cmd: str, stdin: str, *, shell: str = "sh", token: str = TOKEN,
         env_name: str = "HOOKGATE_TOKEN") -> subprocess.CompletedProcess[str]:
    return subprocess.run([shell, "-c", cmd], input=stdin, text=True, capture_output=True,
                          env={"PATH": "/usr/bin:/bin", env_name: token}, timeout=60,
                          check=False)


def _commands(url: str, *, token_env: str = "HOOKGATE_TOKEN") -> dict[str, str]:
    """Each agent's PreToolUse command as its installer writes it."""
    block = codex_config.hooks_block(url, "coder", token_env=token_env, wait_s=0.3)
    gem = gemini_config.hooks_block(url, "coder", token_env=token_env, wait_s=0.3)
    cur = cursor_config.hooks_block(url, "coder", token_env=token_env, wait_s=0.3)
    return {"codex": block["hooks"]["PreToolUse"][0]["hooks"][0]["command"],
            "gemini": gem["hooks"]["BeforeTool"][0]["hooks"][0]["command"],
            "cursor": cur["hooks"]["preToolUse"][0]["command"]}


def _agent_allows(kind: str, done: subprocess.CompletedProcess[str]) -> bool:
    """Whether the agent runs the tool on this hook result (the documented fail-open:
    exit 0 with an allow, and Codex and Gemini also on exit 1 or malformed output)."""
    if kind == "cursor":
        return done.returncode == 0 and done.stdout.startswith('{"permission":"allow"')
    if done.returncode == 1:
        return True
    return done.returncode == 0 and done.stdout.strip() in ("", "{}")


PUSH_BY_AGENT = {"codex": codex("Bash", {"command": "git push origin main"}, call_id="c9"),
                 "gemini": gemini("run_shell_command", {"command": "git push origin main"},
                                  stamp="2026-12-06T08:00:00.000Z"),
                 "cursor": cursor("Shell", {"command": "git push origin main"},
                                  call_id="c9")}


@pytest.mark.parametrize("kind", ["codex", "gemini", "cursor"])
def test_the_installed_command_blocks_a_gated_call_and_a_foreign_token(
        srv: Served, kind: str, attempt: Tally) -> None:
    cmd = _commands(srv.url)[kind]
    push = srv.content(PUSH_BY_AGENT[kind]).decode()
    gated = _run(cmd, push)
    foreign = _run(cmd, push, token=MALLORY)
    for name, done in (("gated", gated), ("foreign token", foreign)):
        attempt.record(f"{kind} installed command, {name}",
                       got_through=_agent_allows(kind, done))
        assert not _agent_allows(kind, done), (done.returncode, done.stdout, done.stderr)


@pytest.mark.parametrize("kind", ["codex", "gemini", "cursor"])
@pytest.mark.parametrize("answer", ['{"permissionDecision":"allow"}', '{"decision":"allow"}',
                                    "", '{"permission":"allow"'])
def test_a_hookgate_answer_an_agent_would_read_as_allow_is_blocked(
        kind: str, answer: str, attempt: Tally) -> None:
    from starlette.responses import Response
    with failing_hookgate("malformed", ROUTES[kind],
                          Response(answer, media_type="application/json")) as base:
        done = _run(_commands(base)[kind], json.dumps(PUSH_BY_AGENT[kind]))
    attempt.record(f"{kind} forged allow {answer!r}", got_through=_agent_allows(kind, done))
    assert not _agent_allows(kind, done), (done.returncode, done.stdout, done.stderr)


@pytest.mark.parametrize("shell", ["sh", "bash"])
def test_a_token_env_name_the_shell_cannot_expand_is_refused_at_install(
        tmp_path: Path, shell: str, attempt: Tally) -> None:
    if shutil.which(shell) is None:
        pytest.skip(f"no {shell}")
    name = "TOKÉN"
    try:
        cmd = _commands("http://127.0.0.1:9", token_env=name)["gemini"]
    except ValueError:
        refused = True
    else:
        done = _run(cmd, json.dumps(PUSH_BY_AGENT["gemini"]), shell=shell, env_name="X")
        refused = not _agent_allows("gemini", done)
    attempt.record(f"non-ASCII --token-env under {shell}", got_through=not refused)
    assert refused
    done = CliRunner().invoke(app, ["gemini", "install", "--agent", "coder", "--url",
                                    "http://127.0.0.1:9", "--token-env", name,
                                    "--project", str(tmp_path)])
    assert done.exit_code != 0 and not (tmp_path / ".gemini" / "settings.json").exists()


@pytest.mark.parametrize("kind", ["codex", "gemini", "cursor"])
def test_an_install_url_with_shell_syntax_runs_nothing_but_curl(
        tmp_path: Path, kind: str, attempt: Tally) -> None:
    planted = tmp_path / "pwned"
    url = f"http://a;touch {planted};'$(touch {planted})'`touch {planted}`"
    cmd = _commands(url)[kind]
    done = _run(cmd, json.dumps(PUSH_BY_AGENT[kind]))
    attempt.record(f"{kind} shell syntax in --url",
                   got_through=planted.exists() or _agent_allows(kind, done))
    assert not planted.exists()
    assert not _agent_allows(kind, done), (done.returncode, done.stdout, done.stderr)
    assert command("http://127.0.0.1:9/x?a='b", token_env="T", wait_s=1,
                   accept=Accept.EMPTY).count("'\"'\"'") >= 1


# -- one approval, one execution --------------------------------------------------------------

@pytest.mark.parametrize(("kind", "first", "retry"), [
    ("codex", codex("Bash", {"command": "git push origin main"}, call_id="c1"),
     codex("Bash", {"command": "git push origin main"}, call_id="c2")),
    ("gemini", gemini("run_shell_command", {"command": "git push origin main"},
                      stamp="2026-12-06T07:00:00.000Z"),
     gemini("run_shell_command", {"command": "git push origin main"},
            stamp="2026-12-06T07:00:05.000Z")),
    ("cursor", cursor("Shell", {"command": "git push origin main"}, call_id="c1"),
     cursor("Shell", {"command": "git push origin main"}, call_id="c2")),
])
def test_one_approval_lets_the_call_run_once_whatever_the_model_repeats(
        srv: Served, kind: str, first: dict[str, Any], retry: dict[str, Any],
        attempt: Tally) -> None:
    approve(srv, _pending(srv, kind, first))
    ran = send(srv, kind, retry)
    assert allowed(kind, ran), ran.text  # the identical retry after approval runs
    # The model repeats the call: the very same id (two calls given one id in one turn),
    # the first call's id, and a fresh id.
    again = [retry, first, {**retry, "tool_use_id": "c3", "timestamp": "2026-12-06T07:00:09Z"}]
    for n, body in enumerate(again):
        r = send(srv, kind, body)
        attempt.record(f"{kind} approved call repeated #{n}", got_through=allowed(kind, r))
        assert not allowed(kind, r), (n, r.text)


# -- access that ends while a call waits --------------------------------------------------------

@pytest.fixture
def waiting_srv(database_url: str) -> Iterator[LiveServer]:
    deployment = coder(wait_s=30, rules=RULES)
    deployment.database_url = database_url
    # Rechecks far apart: the answer itself must be the moment access is checked.
    with live_server(deployment, access_recheck_s=60) as server:
        yield server


@pytest.mark.parametrize("kind", ["codex", "gemini", "cursor"])
def test_a_token_revoked_while_its_call_waits_gets_no_allow(
        waiting_srv: LiveServer, kind: str, attempt: Tally) -> None:
    import threading
    import time

    from hookgate.runtime.auth import token_cache
    from hookgate.runtime.token_cache import token_key
    from hookgate.storage.users import revoke_token

    srv = waiting_srv
    box: dict[str, httpx.Response] = {}
    own = Served(srv, "")  # a server of its own: the revocation ends alice's every call
    waiting = threading.Thread(target=lambda: box.update(r=send(own, kind,
                                                                 PUSH_BY_AGENT[kind])))
    waiting.start()
    deadline = time.monotonic() + 30
    while not requests(srv) and time.monotonic() < deadline:
        time.sleep(0.05)
    [request] = requests(srv)
    srv.call(revoke_token(srv.runtime.db, "alice", by="cli"))
    # As by the CLI in another process: this server learns of it when its token cache's
    # answer ages out (TTL_S), long before its next periodic recheck.
    cache = token_cache(srv.runtime)
    while cache.fresh(token_key(TOKEN)) is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    # A person approves after the revocation: the revoked caller's call must not run.
    srv.call(srv.runtime.approvals.decide(request["id"], "approve", ALICE))
    waiting.join(60)
    r = box["r"]
    attempt.record(f"{kind} token revoked while waiting", got_through=allowed(kind, r))
    assert not allowed(kind, r), r.text


@pytest.mark.parametrize(("kind", "shape", "event"), [
    ("codex", codex, "PostToolUse"), ("cursor", cursor, "postToolUse"),
])
def test_a_report_of_another_tool_under_the_call_id_does_not_skip_the_shells_hooks(
        srv: Served, kind: str, shape: Any, event: str, attempt: Tally) -> None:
    # CARD_GUARD withholds a Bash output that shows a card number; a harmless tool's report
    # with the same id, arguments and output must not stand for the shell's.
    args, output = {"command": "cat card.txt"}, "4111 1111 1111 1111"
    key = "tool_response" if kind == "codex" else "tool_output"
    decoy = shape("mcp__notes__read", args, call_id="dup", event=event, **{key: output})
    shell = shape("Bash" if kind == "codex" else "Shell", args, call_id="dup", event=event,
                  **{key: output})
    assert send(srv, kind, decoy).status_code == 200
    r = send(srv, kind, shell)
    shown = r.status_code == 200 and "withheld" not in r.text
    attempt.record(f"{kind} decoy report under the shell call's id", got_through=shown)
    assert not shown, r.text


def test_another_orgs_admin_cannot_approve_a_coding_agents_call(
        srv: Served, attempt: Tally) -> None:
    request_id = _pending(srv, "codex", codex("Bash", {"command": "git push origin main"}))
    r = httpx.post(f"{srv.url}/api/confirmations/{request_id}/respond",
                   json={"decision": "approve"}, headers={"Authorization": f"Bearer {MALLORY}"})
    ran = send(srv, "codex", codex("Bash", {"command": "git push origin main"},
                                   call_id="call_2"))
    attempt.record("another org's admin approves", got_through=allowed("codex", ran))
    assert r.status_code == 404 and not allowed("codex", ran), (r.text, ran.text)


def test_a_retry_from_another_session_or_folder_takes_no_approval(
        srv: Served, attempt: Tally) -> None:
    args = {"command": "git push origin main"}
    approve(srv, _pending(srv, "codex", codex("Bash", args, call_id="c1", session="s-1")))
    for n, body in enumerate([codex("Bash", args, call_id="c2", session="s-2"),
                              {**codex("Bash", args, call_id="c3"), "cwd": "/work/other"},
                              codex("Bash", args, call_id="c4", session="s-1 ")]):
        r = send(srv, "codex", body)
        attempt.record(f"codex retry elsewhere #{n}", got_through=allowed("codex", r))
        assert not allowed("codex", r), (n, r.text)


@pytest.mark.parametrize("kind", ["codex", "gemini", "cursor"])
@pytest.mark.parametrize("status", [204, 302, 401])
def test_an_answer_that_is_not_a_200_is_a_deny_whatever_its_body(
        kind: str, status: int, attempt: Tally) -> None:
    from starlette.responses import Response
    body = '{"permission":"allow"}' if kind == "cursor" else "{}"
    answer = Response(body if status != 204 else None, status_code=status,
                      headers={"Location": "http://127.0.0.1:9/allow"})
    with failing_hookgate("malformed", ROUTES[kind], answer) as base:
        done = _run(_commands(base)[kind], json.dumps(PUSH_BY_AGENT[kind]))
    attempt.record(f"{kind} HTTP {status} answer", got_through=_agent_allows(kind, done))
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)


@pytest.mark.parametrize("agent_kind", ["gemini", "cursor"])
@pytest.mark.parametrize("wait", ["inf", "nan", "-100", "1e12"])
def test_a_wait_no_hook_timeout_can_hold_is_refused_at_install(
        tmp_path: Path, agent_kind: str, wait: str, attempt: Tally) -> None:
    # Gemini CLI and Cursor time hooks with Node, whose timers fire at once past 2**31-1 ms:
    # a huge (or negative) timeout times out at once, and the tool runs.
    done = CliRunner().invoke(app, [agent_kind, "install", "--agent", "coder", "--url",
                                    "http://127.0.0.1:9", f"--wait={wait}",
                                    "--project", str(tmp_path)])
    written = [p for p in tmp_path.rglob("*.json")]
    attempt.record(f"{agent_kind} install --wait {wait}", got_through=bool(written))
    assert done.exit_code == 2 and not written, done.output
    assert "--wait" in done.output and "Traceback" not in done.output
    with pytest.raises(ValueError):
        command("http://127.0.0.1:9", token_env="T", wait_s=float(wait), accept=Accept.EMPTY)
