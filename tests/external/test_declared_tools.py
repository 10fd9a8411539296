"""An external agent's call of a tool its hookgate configuration declares is decided by that
declaration (its own approval condition, its parameter types, its connector), never by a
stand-in built from the rules; a caller-sent schema's types are checked and converted the
same way; hostile values are a clear refusal, never a crash or a pass. Real server, SQLite
and PostgreSQL, through HTTP."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from hookgate import Agent, ScriptedLLM, tool
from hookgate.runtime.deployment import Deployment, OrgSpec, UserSpec, token_digest
from tests.conftest import migrated_database_url
from tests.live_server import LiveServer, live_server

BOT, ALICE = "tok-bot", "tok-alice"


@tool(requires_confirmation=lambda a: a["amount"] > 50_000, connector="purchasing",
      writes=True)
def oa__purchase_pay(amount: float, vendor: str) -> str:
    """Pay a vendor."""
    return f"paid {amount} to {vendor}"


def deployment(url: str) -> Deployment:
    agent = Agent(
        id="buyer", name="buyer", instructions="", tools=[oa__purchase_pay], org_id="acme",
        owner_user_id="alice", confirmation_approver_scope="agent_owner",
        model_config_json={"hooks": {"class_hooks": ["audit_log"]}})
    return Deployment(
        database_url=url, orgs=[OrgSpec("acme", "ACME")],
        users=[UserSpec("alice", "acme", admin=True, token_sha256=token_digest(ALICE)),
               UserSpec("bot", "acme", token_sha256=token_digest(BOT))],
        agents={"buyer": agent}, model_for=lambda _a: ScriptedLLM([{"answer": "-"}]),
        channels=[])


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[LiveServer]:
    url = migrated_database_url(request, tmp_path_factory.mktemp("ext"))
    with live_server(deployment(url)) as srv:
        yield srv


_n = iter(range(10**6))


def ask(server: LiveServer, arguments: Any, *, tool_name: str = "oa__purchase_pay",
        framework: str = "langgraph", **extra: Any) -> httpx.Response:
    body = {"agent": "buyer", "session_id": "s-decl", "call_id": f"c{next(_n)}",
            "tool": tool_name, "arguments": arguments, **extra}
    return httpx.post(f"{server.url}/api/v1/calls", json=body, timeout=30,
                      headers={"Authorization": f"Bearer {BOT}",
                               "X-Hookgate-Framework": framework})


def raw_ask(server: LiveServer, body: bytes) -> httpx.Response:
    return httpx.post(f"{server.url}/api/v1/calls", content=body, timeout=30,
                      headers={"Authorization": f"Bearer {BOT}",
                               "Content-Type": "application/json"})


def test_a_declared_tools_own_condition_asks_a_person(server: LiveServer, attempt: Any) -> None:
    big = ask(server, {"amount": 60_000, "vendor": "acme-steel"})
    assert big.status_code == 200, big.text
    attempt.record("external: a declared tool's own approval condition is skipped",
                   big.json()["decision"] != "pending")
    assert big.json()["decision"] == "pending"
    small = ask(server, {"amount": 100, "vendor": "acme-steel"})
    assert small.json()["decision"] == "allow"
    # The declaration's types convert as the engines convert: a float parameter.
    assert small.json()["arguments"] == {"amount": 100.0, "vendor": "acme-steel"}


def test_a_number_sent_as_text_is_converted_and_still_gated(
        server: LiveServer, attempt: Any) -> None:
    big = ask(server, {"amount": "60000", "vendor": "acme-steel"})
    attempt.record("external: a number sent as text passes the declared condition",
                   big.json().get("decision") != "pending")
    assert big.json()["decision"] == "pending"
    small = ask(server, {"amount": "100", "vendor": "v"})
    assert small.json()["decision"] == "allow"
    assert small.json()["arguments"] == {"amount": 100.0, "vendor": "v"}


@pytest.mark.parametrize("arguments", [
    {"amount": "lots", "vendor": "v"},
    {"amount": "NaN", "vendor": "v"},
    {"amount": "Infinity", "vendor": "v"},
    {"amount": "-inf", "vendor": "v"},
    {"amount": [1], "vendor": "v"},
    {"amount": 5},
    {"amount": 5, "vendor": "v", "extra": 1},
])
def test_wrong_types_are_a_clear_deny(server: LiveServer, attempt: Any,
                                      arguments: dict[str, Any]) -> None:
    r = ask(server, arguments)
    passed = r.status_code == 200 and r.json()["decision"] in ("allow", "pending")
    attempt.record(f"external: declared types skipped for {arguments!r}", passed)
    assert r.status_code in (200, 400, 422), r.text
    if r.status_code == 200:
        assert r.json()["decision"] == "deny"
        assert "oa__purchase_pay" in r.json()["reason"]


def test_a_caller_sent_schema_checks_and_converts_types(server: LiveServer,
                                                        attempt: Any) -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"},
                                               "ok": {"type": "boolean"},
                                               "x": {"type": "number"}},
              "required": ["n"]}
    bad = ask(server, {"n": "lots"}, tool_name="count", parameters=schema)
    attempt.record("external: a caller-sent schema's types are not checked",
                   bad.json().get("decision") != "deny")
    assert bad.json()["decision"] == "deny" and "n" in bad.json()["reason"]
    good = ask(server, {"n": "7", "x": "2.5", "ok": True}, tool_name="count",
               parameters=schema)
    assert good.json()["decision"] == "allow", good.text
    assert good.json()["arguments"] == {"n": 7, "x": 2.5, "ok": True}
    nested = ask(server, {"n": 1, "ok": "maybe"}, tool_name="count", parameters=schema)
    assert nested.json()["decision"] == "deny"


@pytest.mark.parametrize("body", [
    b'{"agent":"buyer","session_id":"s","call_id":"h1","tool":"t","arguments":{"a":NaN}}',
    b'{"agent":"buyer","session_id":"s","call_id":"h2","tool":"t","arguments":{"a":Infinity}}',
    b'{"agent":"buyer","session_id":"s","call_id":"h3","tool":"t","arguments":{"a":1e400}}',
    b'{"agent":"buyer","session_id":"s","call_id":"h4","tool":"t","arguments":{"a":"\\ud800"}}',
    b'{"agent":"buyer","session_id":"s","call_id":"h5","tool":"t","arguments":{"a":"\\u0000"}}',
    ('{"agent":"buyer","session_id":"s","call_id":"h6","tool":"t","arguments":'
     + '{"a":' * 200 + "1" + "}" * 200 + "}").encode(),
    ('{"agent":"buyer","session_id":"s","call_id":"h7","tool":"t","arguments":{"a":"'
     + "x" * 400_000 + '"}}').encode(),
    b'{"agent":"buyer","session_id":"s","call_id":"h8","tool":"t","arguments":{"a":'
    b'123456789012345678901234567890}}',
])
def test_hostile_values_are_refused_clearly(server: LiveServer, attempt: Any,
                                            body: bytes) -> None:
    r = raw_ask(server, body)
    passed = r.status_code == 200 and r.json().get("decision") in ("allow", "pending")
    attempt.record(f"external: hostile arguments {body[:60]!r}", passed or r.status_code >= 500)
    assert r.status_code in (200, 400, 413, 422), r.text[:300]
    if r.status_code == 200:
        assert r.json()["decision"] == "deny" and r.json()["reason"]


@pytest.mark.parametrize("field,value", [
    ("session_id", "a\x00b"), ("call_id", "c\x00d"), ("call_id", "c\nd"),
    ("session_id", "s\x1f"), ("call_id", "c\x7f"), ("session_id", "\u2028"),
])
def test_control_characters_in_ids_are_refused(server: LiveServer, attempt: Any,
                                               field: str, value: str) -> None:
    body = {"agent": "buyer", "session_id": "s-ids", "call_id": "ok-id",
            "tool": "oa__purchase_pay", "arguments": {"amount": 1, "vendor": "v"},
            field: value}
    r = httpx.post(f"{server.url}/api/v1/calls", content=json.dumps(body), timeout=30,
                   headers={"Authorization": f"Bearer {BOT}",
                            "Content-Type": "application/json"})
    attempt.record(f"external: a control character in {field}", r.status_code == 200)
    assert r.status_code in (400, 422) and field in r.text, r.text
    s = httpx.post(f"{server.url}/api/v1/sessions", timeout=30,
                   content=json.dumps({"agent": "buyer",
                                       "session_id": value if field == "session_id" else "s"}),
                   headers={"Authorization": f"Bearer {BOT}",
                            "Content-Type": "application/json"})
    if field == "session_id":
        assert s.status_code in (400, 422), s.text


def test_the_connector_comes_from_the_declaration_not_the_header(server: LiveServer) -> None:
    r = ask(server, {"amount": 1, "vendor": "v"}, framework="someone-else")
    assert r.json()["decision"] == "allow"
    rep = httpx.post(f"{server.url}/api/v1/calls/{r.json()['call']}/result",
                     json={"output": "paid"}, headers={"Authorization": f"Bearer {BOT}"})
    assert rep.status_code == 200, rep.text
    rows = httpx.get(f"{server.url}/api/audit", params={"limit": 200},
                     headers={"Authorization": f"Bearer {ALICE}"}).json()["items"]
    mine = [row for row in rows if row["tool_call_id"] == json.loads(r.request.content)[
        "call_id"]]
    assert [row["connector"] for row in mine] == ["purchasing"]


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"a": {"type": "string", "pattern": "("}}},
    {"type": "object", "properties": {"a": {"$ref": "#"}}},
    {"type": "object", "$ref": "#"},
    {"type": "object", "properties": {"a": {"$ref": "https://example.invalid/s.json"}}},
    {"type": "object", "properties": {"a": {"type": "bogus"}}},
])
def test_a_hostile_caller_schema_is_a_clear_deny(server: LiveServer, attempt: Any,
                                                 schema: dict[str, Any]) -> None:
    r = ask(server, {"a": {"a": {"a": "x"}}}, tool_name="shaped", parameters=schema)
    passed = r.status_code == 200 and r.json()["decision"] in ("allow", "pending")
    attempt.record(f"external: a hostile caller schema {schema!r}", passed)
    assert r.status_code in (200, 400, 422), r.text
    if r.status_code == 200:
        assert r.json()["decision"] == "deny"
        assert "could not decide" not in r.json()["reason"], r.json()["reason"]


def _respond(server: LiveServer, request_id: str, **body: Any) -> httpx.Response:
    return httpx.post(f"{server.url}/api/confirmations/{request_id}/respond", timeout=30,
                      json={"decision": "approve", **body},
                      headers={"Authorization": f"Bearer {ALICE}"})


def test_an_approvers_edit_is_checked_and_converted_by_the_declared_types(
        server: LiveServer, attempt: Any) -> None:
    asked = ask(server, {"amount": 60_000, "vendor": "v"}, tool_name="oa__purchase_pay").json()
    assert asked["decision"] == "pending"
    bad = _respond(server, asked["request_id"], arguments={"amount": "lots", "vendor": "v"})
    attempt.record("external: an approver's edit of the wrong type is accepted",
                   bad.status_code == 200)
    assert bad.status_code in (400, 409, 422), bad.text
    good = _respond(server, asked["request_id"], arguments={"amount": "55000", "vendor": "v"})
    assert good.status_code == 200, good.text
    verdict = httpx.get(f"{server.url}/api/v1/calls/{asked['call']}", params={"wait": 5},
                        headers={"Authorization": f"Bearer {BOT}"}, timeout=30).json()
    assert verdict["decision"] == "allow", verdict
    assert verdict["arguments"] == {"amount": 55000.0, "vendor": "v"}
