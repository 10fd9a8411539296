"""Standing rules and quorum in a real headless Chromium: "approve and remember" in the
inbox, the rule's use on the run page, the Rules page with revoke; a request that needs two
approvers shows "1 of 2 approvals" and never offers its requester the approve button."""

from __future__ import annotations

import dataclasses
from typing import Any

from hookgate.approvals.quorum import QuorumRule
from tests.portal.steps import pending_request, start_run, wait_finished
from tests.portal.test_portal_browser import portal_for
from tests.server.demo_world import auth, world


def _pay(call_id: str, amount: int) -> dict[str, Any]:
    return {"tool_calls": [{"id": call_id, "name": "oa__purchase_pay",
                            "args": {"amount": amount, "vendor": "ACME"}}]}


def test_approve_and_remember_then_revoke_on_the_rules_page(database_url: str) -> None:
    deployment, bank = world(database_url, turns=[_pay("first", 60000), _pay("second", 70000),
                                                  {"answer": "Paid ACME twice."}])
    with portal_for(deployment) as (page, c):
        page.open()
        page.sign_in("alice")
        run_id = start_run(c)
        card = page.expand(page.sees("#waiting .request", "oa__purchase_pay"))
        from selenium.webdriver.support.ui import Select

        Select(card.find_element(page.by.NAME, "remember_scope")).select_by_value("agent_user")
        card.find_element(page.by.NAME, "remember_when").send_keys(
            'args.vendor == "ACME" and args.amount <= 80000')
        Select(card.find_element(page.by.NAME, "remember_for")).select_by_value("86400")
        card.find_element(page.by.CSS_SELECTOR, "button.approve").click()
        page.sees("#decided .request", "Approved by alice via the web inbox")
        assert wait_finished(c, run_id) == "completed"
        assert len(bank.payments) == 2
        [rule] = c.get("/api/approval-rules", headers=auth("alice")).json()
        assert (rule["scope"], rule["uses"]) == ("agent_user", 1)

        page.open(f"#/runs/{run_id}")
        page.sees(".timeline", f"Approved by rule {rule['id']} (created by alice)")

        page.find("a[data-nav=rules]").click()
        shown = page.sees("#rules .rule", "oa__purchase_pay")
        assert "calls of alice" in shown.text and "used 1 time" in shown.text
        assert 'args.vendor == "ACME" and args.amount <= 80000' in shown.text
        shown.find_element(page.by.CSS_SELECTOR, "button.reject").click()
        page.sees("#rules .rule", "revoked")
        assert c.get(f"/api/approval-rules/{rule['id']}",
                     headers=auth("alice")).json()["revoked_by"] == "alice"


def test_a_quorum_request_counts_approvals_and_hides_approve_from_its_requester(
        database_url: str) -> None:
    deployment, bank = world(database_url, scope="org_members",
                             turns=[_pay("big", 600000), {"answer": "Paid."}])
    deployment.agents["buyer"] = dataclasses.replace(
        deployment.agents["buyer"], allow_self_approval=False,
        approval_quorum=(QuorumRule.parse("oa__purchase_pay", "args.amount > 500000", 2,
                                          None),))
    with portal_for(deployment) as (page, c):
        run_id = start_run(c)  # alice asks
        request = pending_request(c)
        page.open()
        page.sign_in("bob")
        card = page.sees("#waiting .request", "0 of 2 approvals")
        assert "2 distinct people must approve" in page.expand(card).text
        assert card.find_elements(page.by.NAME, "remember_scope") == []  # no rule for quorum
        card.find_element(page.by.CSS_SELECTOR, "button.approve").click()
        card = page.sees("#waiting .request", "1 of 2 approvals (bob)")
        page.sees("#waiting .request", "You approved this request")
        assert card.find_elements(page.by.CSS_SELECTOR, "button.approve") == []

        page.find("#sign-out").click()
        page.sign_in("alice")
        mine = page.sees("#waiting .request", "1 of 2 approvals (bob)")
        assert "another person must approve it (four eyes)" in mine.text
        assert mine.find_elements(page.by.CSS_SELECTOR, "button.approve") == []
        assert mine.find_elements(page.by.CSS_SELECTOR, "button.reject")
        assert bank.payments == []

        r = c.post(f"/api/confirmations/{request['id']}/respond",
                   json={"decision": "approve"}, headers=auth("olivia"))
        assert r.status_code == 200 and r.json()["status"] == "approved", r.text
        page.sees("#decided .request", "2 of 2 approvals (bob, olivia)")
        assert wait_finished(c, run_id) == "completed"
        assert bank.payments == [{"amount": 600000.0, "vendor": "ACME"}]
