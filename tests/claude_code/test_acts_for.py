"""People decide, machines do not, on Claude Code's endpoint: a coding agent's service
identity posts its hook calls with ``Hookgate-Acts-For`` naming the developer its calls act
for; the developer is the calls' initiator (whom approver scope ``initiator`` lets decide),
the service never decides, a header naming someone it may not act for is a denial with the
reason (never an error status Claude Code would read as "go on"), and a service acting for
nobody has no initiator. Over real HTTP, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import update
from typer.testing import CliRunner

from hookgate.cli.main import app
from hookgate.runtime.deployment import OrgSpec, UserSpec, token_digest
from hookgate.storage.tables import User
from tests.claude_code.scene import TOKEN, coder
from tests.claude_code.test_hook_endpoint import PUSH, decision, pending, pre
from tests.conftest import BACKENDS, migrated_database_url
from tests.live_server import LiveServer, live_server

pytestmark = pytest.mark.both_databases

BOT = "tok-coder-bot"
TOKENS = {"alice": TOKEN, "bob": "tok-bob", "coder-bot": BOT, "carol": "tok-carol",
          "other-bot": "tok-other-bot", "mallory": "tok-mallory"}
SERVICE_SAID = "service (agent) identity"


@contextmanager
def served(database_url: str) -> Iterator[LiveServer]:
    deployment = coder(wait_s=0.3)
    deployment.database_url = database_url
    agent = deployment.agents["coder"]
    agent.confirmation_mode = "inline_only"
    agent.approval_channel_id = None
    assert agent.confirmation_approver_scope == "initiator"
    deployment.orgs.append(OrgSpec("evil", "Evil"))
    deployment.users += [
        UserSpec("bob", "acme", token_sha256=token_digest(TOKENS["bob"])),
        UserSpec("carol", "acme", token_sha256=token_digest(TOKENS["carol"])),
        UserSpec("coder-bot", "acme", token_sha256=token_digest(BOT), service=True),
        UserSpec("other-bot", "acme", token_sha256=token_digest(TOKENS["other-bot"]),
                 service=True),
        UserSpec("mallory", "evil", token_sha256=token_digest(TOKENS["mallory"]))]
    with live_server(deployment) as server:
        server.call(_disable(server, "carol"))
        yield server


@pytest.fixture
def srv(database_url: str) -> Iterator[LiveServer]:
    with served(database_url) as server:
        yield server


@pytest.fixture(scope="module", params=BACKENDS)
def refusing(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
             ) -> Iterator[LiveServer]:
    """`srv`'s server, one per module and backend, for the test whose every call is refused
    and which asserts, after its calls, that nothing is pending: the server it meets next
    is as it found it."""
    with served(migrated_database_url(request, tmp_path_factory.mktemp("acts"))) as server:
        yield server


async def _disable(srv: LiveServer, user_id: str) -> None:
    async with srv.runtime.db.transaction() as s:
        await s.execute(update(User).where(User.id == user_id).values(disabled=True))


def hook(srv: LiveServer, body: dict[str, Any], *, user: str = "coder-bot",
         acts_for: str | None = "alice") -> httpx.Response:
    headers = {"Authorization": f"Bearer {TOKENS[user]}"}
    if acts_for is not None:
        headers["Hookgate-Acts-For"] = acts_for
    return httpx.post(f"{srv.url}/api/claude-code/hooks", params={"agent": "coder"},
                      headers=headers, json=body, timeout=30)


def respond(srv: LiveServer, request_id: str, user: str, decided: str = "approve"
            ) -> httpx.Response:
    return httpx.post(f"{srv.url}/api/confirmations/{request_id}/respond",
                      json={"decision": decided}, timeout=30,
                      headers={"Authorization": f"Bearer {TOKENS[user]}"})


def test_the_developer_the_service_acts_for_decides_and_the_service_never_does(srv):
    first, _ = decision(hook(srv, pre("Bash", PUSH, "toolu_a")))
    assert first == "deny"
    [request] = pending(srv)
    assert request["requested_by"] == "alice", request
    for decided in ("approve", "reject"):
        r = respond(srv, request["id"], "coder-bot", decided)
        assert r.status_code == 403 and SERVICE_SAID in r.text, r.text
    r = respond(srv, request["id"], "bob")
    assert r.status_code == 403 and "('alice')" in r.text, r.text
    assert respond(srv, request["id"], "alice").status_code == 200
    ok, why = decision(hook(srv, pre("Bash", PUSH, "toolu_b")))
    assert ok == "allow" and "alice" in why
    done = dict(pre("Bash", PUSH, "toolu_b"), hook_event_name="PostToolUse",
                tool_response={"stdout": "", "stderr": "", "interrupted": False},
                duration_ms=4)
    assert hook(srv, done).status_code == 200
    rows = httpx.get(f"{srv.url}/api/audit", params={"outcome": "ok"},
                     headers={"Authorization": f"Bearer {TOKEN}"}).json()["items"]
    assert [(r["user_id"], r["acting_service"], r["approver"]) for r in rows] == [
        ("alice", "coder-bot", "alice")], rows


def test_the_developers_own_approval_is_not_the_services_and_the_reverse(srv):
    # Calls the service makes for alice live in the service's session: alice's own Claude
    # Code (her token, the same session id) has its own calls and approvals.
    decision(hook(srv, pre("Bash", PUSH, "toolu_c")))
    [request] = pending(srv)
    assert respond(srv, request["id"], "alice").status_code == 200
    mine, _ = decision(hook(srv, pre("Bash", PUSH, "toolu_d"), user="alice", acts_for=None))
    assert mine == "deny"


def test_an_approval_for_alices_call_is_never_used_for_a_call_acting_for_bob(srv):
    # Claude Code may re-send an identical call under a new tool_use_id after it gave up
    # waiting (the documented retry): acting for another person, it is another initiator's
    # call, in a run of its own, and asks that person.
    decision(hook(srv, pre("Bash", PUSH, "toolu_r1")))
    [request] = pending(srv)
    assert respond(srv, request["id"], "alice").status_code == 200
    answer, _ = decision(hook(srv, pre("Bash", PUSH, "toolu_r2"), acts_for="bob"))
    assert answer == "deny"
    [for_bob] = pending(srv)
    assert for_bob["requested_by"] == "bob" and for_bob["id"] != request["id"]
    # alice's approval still lets the identical retry acting for her run, once.
    assert decision(hook(srv, pre("Bash", PUSH, "toolu_r3")))[0] == "allow"


@pytest.mark.parametrize(("user", "acts_for", "said"), [
    ("coder-bot", "mallory", "acts_for 'mallory' is not a user of org 'acme'"),
    ("coder-bot", "carol", "acts_for 'carol' is disabled"),
    ("coder-bot", "other-bot", "acts_for 'other-bot' is a service identity"),
    ("coder-bot", "ghost", "acts_for 'ghost' is not a user of org 'acme'"),
    ("alice", "bob", "only a service identity (kind: service) acts for someone else"),
])
def test_a_header_naming_someone_the_caller_may_not_act_for_is_refused_with_the_reason(
        refusing: LiveServer, user: str, acts_for: str, said: str) -> None:
    srv = refusing
    # A deciding event is a denial (an error status is "go on" to Claude Code) ...
    answer, why = decision(hook(srv, pre("Bash", PUSH, "toolu_x"), user=user,
                                acts_for=acts_for))
    assert answer == "deny" and said in why, why
    asked = dict(pre("Bash", PUSH, "toolu_x"), hook_event_name="PermissionRequest")
    r = hook(srv, asked, user=user, acts_for=acts_for)
    behavior = r.json()["hookSpecificOutput"]["decision"]
    assert behavior["behavior"] == "deny" and said in behavior["message"], r.text
    # ... the others a 403 with the reason; nobody was asked anything.
    done = dict(pre("Bash", PUSH, "toolu_x"), hook_event_name="PostToolUse",
                tool_response={"stdout": ""}, duration_ms=1)
    r = hook(srv, done, user=user, acts_for=acts_for)
    assert r.status_code == 403 and said in r.text, r.text
    assert pending(srv) == []


def test_a_service_acting_for_nobody_has_no_initiator_so_no_member_decides(srv):
    answer, _ = decision(hook(srv, pre("Bash", PUSH, "toolu_n"), acts_for=None))
    assert answer == "deny"
    [request] = pending(srv)
    assert request["requested_by"] is None, request
    for user in ("coder-bot", "alice", "bob"):
        r = respond(srv, request["id"], user)
        assert r.status_code == 403, (user, r.text)


def test_install_writes_the_acts_for_header_literal_or_from_the_environment(
        tmp_path: Path) -> None:
    for given, header, env in (("alice", "alice", None),
                               ("$DEV_USER", "$DEV_USER", "DEV_USER")):
        done = CliRunner().invoke(app, ["claude-code", "install", "--agent", "coder",
                                        "--print", "--acts-for", given,
                                        "--project", str(tmp_path)])
        assert done.exit_code == 0, done.output
        hooks = json.loads(done.output)["hooks"]
        handler = hooks["PreToolUse"][0]["hooks"][0]
        assert handler["headers"]["Hookgate-Acts-For"] == header
        assert (env in handler["allowedEnvVars"]) if env else \
            handler["allowedEnvVars"] == ["HOOKGATE_TOKEN", "CLAUDE_CODE_ENTRYPOINT"]
        forward = hooks["SessionStart"][0]["hooks"][0]["command"]
        assert shlex.split(forward)[-2:] == ["--acts-for", given], forward
    bad = CliRunner().invoke(app, ["claude-code", "install", "--agent", "coder", "--print",
                                   "--acts-for", "$1x"])
    assert bad.exit_code != 0 and "environment variable name" in bad.output


def test_forward_sends_the_acts_for_header(srv: LiveServer) -> None:
    url = f"{srv.url}/api/claude-code/hooks?agent=coder"
    start = json.dumps({"hook_event_name": "SessionStart", "session_id": "s-fw",
                        "source": "startup", "cwd": "/work/project"})
    env = {"HOOKGATE_TOKEN": BOT, "WHO": "alice"}
    ok = CliRunner().invoke(app, ["claude-code", "forward", url, "--acts-for", "$WHO"],
                            input=start, env=env)
    assert ok.exit_code == 0, ok.output
    refused = CliRunner().invoke(app, ["claude-code", "forward", url, "--acts-for", "mallory"],
                                 input=start, env=env)
    assert refused.exit_code == 1 and "not a user of org 'acme'" in refused.output, \
        refused.output
