"""POST /api/claude-code/hooks over real HTTP and a real database, without the CLI: what
Claude Code would send, and what a careless or hostile client might."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.claude_code.scene import TOKEN, coder
from tests.live_server import LiveServer, live_server

SESSION = "5f0c2a8e-1111-4222-8333-944455556666"


@pytest.fixture
def srv(database_url: str) -> Iterator[LiveServer]:
    deployment = coder(wait_s=0.3)
    deployment.database_url = database_url
    agent = deployment.agents["coder"]
    agent.confirmation_mode = "inline_only"
    agent.approval_channel_id = None
    rules = agent.model_config_json["claude_code"]["rules"]
    rules.append({"matcher": "Write, Edit", "path_outside": "{cwd}",
                  "requires_confirmation": True})
    with live_server(deployment) as server:
        yield server


def hook(srv: LiveServer, body: dict[str, Any], *, token: str = TOKEN, agent: str = "coder",
         headless: bool = False) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"}
    if headless:
        headers["X-Claude-Code-Entrypoint"] = "sdk-cli"
    return httpx.post(f"{srv.url}/api/claude-code/hooks", params={"agent": agent},
                      headers=headers, json=body, timeout=30)


def pre(tool: str, tool_input: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {"hook_event_name": "PreToolUse", "session_id": SESSION, "cwd": "/work/project",
            "permission_mode": "default", "tool_name": tool, "tool_input": tool_input,
            "tool_use_id": call_id, "transcript_path": "/tmp/t.jsonl"}


def decision(r: httpx.Response) -> tuple[str | None, str]:
    assert r.status_code == 200, r.text
    specific = r.json().get("hookSpecificOutput") or {}
    return specific.get("permissionDecision"), specific.get("permissionDecisionReason", "")


def approve(srv: LiveServer, request_id: str) -> None:
    r = httpx.post(f"{srv.url}/api/confirmations/{request_id}/respond",
                   json={"decision": "approve", "reason": "fine"},
                   headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 200, r.text


def pending(srv: LiveServer) -> list[dict[str, Any]]:
    r = httpx.get(f"{srv.url}/api/confirmations", params={"status": "pending"},
                  headers={"Authorization": f"Bearer {TOKEN}"})
    return list(r.json())


PUSH = {"command": "git push origin main > push.log"}


def test_an_ungated_call_gets_no_opinion_and_claude_codes_own_permissions_apply(srv):
    assert decision(hook(srv, pre("Bash", {"command": "ls"}, "toolu_1"))) == (None, "")


def test_interactive_denial_names_the_request_and_an_identical_retry_runs_once(srv):
    first, why = decision(hook(srv, pre("Bash", PUSH, "toolu_a")))
    [request] = pending(srv)
    assert first == "deny" and request["id"] in why and "identical call" in why

    # Asking again before anyone decided waits on the same request; no second card.
    assert decision(hook(srv, pre("Bash", PUSH, "toolu_b")))[0] == "deny"
    assert [r["id"] for r in pending(srv)] == [request["id"]]

    approve(srv, request["id"])
    ok, why = decision(hook(srv, pre("Bash", PUSH, "toolu_c")))
    assert ok == "allow" and request["id"] in why and "alice" in why

    # The approval was used by that execution: the next identical call asks again.
    again, why = decision(hook(srv, pre("Bash", PUSH, "toolu_d")))
    assert again == "deny"
    assert [r["id"] for r in pending(srv)] != [request["id"]] and len(pending(srv)) == 1


def test_an_approval_does_not_carry_over_to_other_input_or_another_session(srv):
    decision(hook(srv, pre("Bash", PUSH, "toolu_a")))
    [request] = pending(srv)
    approve(srv, request["id"])
    other_input = pre("Bash", {"command": "git push --force > push.log"}, "toolu_b")
    assert decision(hook(srv, other_input))[0] == "deny"
    other_session = dict(pre("Bash", PUSH, "toolu_c"), session_id="another-session")
    assert decision(hook(srv, other_session))[0] == "deny"
    # The approved one is still there, unused, for the call it approved.
    assert decision(hook(srv, pre("Bash", PUSH, "toolu_d")))[0] == "allow"


def test_a_rule_whose_condition_cannot_be_evaluated_asks_a_person_and_says_why(srv):
    # `".log" in args.command` over a number: the rule applies (fail closed), and the
    # approver reads why it asked rather than a reason that does not fit the call.
    answer, _ = decision(hook(srv, pre("Bash", {"command": 5}, "toolu_n")))
    [request] = pending(srv)
    assert answer == "deny" and request["payload"]["args"] == {"command": 5}
    [reason] = [r["text"] for r in request["context"]["reasons"] if r["kind"] == "gate_rule"]
    assert reason.startswith("gate rule claude_code.rules[0] of agent 'coder'"), reason
    assert ("its condition could not be evaluated: TypeError: argument of type 'int' is not "
            "iterable; the rule applies, fail closed") in reason
    # A command the condition reads asks nothing and names no failure.
    assert decision(hook(srv, pre("Bash", {"command": "ls"}, "toolu_m"))) == (None, "")


def test_headless_runs_are_deferred_while_a_person_decides(srv):
    answer, why = decision(hook(srv, pre("Bash", PUSH, "toolu_h"), headless=True))
    assert answer == "defer" and pending(srv)[0]["id"] in why


def test_a_write_outside_the_project_is_gated_and_inside_is_not(srv):
    inside = pre("Write", {"file_path": "/work/project/a.txt", "content": "x"}, "toolu_w1")
    assert decision(hook(srv, inside))[0] is None
    outside = pre("Write", {"file_path": "/work/projectx/a.txt", "content": "x"}, "toolu_w2")
    assert decision(hook(srv, outside))[0] == "deny"
    assert pending(srv)[0]["payload"]["tool_name"] == "Write"


def test_a_read_only_org_refuses_claude_codes_writes(srv):
    srv.call(_set_read_only(srv))
    answer, why = decision(hook(srv, pre("Edit", {"file_path": "/work/project/a",
                                                  "old_string": "a", "new_string": "b"},
                                              "toolu_e")))
    assert answer == "deny" and "read-only" in why.lower()
    assert decision(hook(srv, pre("Read", {"file_path": "/work/project/a"}, "toolu_r")))[0] \
        is None


async def _set_read_only(srv: LiveServer) -> None:
    from hookgate.storage.tables import Org

    async with srv.runtime.db.transaction() as s:
        org = await s.get(Org, "acme")
        assert org is not None
        org.read_only = True


def test_post_tool_use_is_audited_and_other_events_get_no_objection(srv):
    body = dict(pre("Bash", {"command": "ls"}, "toolu_p"), hook_event_name="PostToolUse",
                tool_response={"stdout": "a\n", "stderr": "", "interrupted": False},
                duration_ms=12)
    assert hook(srv, body).json() == {}
    failure = dict(pre("Bash", {"command": "false"}, "toolu_f"),
                   hook_event_name="PostToolUseFailure", error="exit 1", duration_ms=3)
    assert hook(srv, failure).status_code == 200
    for event in ("UserPromptSubmit", "Stop"):
        r = hook(srv, {"hook_event_name": event, "session_id": SESSION, "cwd": "/w"})
        assert r.json() == {}
    rows = httpx.get(f"{srv.url}/api/audit", headers={"Authorization": f"Bearer {TOKEN}"}
                     ).json()["items"]
    assert sorted((r["tool_call_id"], r["outcome"]) for r in rows) == [
        ("toolu_f", "error"), ("toolu_p", "ok")]


def test_who_may_call_and_what_a_body_may_hold(srv):
    body = pre("Bash", {"command": "ls"}, "toolu_x")
    assert hook(srv, body, token="wrong").status_code == 401
    assert hook(srv, body, agent="nobody").status_code == 404
    raw = httpx.post(f"{srv.url}/api/claude-code/hooks", params={"agent": "coder"},
                     headers={"Authorization": f"Bearer {TOKEN}"},
                     content=b'{"hook_event_name": "PreToolUse", "x": NaN}')
    assert raw.status_code == 400 and "NaN" in raw.text
    deep = {"hook_event_name": "PreToolUse", "session_id": SESSION, "tool_name": "Bash",
            "tool_use_id": "t", "tool_input": {"command": "ls", "x": 1}}
    r = hook(srv, dict(deep, tool_name=None))
    assert decision(r)[0] == "deny"
    r = hook(srv, dict(deep, hook_event_name="Nope"))
    assert r.status_code == 400


def test_permission_request_is_answered_in_its_own_shape(srv):
    body = {"hook_event_name": "PermissionRequest", "session_id": SESSION,
            "cwd": "/work/project", "tool_name": "Bash", "tool_input": PUSH,
            "permission_suggestions": []}
    answer = hook(srv, body).json()["hookSpecificOutput"]
    assert answer["hookEventName"] == "PermissionRequest"
    assert answer["decision"]["behavior"] == "deny"
    [request] = pending(srv)
    assert request["id"] in answer["decision"]["message"]
    approve(srv, request["id"])
    answer = hook(srv, body).json()["hookSpecificOutput"]
    assert answer["decision"] == {"behavior": "allow"}
    # An ungated call gets no answer: Claude Code's own prompt decides.
    assert hook(srv, dict(body, tool_input={"command": "ls"})).json() == {}


def test_session_start_gets_no_objection_and_a_bad_policy_denies(srv):
    r = hook(srv, {"hook_event_name": "SessionStart", "session_id": SESSION, "cwd": "/w",
                   "source": "startup"})
    assert r.json() == {}
    srv.runtime.runs.agents["coder"].model_config_json["claude_code"]["wait_s"] = "soon"
    answer, why = decision(hook(srv, pre("Bash", {"command": "ls"}, "toolu_z")))
    assert answer == "deny" and "wait_s" in why


def test_an_approval_is_bound_to_the_user_and_agent_that_asked(srv):
    decision(hook(srv, pre("Bash", PUSH, "toolu_a")))
    [request] = pending(srv)
    approve(srv, request["id"])
    # Someone else sending the same session, call id and input gets no use of it.
    srv.call(_add_user(srv, "bob", "tok-bob"))
    answer, _ = decision(hook(srv, pre("Bash", PUSH, "toolu_a"), token="tok-bob"))
    assert answer == "deny"
    assert decision(hook(srv, pre("Bash", PUSH, "toolu_a")))[0] == "allow"


async def _add_user(srv: LiveServer, user_id: str, token: str) -> None:
    from hookgate.runtime.deployment import token_digest
    from hookgate.storage.tables import User

    async with srv.runtime.db.transaction() as s:
        s.add(User(id=user_id, org_id="acme", name=user_id, admin=False,
                   token_sha256=token_digest(token)))


def test_rate_limits_apply_to_claude_codes_tools_by_connector(database_url):
    deployment = coder(wait_s=0.3)
    deployment.database_url = database_url
    hooks = deployment.agents["coder"].model_config_json["hooks"]
    hooks["class_hooks"].append({"name": "connector_rate_limit",
                                 "params": {"limits": {"mcp__github": "2/hour"}}})
    with live_server(deployment) as server:
        answers = [decision(hook(server, pre("mcp__github__create_issue", {"title": str(i)},
                                             f"toolu_{i}")))[0] for i in range(3)]
        assert answers == [None, None, "deny"]
        # Claude Code's own tools have their own connector and are not counted.
        assert decision(hook(server, pre("Bash", {"command": "ls"}, "toolu_b")))[0] is None


def test_an_edit_of_a_claude_code_call_is_refused_and_a_rejection_message_is_passed_on(srv):
    # Whether a Claude Code call needs a person, and whether it writes, comes from rules
    # over its arguments as asked (here: a Write outside the project); an edit could move
    # it to another class, and hookgate holds no schema to check it, so it is refused.
    outside = pre("Write", {"file_path": "/work/projectx/a.txt", "content": "x"}, "toolu_x")
    assert decision(hook(srv, outside))[0] == "deny"
    [request] = pending(srv)
    assert request["can_decide"] is True and request["can_edit"] is False  # the inbox hides it
    headers = {"Authorization": f"Bearer {TOKEN}"}
    r = httpx.post(f"{srv.url}/api/confirmations/{request['id']}/respond", headers=headers,
                   json={"decision": "approve", "arguments": {
                       "file_path": "/work/project/a.txt", "content": "x"}})
    assert r.status_code == 422 and "cannot be edited here" in r.json()["error"]
    assert [p["id"] for p in pending(srv)] == [request["id"]]

    r = httpx.post(f"{srv.url}/api/confirmations/{request['id']}/respond", headers=headers,
                   json={"decision": "reject", "message": "write inside the project"})
    assert r.status_code == 200
    answer, why = decision(hook(srv, outside))
    assert answer == "deny" and "Message from alice: write inside the project" in why


def test_a_standing_rule_allows_claude_codes_matching_calls_every_time(srv):
    headers = {"Authorization": f"Bearer {TOKEN}"}
    for name in ("bash ", "B\u0430sh", ""):  # a trailing space, a Cyrillic 'а', nothing
        r = httpx.post(f"{srv.url}/api/approval-rules", headers=headers, json={
            "agent_id": "coder", "tool_name": name, "scope": "agent_user", "user_id": "alice"})
        assert r.status_code == 422, r.text
    r = httpx.post(f"{srv.url}/api/approval-rules", headers=headers, json={
        "agent_id": "coder", "tool_name": "Bash", "scope": "agent_user", "user_id": "alice",
        "when": 'args.command.startswith("git push origin main")'})
    assert r.status_code == 201, r.text
    rule = r.json()
    for call_id in ("toolu_r1", "toolu_r2"):  # every use, not once
        ok, why = decision(hook(srv, pre("Bash", PUSH, call_id)))
        assert (ok, why) == (
            "allow", f"approved by rule {rule['id']}, created by alice in hookgate")
    assert pending(srv) == []
    # Another gated command is asked for as usual.
    other = {"command": "git push --force > push.log"}
    assert decision(hook(srv, pre("Bash", other, "toolu_r3")))[0] == "deny"
    assert [r["payload"]["args"] for r in pending(srv)] == [other]
    assert httpx.get(f"{srv.url}/api/approval-rules/{rule['id']}",
                     headers=headers).json()["uses"] == 2


@pytest.mark.both_databases
def test_another_command_under_an_approved_tool_use_id_leaves_the_approval_for_the_exact_call(
        srv):
    from tests.adversarial_tally import TALLY

    decision(hook(srv, pre("Bash", PUSH, "toolu_bound")))
    [request] = pending(srv)
    approve(srv, request["id"])

    # A different command under the approved call's tool_use_id: refused, and the
    # refusal did not use up the approval (the binding is checked before the claim).
    swapped = pre("Bash", {"command": "git push --force origin main > push.log"},
                  "toolu_bound")
    refused, why = decision(hook(srv, swapped))
    TALLY.record("claude-code other command under an approved tool_use_id",
                 got_through=refused != "deny")
    assert refused == "deny" and "toolu_bound" in why

    ok, why = decision(hook(srv, pre("Bash", PUSH, "toolu_bound")))
    assert ok == "allow" and request["id"] in why

    replay, why = decision(hook(srv, pre("Bash", PUSH, "toolu_bound")))
    TALLY.record("claude-code replay of a used approval", got_through=replay != "deny")
    assert replay == "deny" and "already used by one execution" in why
    assert " by " not in why.split("already used")[0], why  # nobody decided this refusal


@pytest.mark.both_databases
def test_a_claude_code_call_a_person_approved_is_audited_with_the_approver_and_request(srv):
    decision(hook(srv, pre("Bash", PUSH, "toolu_w1")))
    [request] = pending(srv)
    approve(srv, request["id"])
    assert decision(hook(srv, pre("Bash", PUSH, "toolu_w2")))[0] == "allow"  # a retry's id
    done = dict(pre("Bash", PUSH, "toolu_w2"), hook_event_name="PostToolUse",
                tool_response={"stdout": "", "stderr": "", "interrupted": False},
                duration_ms=40)
    assert hook(srv, done).status_code == 200
    # Another input reported under the approved call's id does not borrow its approval.
    other = dict(done, tool_input={"command": "git push --force > push.log"})
    assert hook(srv, other).status_code == 200
    plain = dict(pre("Bash", {"command": "ls"}, "toolu_w3"), hook_event_name="PostToolUse",
                 tool_response={"stdout": "a\n"}, duration_ms=5)
    assert hook(srv, plain).status_code == 200
    rows = httpx.get(f"{srv.url}/api/audit", params={"outcome": "ok"},
                     headers={"Authorization": f"Bearer {TOKEN}"}).json()["items"]
    assert [(r["tool_call_id"], r["approver"], r["request_id"]) for r in rows] == [
        ("toolu_w3", None, None), ("toolu_w2", None, None),
        ("toolu_w2", "alice", request["id"])]
    ran = rows[2]
    assert ran["wait_us"] > 0 and ran["latency_us"] >= 40_000  # Claude Code timed the tool
