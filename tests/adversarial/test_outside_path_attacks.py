"""An independent attacker's other variants of the outside-path classes (issue 39) against the
guarded-call API, over HTTP on a real server, SQLite and PostgreSQL: ids that look alike
after normalisation or sit at the length limit, one call id re-used across agents, JSON the
gate and the tool could read apart (duplicate keys, out-of-range numbers, integers past
2**53), approvers' edits that add keys, reports that come first, from another member or
another org, and ``acts_for`` naming someone it may not. Each attempt records whether it got
a gated call through, a call run twice, or a cross-org read or decision."""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from hookgate import Agent, ScriptedLLM, tool
from hookgate.runtime.deployment import Deployment, OrgSpec, UserSpec, token_digest
from tests.adversarial.conftest import Tally
from tests.conftest import migrated_database_url
from tests.live_server import LiveServer, live_server

TOKENS = {name: f"tok-{name}" for name in ("alice", "bob", "bot", "eve")}
GATED = 60_000


@tool(requires_confirmation=lambda a: a["amount"] > 50_000, connector="purchasing",
      writes=True)
def oa__purchase_pay(amount: float, vendor: str) -> str:
    """Pay a vendor."""
    return f"paid {amount} to {vendor}"


def _agent(agent_id: str, scope: str) -> Agent:
    return Agent(
        id=agent_id, name=agent_id, instructions="", tools=[oa__purchase_pay], org_id="acme",
        owner_user_id="alice", confirmation_approver_scope=scope,
        model_config_json={
            "hooks": {"class_hooks": ["audit_log"]},
            "guarded_calls": {"rules": [
                {"matcher": "transfer", "requires_confirmation": True},
                {"matcher": "big_count", "when": "args.n > 9007199254740990",
                 "requires_confirmation": True}]},
        })


def deployment(url: str) -> Deployment:
    return Deployment(
        database_url=url, orgs=[OrgSpec("acme", "ACME"), OrgSpec("other", "Other")],
        users=[UserSpec("alice", "acme", admin=True, token_sha256=token_digest(TOKENS["alice"])),
               UserSpec("bob", "acme", token_sha256=token_digest(TOKENS["bob"])),
               UserSpec("bot", "acme", token_sha256=token_digest(TOKENS["bot"]),
                        service=True),
               UserSpec("eve", "other", admin=True, token_sha256=token_digest(TOKENS["eve"]))],
        agents={"buyer": _agent("buyer", "agent_owner"),
                "clerk": _agent("clerk", "agent_owner"),
                "helper": _agent("helper", "initiator")},
        model_for=lambda _a: ScriptedLLM([{"answer": "-"}]), channels=[])


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[LiveServer]:
    url = migrated_database_url(request, tmp_path_factory.mktemp("outside"))
    with live_server(deployment(url)) as srv:
        yield srv


_n = iter(range(10**6))


def h(user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[user]}"}


def fresh(prefix: str) -> str:
    return f"{prefix}-{next(_n)}"


def ask(srv: LiveServer, *, session: str, call_id: str, arguments: Any,
        tool_name: str = "oa__purchase_pay", agent: str = "buyer", user: str = "bot",
        **extra: Any) -> httpx.Response:
    return httpx.post(f"{srv.url}/api/v1/calls", headers=h(user), timeout=30, json={
        "agent": agent, "session_id": session, "call_id": call_id, "tool": tool_name,
        "arguments": arguments, **extra})


def raw_ask(srv: LiveServer, body: str, user: str = "bot") -> httpx.Response:
    return httpx.post(f"{srv.url}/api/v1/calls", content=body.encode(), timeout=30,
                      headers={**h(user), "Content-Type": "application/json"})


def respond(srv: LiveServer, request_id: str, user: str = "alice", **body: Any
            ) -> httpx.Response:
    return httpx.post(f"{srv.url}/api/confirmations/{request_id}/respond", timeout=30,
                      json={"decision": "approve", **body}, headers=h(user))


def state(srv: LiveServer, call: str, user: str = "bot", **params: Any) -> httpx.Response:
    return httpx.get(f"{srv.url}/api/v1/calls/{call}", params=params, headers=h(user),
                     timeout=30)


def report(srv: LiveServer, call: str, user: str = "bot", **body: Any) -> httpx.Response:
    return httpx.post(f"{srv.url}/api/v1/calls/{call}/result", json=body or {"output": "ok"},
                      headers=h(user), timeout=30)


def approved_call(srv: LiveServer, session: str, call_id: str, agent: str = "buyer"
                  ) -> dict[str, Any]:
    """A gated call of ``session`` a person approved (not yet asked again)."""
    asked = ask(srv, session=session, call_id=call_id, agent=agent,
                arguments={"amount": GATED, "vendor": "v"})
    assert asked.status_code == 200 and asked.json()["decision"] == "pending", asked.text
    assert respond(srv, asked.json()["request_id"]).status_code == 200
    return dict(asked.json())


# -- which call an approval covers ------------------------------------------------------------


@pytest.mark.parametrize("form", ["NFD", "NFKC-fullwidth", "trailing-space", "case"])
def test_a_call_id_that_normalises_to_an_approved_one_gets_no_approval(
        server: LiveServer, attempt: Tally, form: str) -> None:
    session = fresh("s-norm")
    approved_id = f"caf\u00e9-{next(_n)}"  # NFC
    approved_call(server, session, approved_id)
    other = {"NFD": unicodedata.normalize("NFD", approved_id),
             "NFKC-fullwidth": approved_id.replace("c", "\uff43", 1),
             "trailing-space": approved_id + " ",
             "case": approved_id.upper()}[form]
    assert other != approved_id
    r = ask(server, session=session, call_id=other, arguments={"amount": GATED, "vendor": "v"})
    attempt.record(f"api: call id look-alike ({form}) takes an approved call's approval",
                   r.status_code == 200 and r.json()["decision"] == "allow")
    assert r.status_code == 200, r.text
    assert r.json()["decision"] == "pending", r.json()


def test_a_call_id_past_the_limit_is_refused_not_cut_to_an_approved_one(
        server: LiveServer, attempt: Tally) -> None:
    session = fresh("s-long")
    approved_id = (fresh("c") + "x" * 100)[:100]
    approved_call(server, session, approved_id)
    r = ask(server, session=session, call_id=approved_id + "y",
            arguments={"amount": GATED, "vendor": "v"})
    attempt.record("api: a call id one past the limit is cut to an approved one",
                   r.status_code == 200 and r.json().get("decision") == "allow")
    assert r.status_code in (400, 422) and "call_id" in r.text, r.text
    # The approved one itself, at the limit, runs once.
    mine = ask(server, session=session, call_id=approved_id,
               arguments={"amount": GATED, "vendor": "v"})
    assert mine.json()["decision"] == "allow", mine.json()


def test_one_call_id_in_one_session_is_another_call_for_another_agent(
        server: LiveServer, attempt: Tally) -> None:
    session, call_id = fresh("s-agents"), fresh("c")
    approved_call(server, session, call_id, agent="buyer")
    r = ask(server, session=session, call_id=call_id, agent="clerk",
            arguments={"amount": GATED, "vendor": "v"})
    attempt.record("api: another agent's call under an approved call id and session",
                   r.json().get("decision") == "allow")
    assert r.json()["decision"] == "pending", r.json()


def test_another_member_under_the_same_ids_gets_no_approval_and_no_call(
        server: LiveServer, attempt: Tally) -> None:
    session, call_id = fresh("s-members"), fresh("c")
    asked = approved_call(server, session, call_id)
    r = ask(server, session=session, call_id=call_id, user="bob",
            arguments={"amount": GATED, "vendor": "v"})
    attempt.record("api: another member re-uses an approved session and call id",
                   r.json().get("decision") == "allow")
    assert r.json()["decision"] == "pending", r.json()
    # Nor may they wait on, peek at or report the approved call by its hookgate id.
    for answer in (state(server, asked["call"], user="bob"),
                   state(server, asked["call"], user="bob", peek="true"),
                   report(server, asked["call"], user="bob")):
        attempt.record("api: another member reads or reports an approved call",
                       answer.status_code == 200)
        assert answer.status_code == 404, answer.text


# -- JSON the gate and the tool could read apart ------------------------------------------------


@pytest.mark.parametrize("order", ["gated-last", "gated-first"])
def test_duplicate_keys_never_let_the_gate_see_another_value_than_the_tool(
        server: LiveServer, attempt: Tally, order: str) -> None:
    values = (1, GATED) if order == "gated-last" else (GATED, 1)
    head = json.dumps({"agent": "buyer", "session_id": "s-dup", "call_id": fresh("c"),
                       "tool": "oa__purchase_pay"})[:-1]
    body = f'{head}, "arguments": {{"amount": {values[0]}, "vendor": "v", ' \
           f'"amount": {values[1]}}}}}'
    r = raw_ask(server, body)
    answer = r.json() if r.status_code == 200 else {}
    ran_with = (answer.get("arguments") or {}).get("amount")
    # The answer says what to run ("allow: run with `arguments`"): through when it allows a
    # payment the gate would have sent to a person, or the last reading is the gated one.
    attempt.record(f"api: duplicate argument keys ({order})",
                   answer.get("decision") == "allow" and (ran_with == GATED
                                                          or values[1] == GATED))
    assert r.status_code == 200, r.text
    if values[1] == GATED:
        assert answer["decision"] == "pending", answer
    else:
        assert answer["decision"] == "allow" and ran_with == 1.0, answer


@pytest.mark.parametrize("literal", ["1e309", "-1e309", "NaN", "Infinity", "-Infinity"])
def test_numbers_without_a_canonical_form_are_refused(
        server: LiveServer, attempt: Tally, literal: str) -> None:
    body = ('{{"agent":"buyer","session_id":"s-num","call_id":"{}","tool":"oa__purchase_pay",'
            '"arguments":{{"amount":{},"vendor":"v"}}}}'.format(fresh("c"), literal))
    r = raw_ask(server, body)
    attempt.record(f"api: amount {literal}",
                   r.status_code == 200 and r.json().get("decision") in ("allow", "pending"))
    assert r.status_code in (200, 400, 422), r.text
    if r.status_code == 200:
        assert r.json()["decision"] == "deny", r.json()


def test_integers_at_the_edge_of_2_53_are_decided_as_sent_or_refused(
        server: LiveServer, attempt: Tally) -> None:
    # A rule asks for a person when n > 2**53 - 2; read as floats, the integers from 2**53 on
    # round (2**53 + 1 reads as 2**53), so they are refused, never decided on a neighbour.
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}

    def big(n: int) -> httpx.Response:
        return raw_ask(server, json.dumps({
            "agent": "buyer", "session_id": "s-big", "call_id": fresh("c"),
            "tool": "big_count", "arguments": {"n": n}, "parameters": schema}))

    over = big(2**53 - 1)
    attempt.record("api: an integer just under 2**53 slips under a rule",
                   over.json().get("decision") == "allow")
    assert over.json()["decision"] == "pending", over.json()
    for n in (2**53, 2**53 + 1, -(2**53) - 1):
        r = big(n)
        attempt.record(f"api: the integer {n} decided on a rounded neighbour",
                       r.status_code == 200)
        assert r.status_code == 400 and "safe integer" in r.text, r.text
    under = big(2**53 - 2)
    assert under.json()["decision"] == "allow", under.json()
    assert under.json()["arguments"] == {"n": 2**53 - 2}


# -- approvers' edits --------------------------------------------------------------------------


@pytest.mark.parametrize(("tool_name", "parameters", "edit"), [
    ("oa__purchase_pay", None, {"amount": 10, "vendor": "v", "memo": "added"}),
    ("transfer", {"type": "object", "properties": {"to": {"type": "string"}},
                  "additionalProperties": False}, {"to": "x", "also": "y"}),
    ("transfer", None, {"to": "somebody-else"}),
])
def test_an_edit_that_adds_keys_or_edits_an_undeclared_call_is_refused(
        server: LiveServer, attempt: Tally, tool_name: str, parameters: Any,
        edit: dict[str, Any]) -> None:
    args = {"amount": GATED, "vendor": "v"} if tool_name == "oa__purchase_pay" else {"to": "x"}
    extra = {} if parameters is None else {"parameters": parameters}
    asked = ask(server, session=fresh("s-edit"), call_id=fresh("c"), tool_name=tool_name,
                arguments=args, **extra).json()
    assert asked["decision"] == "pending", asked
    r = respond(server, asked["request_id"], arguments=edit)
    attempt.record(f"api: an approver's edit {edit!r} of {tool_name}", r.status_code == 200)
    assert r.status_code in (400, 409, 422), r.text
    # Refused, the request is still pending: nothing was decided by the bad edit.
    assert state(server, asked["call"]).json()["decision"] == "pending"


# -- reports -----------------------------------------------------------------------------------


def test_a_report_first_or_of_a_denied_call_runs_no_post_tool_use(
        server: LiveServer, attempt: Tally) -> None:
    session = fresh("s-rep")
    asked = ask(server, session=session, call_id=fresh("c"),
                arguments={"amount": GATED, "vendor": "v"}).json()
    early = report(server, asked["call"])
    attempt.record("api: a report before the call was allowed", early.status_code == 200)
    assert early.status_code == 409 and "never allowed to start" in early.text, early.text
    assert respond(server, asked["request_id"], decision="reject").status_code == 200
    assert state(server, asked["call"]).json()["decision"] == "deny"
    late = report(server, asked["call"])
    attempt.record("api: a report of a rejected call", late.status_code == 200)
    assert late.status_code == 409, late.text
    # A made-up hookgate id of the right shape is nobody's call.
    made_up = report(server, "gc_" + "0" * 40)
    attempt.record("api: a report under a made-up hookgate id", made_up.status_code == 200)
    assert made_up.status_code == 404, made_up.text


# -- other orgs --------------------------------------------------------------------------------


def test_another_org_neither_reads_nor_decides_nor_reports(
        server: LiveServer, attempt: Tally) -> None:
    asked = ask(server, session=fresh("s-org"), call_id=fresh("c"),
                arguments={"amount": GATED, "vendor": "v"}).json()
    tries = {
        "wait": state(server, asked["call"], user="eve"),
        "peek": state(server, asked["call"], user="eve", peek="true"),
        "events": httpx.get(f"{server.url}/api/v1/calls/{asked['call']}/events",
                            headers=h("eve"), timeout=30),
        "report": report(server, asked["call"], user="eve"),
        "decide": respond(server, asked["request_id"], user="eve"),
        "read request": httpx.get(f"{server.url}/api/confirmations/{asked['request_id']}",
                                  headers=h("eve"), timeout=30),
        "ask as the agent": ask(server, session=fresh("s-org"), call_id=fresh("c"),
                                user="eve", arguments={"amount": 1, "vendor": "v"}),
        "decide and remember": respond(server, asked["request_id"], user="eve",
                                       remember={"scope": "org"}),
        "rule for the agent": httpx.post(
            f"{server.url}/api/approval-rules", headers=h("eve"), timeout=30,
            json={"agent_id": "buyer", "tool_name": "oa__purchase_pay", "scope": "org"}),
    }
    batch = httpx.post(f"{server.url}/api/confirmations/batch", headers=h("eve"), timeout=30,
                       json={"ids": [asked["request_id"]], "decision": "approve"})
    # A batch answers per request: nothing of another org is decided.
    decided = batch.status_code == 200 and batch.json()["decided"] != 0
    attempt.record("api: another org's admin (batch)", decided)
    assert batch.status_code == 200, batch.text
    assert [r["status_code"] for r in batch.json()["results"]] == [404], batch.text
    for what, r in tries.items():
        attempt.record(f"api: another org's admin ({what})", r.status_code < 400)
        assert r.status_code in (403, 404), (what, r.status_code, r.text)
    assert state(server, asked["call"]).json()["decision"] == "pending"


# -- acts_for ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("user", "acts_for", "why"), [
    ("bob", "alice", "is a person and acts for themself"),
    ("bot", "eve", "not a user of org 'acme'"),
    ("bot", "bot", "service identity"),
    ("bot", "nobody-at-all", "not a user of org 'acme'"),
])
def test_acts_for_naming_someone_it_may_not_is_refused(
        server: LiveServer, attempt: Tally, user: str, acts_for: str, why: str) -> None:
    for path, body in (
            ("calls", {"agent": "helper", "session_id": fresh("s-af"), "call_id": fresh("c"),
                       "tool": "transfer", "arguments": {"to": "x"}, "acts_for": acts_for}),
            ("sessions", {"agent": "helper", "session_id": fresh("s-af"),
                          "acts_for": acts_for})):
        r = httpx.post(f"{server.url}/api/v1/{path}", json=body, headers=h(user), timeout=30)
        attempt.record(f"api: {user} acts_for {acts_for} on /{path}", r.status_code == 200)
        assert r.status_code == 403 and why in r.text, (path, r.text)


def test_a_service_acting_for_a_person_makes_them_the_initiator_and_never_decides(
        server: LiveServer, attempt: Tally) -> None:
    asked = ask(server, session=fresh("s-init"), call_id=fresh("c"), agent="helper",
                tool_name="transfer", arguments={"to": "x"}, acts_for="bob")
    assert asked.status_code == 200 and asked.json()["decision"] == "pending", asked.text
    request_id = asked.json()["request_id"]
    record = httpx.get(f"{server.url}/api/confirmations/{request_id}", headers=h("alice"),
                       timeout=30).json()
    assert record["requested_by"] == "bob", record
    by_bot = respond(server, request_id, user="bot")
    attempt.record("api: a service approves the call it acts for a person in",
                   by_bot.status_code == 200)
    assert by_bot.status_code == 403, by_bot.text
    # The initiator decides (approver scope 'initiator'); the service then runs the call.
    assert respond(server, request_id, user="bob").status_code == 200
    after = state(server, asked.json()["call"], wait=5).json()
    assert after["decision"] == "allow", after
    assert report(server, asked.json()["call"]).status_code == 200


# -- Claude Code: Hookgate-Acts-For ------------------------------------------------------------

CC_SESSION = "7a1d3b9e-2222-4333-8444-a55566667777"
PUSH = {"command": "git push origin main > push.log"}


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def coding(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[LiveServer]:
    from tests.claude_code.scene import coder
    url = migrated_database_url(request, tmp_path_factory.mktemp("cc"))
    world = coder(wait_s=0.2)
    agent = world.agents["coder"]
    agent.confirmation_mode = "inline_only"
    agent.approval_channel_id = None
    agent.confirmation_approver_scope = "initiator"
    world = Deployment(
        database_url=url, orgs=[OrgSpec("acme", "ACME"), OrgSpec("other", "Other")],
        users=[UserSpec("alice", "acme", admin=True, token_sha256=token_digest(TOKENS["alice"])),
               UserSpec("bob", "acme", token_sha256=token_digest(TOKENS["bob"])),
               UserSpec("bot", "acme", token_sha256=token_digest(TOKENS["bot"]),
                        service=True),
               UserSpec("eve", "other", admin=True, token_sha256=token_digest(TOKENS["eve"]))],
        agents=world.agents, model_for=world.model_for, channels=[])
    with live_server(world) as srv:
        yield srv


def cc_hook(srv: LiveServer, body: dict[str, Any], user: str, acts_for: str | None
            ) -> httpx.Response:
    headers = {**h(user), "X-Claude-Code-Entrypoint": "sdk-cli"}
    if acts_for is not None:
        headers["Hookgate-Acts-For"] = acts_for
    return httpx.post(f"{srv.url}/api/claude-code/hooks", params={"agent": "coder"},
                      headers=headers, json=body, timeout=30)


def cc_pre(call_id: str, session: str = CC_SESSION) -> dict[str, Any]:
    return {"hook_event_name": "PreToolUse", "session_id": session, "cwd": "/work/project",
            "permission_mode": "default", "tool_name": "Bash", "tool_input": PUSH,
            "tool_use_id": call_id, "transcript_path": "/tmp/t.jsonl"}


@pytest.mark.parametrize(("user", "acts_for", "why"), [
    ("bob", "alice", "is a person and acts for themself"),
    ("bot", "eve", "not a user of org 'acme'"),
    ("bot", "bot", "service identity"),
])
def test_claude_code_acts_for_naming_someone_it_may_not_is_refused(
        coding: LiveServer, attempt: Tally, user: str, acts_for: str, why: str) -> None:
    r = cc_hook(coding, cc_pre(fresh("toolu")), user, acts_for)
    specific = r.json().get("hookSpecificOutput") or {} if r.status_code == 200 else {}
    attempt.record(f"claude code: {user} with Hookgate-Acts-For {acts_for}",
                   r.status_code == 200 and specific.get("permissionDecision") != "deny")
    assert r.status_code == 200 and specific.get("permissionDecision") == "deny", r.text
    assert why in specific["permissionDecisionReason"], specific


def test_claude_code_a_service_acting_for_a_person_makes_them_the_initiator(
        coding: LiveServer, attempt: Tally) -> None:
    session, call_id = f"7a1d3b9e-2222-4333-8444-{next(_n):012d}", fresh("toolu")
    r = cc_hook(coding, cc_pre(call_id, session), "bot", "bob")
    assert r.status_code == 200, r.text
    [request] = [c for c in httpx.get(f"{coding.url}/api/confirmations", headers=h("alice"),
                                      params={"status": "pending"}, timeout=30).json()
                 if c["tool_call_id"] == call_id]
    attempt.record("claude code: a service's call acts for the service, not the person named",
                   request["requested_by"] != "bob")
    assert request["requested_by"] == "bob", request
    by_bot = respond(coding, request["id"], user="bot")
    attempt.record("claude code: a service approves the call it acts for a person in",
                   by_bot.status_code == 200)
    assert by_bot.status_code == 403, by_bot.text
    assert respond(coding, request["id"], user="bob").status_code == 200


# -- a service moved to another org while its event stream is open -------------------------------


@pytest.mark.both_databases
def test_a_service_moved_to_another_org_mid_stream_learns_no_decision(
        database_url: str, attempt: Tally) -> None:
    import dataclasses
    import time

    from hookgate.storage.users import sync_declared_users
    from tests.server.test_stream_access import OpenStream

    world = deployment(database_url)
    with live_server(world, access_recheck_s=60) as srv:
        asked = ask(srv, session="s-move", call_id="c-move",
                    arguments={"amount": GATED, "vendor": "v"}).json()
        assert asked["decision"] == "pending", asked
        stream = OpenStream(f"{srv.url}/api/v1/calls/{asked['call']}/events", h("bot"))
        deadline = time.monotonic() + 20
        while "pending" not in stream.text and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "event: pending" in stream.text, stream.text
        # The file moves the service to org Other (its token is fresh in the token cache).
        assert state(srv, asked["call"]).status_code == 200
        users = [dataclasses.replace(u, org="other") if u.id == "bot" else u
                 for u in world.users]
        srv.call(sync_declared_users(srv.runtime.db, users))
        assert respond(srv, asked["request_id"], arguments={"amount": 41_234, "vendor": "v"}
                       ).status_code == 200
        assert stream.ended.wait(30), "the stream did not end"
        learned = "decided" in stream.text or "41234" in stream.text
        attempt.record("api: a service moved to another org reads the decision on its stream",
                       learned)
        assert not learned, stream.text
        stream.close()
        # Nor by asking again or long-polling, in either org's name.
        after = state(srv, asked["call"], wait=1)
        attempt.record("api: a moved service long-polls the old org's call",
                       after.status_code == 200 and after.json()["decision"] == "allow")
        assert after.status_code == 404, after.text


# -- Claude Code: the identical retry from another working directory ---------------------------

RM = {"command": "rm -rf build > rm.log"}


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def claude_code(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
                ) -> Iterator[LiveServer]:
    """The scenes' Claude Code backend ``coder``, answering inline only: one server per
    backend for the tests below. Each test names a session of its own (`cc_session`) and
    looks only at the requests made since it began (`pending_since`), so what another test
    asked or approved is in none of its sessions and none of its lists."""
    from tests.claude_code.scene import coder
    world = coder(wait_s=0.3)
    world.database_url = migrated_database_url(request, tmp_path_factory.mktemp("cc-own"))
    world.agents["coder"].confirmation_mode = "inline_only"
    world.agents["coder"].approval_channel_id = None
    with live_server(world) as srv:
        yield srv


def cc_session() -> str:
    """A Claude Code session id (a UUID's shape) that no other test names."""
    return f"7a1d3b9e-2222-4333-8444-{next(_n):012d}"


def request_ids(srv: LiveServer, headers: dict[str, str]) -> set[str]:
    """The ids of every request on ``srv`` so far."""
    return {c["id"] for c in httpx.get(f"{srv.url}/api/confirmations", headers=headers,
                                       params={"status": "all", "limit": 500},
                                       timeout=30).json()}


def pending_since(srv: LiveServer, before: set[str], headers: dict[str, str]
                  ) -> list[dict[str, Any]]:
    """The pending requests on ``srv`` that are not among ``before``."""
    return [c for c in httpx.get(f"{srv.url}/api/confirmations", params={"status": "pending"},
                                 headers=headers, timeout=30).json() if c["id"] not in before]


def test_claude_code_an_identical_retry_in_another_directory_gets_no_approval(
        claude_code: LiveServer, attempt: Tally) -> None:
    from tests.claude_code.scene import TOKEN
    srv, session = claude_code, cc_session()
    alice = {"Authorization": f"Bearer {TOKEN}"}
    before = request_ids(srv, alice)

    def pre_in(cwd: str, call_id: str) -> dict[str, Any]:
        return {"hook_event_name": "PreToolUse", "session_id": session, "cwd": cwd,
                "permission_mode": "default", "tool_name": "Bash", "tool_input": RM,
                "tool_use_id": call_id, "transcript_path": "/tmp/t.jsonl"}

    def send(body: dict[str, Any]) -> str | None:
        r = httpx.post(f"{srv.url}/api/claude-code/hooks", params={"agent": "coder"},
                       headers=alice, json=body, timeout=30)
        assert r.status_code == 200, r.text
        return (r.json().get("hookSpecificOutput") or {}).get("permissionDecision")

    # Asked in a scratch directory: the wait runs out, the call is told to retry.
    assert send(pre_in("/work/project/scratch", "toolu_rm1")) == "deny"
    [request] = pending_since(srv, before, alice)
    assert httpx.post(f"{srv.url}/api/confirmations/{request['id']}/respond",
                      json={"decision": "approve"}, headers=alice,
                      timeout=30).status_code == 200
    # The "identical" retry comes from the project's root: `rm -rf build` there is
    # another call than the one approved.
    moved = send(pre_in("/work/project", "toolu_rm2"))
    attempt.record("claude code: the identical retry from another cwd joins the approval",
                   moved == "allow")
    assert moved == "deny", moved
    # From the directory it was approved in, the retry runs (once).
    assert send(pre_in("/work/project/scratch", "toolu_rm3")) == "allow"


def test_claude_code_the_same_call_resumed_from_another_directory_is_refused(
        claude_code: LiveServer, attempt: Tally) -> None:
    from tests.claude_code.scene import TOKEN
    srv, session = claude_code, cc_session()
    alice = {"Authorization": f"Bearer {TOKEN}", "X-Claude-Code-Entrypoint": "sdk-cli"}
    before = request_ids(srv, alice)

    def pre_in(cwd: str) -> dict[str, Any]:
        return {"hook_event_name": "PreToolUse", "session_id": session, "cwd": cwd,
                "permission_mode": "default", "tool_name": "Bash", "tool_input": RM,
                "tool_use_id": "toolu_resumed", "transcript_path": "/tmp/t.jsonl"}

    def send(body: dict[str, Any]) -> dict[str, Any]:
        r = httpx.post(f"{srv.url}/api/claude-code/hooks", params={"agent": "coder"},
                       headers=alice, json=body, timeout=30)
        assert r.status_code == 200, r.text
        return dict(r.json().get("hookSpecificOutput") or {})

    # Headless: deferred while a person decides; `claude -p --resume` asks the same call.
    assert send(pre_in("/work/project/scratch"))["permissionDecision"] == "defer"
    [request] = pending_since(srv, before, alice)
    assert httpx.post(f"{srv.url}/api/confirmations/{request['id']}/respond",
                      json={"decision": "approve"}, headers=alice,
                      timeout=30).status_code == 200
    # Resumed from the project's root, the same tool_use_id runs `rm -rf build` there.
    moved = send(pre_in("/work/project"))
    attempt.record("claude code: the approved call resumed from another cwd runs",
                   moved.get("permissionDecision") == "allow")
    assert moved["permissionDecision"] == "deny", moved
    assert "/work/project/scratch" in moved["permissionDecisionReason"], moved
    # Resumed where it was asked, it runs (once).
    assert send(pre_in("/work/project/scratch"))["permissionDecision"] == "allow"


def test_claude_code_a_permission_request_elsewhere_is_its_own_call(
        claude_code: LiveServer, attempt: Tally) -> None:
    from tests.claude_code.scene import TOKEN
    srv, session = claude_code, cc_session()
    alice = {"Authorization": f"Bearer {TOKEN}"}
    before = request_ids(srv, alice)

    def permission(cwd: str) -> dict[str, Any]:
        r = httpx.post(f"{srv.url}/api/claude-code/hooks", params={"agent": "coder"},
                       headers=alice, timeout=30, json={
                           "hook_event_name": "PermissionRequest", "session_id": session,
                           "cwd": cwd, "permission_mode": "default", "tool_name": "Bash",
                           "tool_input": RM, "transcript_path": "/tmp/t.jsonl"})
        assert r.status_code == 200, r.text
        return dict(r.json().get("hookSpecificOutput") or {})

    def pending() -> list[dict[str, Any]]:
        return pending_since(srv, before, alice)

    permission("/work/project/scratch")
    [first] = pending()
    assert httpx.post(f"{srv.url}/api/confirmations/{first['id']}/respond",
                      json={"decision": "approve"}, headers=alice,
                      timeout=30).status_code == 200
    # The same command from another directory is asked about on its own.
    elsewhere = permission("/work/project")
    attempt.record("claude code: a permission approved in one cwd allows it in another",
                   (elsewhere.get("decision") or {}).get("behavior") == "allow")
    assert (elsewhere.get("decision") or {}).get("behavior") != "allow", elsewhere
    [second] = pending()
    assert second["id"] != first["id"]
    assert (permission("/work/project/scratch").get("decision") or {}).get(
        "behavior") == "allow"


@pytest.mark.both_databases
@pytest.mark.parametrize("how", ["disabled", "moved"])
def test_a_call_acting_for_a_person_who_left_does_not_run(
        database_url: str, attempt: Tally, how: str) -> None:
    import dataclasses

    from hookgate.storage.users import sync_declared_users

    world = deployment(database_url)
    with live_server(world) as srv:
        asked = ask(srv, session="s-left", call_id="c-left", agent="buyer",
                    arguments={"amount": GATED, "vendor": "v"}, acts_for="bob").json()
        assert asked["decision"] == "pending", asked
        # The person acted for cannot read the service's call with their own token.
        assert state(srv, asked["call"], user="bob").status_code == 404
        assert respond(srv, asked["request_id"]).status_code == 200
        users = [u for u in world.users if u.id != "bob"] if how == "disabled" else [
            dataclasses.replace(u, org="other") if u.id == "bob" else u for u in world.users]
        srv.call(sync_declared_users(srv.runtime.db, users))
        after = state(srv, asked["call"], wait=1)
        attempt.record(f"api: a call acting for a person who was {how} runs",
                       after.status_code == 200 and after.json()["decision"] == "allow")
        assert after.status_code == 404 and "acts for" in after.text, after.text


# -- MCP: a session acting for a person who leaves while its call waits --------------------------


@pytest.mark.both_databases
async def test_mcp_a_call_acting_for_a_person_who_left_does_not_run(
        tmp_path: Any, database_url: str, attempt: Tally) -> None:
    from tests.mcp_gateway.test_mcp_acts_for import BOT_TOKEN
    from tests.mcp_gateway.world import make_world

    world = make_world(tmp_path, database_url)
    config = world.config_path.read_text().replace(
        "  - {id: mallory,",
        f"  - {{id: coder-bot, org: acme, kind: service, token: {BOT_TOKEN}}}\n"
        "  - {id: mallory,")
    world.config_path.write_text(config)
    deployment_ = world.deployment()
    args = {"repo_path": str(world.repo), "branch_name": "for-bob"}
    with live_server(deployment_, access_recheck_s=0.2) as srv:
        async with httpx.AsyncClient(base_url=srv.url, timeout=30) as api:
            ended = await _act_for_bob_then_bob_leaves(srv, api, deployment_, args)
    ran = "for-bob" in world.branches()
    attempt.record("mcp: a call acting for a person who left runs once approved", ran)
    # The call ends refused (an error result, or the session refused outright), never run.
    assert not ran and ended != "ran", ended


async def _act_for_bob_then_bob_leaves(srv: LiveServer, api: httpx.AsyncClient,
                                       deployment_: Deployment, args: dict[str, Any]) -> str:
    import asyncio

    from hookgate.storage.users import sync_declared_users
    from tests.mcp_gateway.test_mcp_acts_for import bot_client
    from tests.mcp_gateway.world import auth, one_pending

    try:
        async with bot_client(f"{srv.url}/mcp/coder", "bob") as client:
            call = asyncio.create_task(client.call_tool("mcp__git__git_create_branch", args))
            request = await one_pending(api)
            assert request["requested_by"] == "bob", request
            # bob leaves (the file no longer lists him) while the call waits; the service's
            # token itself keeps its access.
            await asyncio.to_thread(srv.call, sync_declared_users(
                srv.runtime.db, [u for u in deployment_.users if u.id != "bob"]))
            # The wait looks again every 0.2 s: its request ends (cancelled) once it sees.
            for _ in range(100):
                shown = (await api.get(f"/api/confirmations/{request['id']}",
                                       headers=auth("alice"))).json()
                if shown["status"] != "pending":
                    break
                await asyncio.sleep(0.1)
            await api.post(f"/api/confirmations/{request['id']}/respond",
                           json={"decision": "approve"}, headers=auth("alice"))
            result = await asyncio.wait_for(call, 30)
            return "refused" if result.is_error else "ran"
    except Exception as exc:  # the session itself refused once bob left
        return f"session ended: {type(exc).__name__}"


# -- Claude Code: a PostToolUse naming another tool under an approved tool_use_id ---------------


def test_claude_code_a_report_naming_another_tool_does_not_stand_for_the_real_one(
        claude_code: LiveServer, attempt: Tally) -> None:
    from tests.claude_code.scene import TOKEN
    srv = claude_code
    alice = {"Authorization": f"Bearer {TOKEN}", "X-Claude-Code-Entrypoint": "sdk-cli"}
    before = request_ids(srv, alice)
    # The call id is this test's alone on the module's server (the audit rows below are
    # picked by it), in a session of its own.
    call_id = fresh("toolu_posted")
    push = {"command": "git push origin main > push.log"}
    pre = {"hook_event_name": "PreToolUse", "session_id": cc_session(),
           "cwd": "/work/project", "permission_mode": "default", "tool_name": "Bash",
           "tool_input": push, "tool_use_id": call_id, "transcript_path": "/tmp/t.jsonl"}

    def send(body: dict[str, Any]) -> dict[str, Any]:
        r = httpx.post(f"{srv.url}/api/claude-code/hooks", params={"agent": "coder"},
                       headers=alice, json=body, timeout=30)
        assert r.status_code == 200, r.text
        return dict(r.json())

    send(pre)
    [request] = pending_since(srv, before, alice)
    assert httpx.post(f"{srv.url}/api/confirmations/{request['id']}/respond",
                      json={"decision": "approve"}, headers=alice,
                      timeout=30).status_code == 200
    assert send(pre)["hookSpecificOutput"]["permissionDecision"] == "allow"
    # A report under the approved id naming another tool comes first, then the real one.
    send(dict(pre, hook_event_name="PostToolUse", tool_name="Write", tool_response="ok"))
    send(dict(pre, hook_event_name="PostToolUse", tool_response="ok"))
    rows = [row for row in httpx.get(f"{srv.url}/api/audit", params={"limit": 200},
                                     headers=alice, timeout=30).json()["items"]
            if row["tool_call_id"] == call_id and row["outcome"] == "ok"]
    real = [row for row in rows if row["tool_name"] == "Bash"]
    attempt.record("claude code: a PostToolUse naming another tool stands for the approved "
                   "call's (its audit row and hooks never run)", not real)
    assert [(row["tool_name"], row["request_id"]) for row in real] == [("Bash", request["id"])]
    # The other tool's report carries no approval.
    assert [row["request_id"] for row in rows if row["tool_name"] == "Write"] == [None]


def test_a_persons_own_call_is_not_the_service_call_that_acts_for_them(
        server: LiveServer, attempt: Tally) -> None:
    session, call_id = fresh("s-own"), fresh("c")
    asked = ask(server, session=session, call_id=call_id, acts_for="bob",
                arguments={"amount": GATED, "vendor": "v"}).json()
    assert asked["decision"] == "pending", asked
    assert respond(server, asked["request_id"]).status_code == 200
    # bob, with his own token, under the same session and call id: another call.
    own = ask(server, session=session, call_id=call_id, user="bob",
              arguments={"amount": GATED, "vendor": "v"})
    attempt.record("api: a person's own call takes the approval of a service call acting "
                   "for them", own.json().get("decision") == "allow")
    assert own.json()["decision"] == "pending", own.json()
    assert own.json()["request_id"] != asked["request_id"]
    # The service's own call (its own id) runs once.
    mine = state(server, asked["call"]).json()
    assert mine["decision"] == "allow", mine
    assert state(server, asked["call"]).json()["decision"] == "already_ran"


def test_the_python_client_names_the_person_its_calls_act_for(
        server: LiveServer, attempt: Tally) -> None:
    from hookgate.client import Client, GuardRefused, Pending

    guard = Client(server.url, TOKENS["bot"], framework="langgraph", acts_for="bob")
    session = fresh("s-client")
    guard.start_session(agent="helper", session_id=session)
    verdict = guard.before_call(agent="helper", session_id=session, call_id=fresh("c"),
                                tool="transfer", arguments={"to": "x"})
    assert isinstance(verdict, Pending), verdict
    record = httpx.get(f"{server.url}/api/confirmations/{verdict.request_id}",
                       headers=h("alice"), timeout=30).json()
    assert record["requested_by"] == "bob", record
    # Naming another org's user through the client is refused, not ignored.
    stranger = Client(server.url, TOKENS["bot"], framework="langgraph", acts_for="eve")
    try:
        stranger.before_call(agent="helper", session_id=session, call_id=fresh("c"),
                             tool="transfer", arguments={"to": "x"})
        refusal = None
    except GuardRefused as exc:
        refusal = str(exc)
    attempt.record("client: acts_for another org's user through hookgate.client",
                   refusal is None)
    assert refusal is not None and "not a user of org 'acme'" in refusal, refusal
