"""Approve with edits, reject with a message and decide several calls at once, in a real
headless Chromium against a real server, the way an approver does it in the inbox."""

from __future__ import annotations

from typing import Any

from tests.portal.browser import console_errors
from tests.portal.steps import pending_request, start_run, wait_finished
from tests.portal.test_portal_browser import portal_for
from tests.server.demo_world import auth, world

PARALLEL: list[dict[str, Any]] = [
    {"tool_calls": [
        {"id": "p1", "name": "oa__purchase_pay", "args": {"amount": 60000, "vendor": "ACME"}},
        {"id": "p2", "name": "oa__purchase_pay", "args": {"amount": 70000, "vendor": "Initech"}},
        {"id": "p3", "name": "oa__purchase_pay", "args": {"amount": 80000, "vendor": "Hooli"}},
    ]},
    {"answer": "done"},
]


def test_an_approver_edits_the_amount_in_the_inbox_and_the_edited_call_runs(
        database_url: str) -> None:
    deployment, bank = world(database_url)
    with portal_for(deployment) as (page, c):
        page.open()
        page.sign_in("alice")
        run_id = start_run(c, "Pay ACME 60000")
        card = page.expand(page.sees("#waiting .request", "oa__purchase_pay"))
        card.find_element(page.by.CSS_SELECTOR, "details.edit summary").click()
        # The JSON, kept for nested values, under the form per argument.
        card.find_element(page.by.CSS_SELECTOR, "details.raw summary").click()
        field = card.find_element(page.by.CSS_SELECTOR, "textarea[name=arguments]")
        assert '"amount": 60000' in field.get_attribute("value")

        # Not JSON: refused in the page, nothing sent.
        field.clear()
        field.send_keys('{"amount": 40000,')
        card.find_element(page.by.CSS_SELECTOR, "button[value=approve-edited]").click()
        page.sees("#waiting .request details.edit [role=alert]", "not valid JSON")
        # Against the tool's schema: refused by the server, the request stays pending.
        field.clear()
        field.send_keys('{"amount": "lots", "vendor": "ACME"}')
        card.find_element(page.by.CSS_SELECTOR, "button[value=approve-edited]").click()
        page.sees("#waiting .request details.edit [role=alert]", "edited arguments refused")
        assert pending_request(c)["status"] == "pending" and bank.payments == []

        field.clear()
        field.send_keys('{"amount": 40000, "vendor": "ACME"}')
        card.find_element(page.by.CSS_SELECTOR, "textarea[name=message]").send_keys(
            "40k now, the rest next month")
        card.find_element(page.by.CSS_SELECTOR, "button[value=approve-edited]").click()
        decided = page.expand(page.sees("#decided .request", "Approved by alice"))
        assert "Approved with edited arguments" in decided.text
        assert "amount: 60000 → 40000" in decided.text
        assert "Message to the agent\n40k now, the rest next month" in decided.text
        assert wait_finished(c, run_id) == "completed"
        assert bank.payments == [{"amount": 40000.0, "vendor": "ACME"}]

        decided.find_element(page.by.LINK_TEXT, "Open the run").click()
        page.sees(".timeline", "paid 40000 to ACME")
        # The only error the browser logged is the refusal the test asked for.
        assert [e for e in console_errors(page.driver) if "422" not in e] == []


def test_a_rejection_with_a_message_shows_it_on_the_decided_card(database_url: str) -> None:
    deployment, bank = world(database_url)
    with portal_for(deployment) as (page, c):
        page.open()
        page.sign_in("alice")
        run_id = start_run(c)
        card = page.expand(page.sees("#waiting .request", "oa__purchase_pay"))
        card.find_element(page.by.CSS_SELECTOR, "textarea[name=message]").send_keys(
            "Get a second quote first.")
        card.find_element(page.by.CSS_SELECTOR, "button.reject").click()
        decided = page.expand(page.sees("#decided .request", "Rejected by alice via the web inbox"))
        assert "Message to the agent\nGet a second quote first." in decided.text
        assert wait_finished(c, run_id) == "completed"
        assert bank.payments == []
        record = c.get("/api/confirmations", headers=auth("alice")).json()[0]
        assert record["decision"]["message"] == "Get a second quote first."


def test_the_parallel_calls_of_a_turn_are_approved_and_rejected_as_a_batch(
        database_url: str) -> None:
    deployment, bank = world(database_url, turns=PARALLEL)
    with portal_for(deployment) as (page, c):
        page.open()
        page.sign_in("alice")
        run_id = start_run(c)
        page.until("three waiting cards", lambda: len(page.find_all("#waiting .request")) == 3)
        bar = page.until("the batch bar", lambda: page.find("#batch").is_displayed()
                         and page.find("#batch"))
        assert not bar.find_element(page.by.NAME, "approve-selected").is_enabled()

        for vendor in ("ACME", "Initech"):
            card = next(r for r in page.find_all("#waiting .request")
                        if f"vendor\n{vendor}\n" in r.text)
            card.find_element(page.by.CSS_SELECTOR, "input.select").click()
        page.sees("#batch .count", "2 selected")
        bar.find_element(page.by.NAME, "approve-selected").click()
        page.until("two decided cards", lambda: len(page.find_all("#decided .request")) == 2)
        [left] = page.find_all("#waiting .request")
        assert "vendor\nHooli\n" in left.text

        # One call left: the bar shows again once it is selected.
        page.find("#waiting input.select").click()
        page.sees("#batch .count", "1 selected")
        bar.find_element(page.by.CSS_SELECTOR, "input[name=batch-message]").send_keys(
            "Hooli is not an approved vendor.")
        bar.find_element(page.by.NAME, "reject-selected").click()
        page.until("all decided", lambda: len(page.find_all("#decided .request")) == 3)
        assert wait_finished(c, run_id) == "completed"
        assert sorted(p["vendor"] for p in bank.payments) == ["ACME", "Initech"]
        records = {r["tool_call_id"]: r for r in
                   c.get("/api/confirmations", headers=auth("alice")).json()}
        assert {k: r["status"] for k, r in records.items()} == {
            "p1": "approved", "p2": "approved", "p3": "rejected"}
        assert records["p3"]["decision"]["message"] == "Hooli is not an approved vendor."
        assert all(r["decision"]["via"] == "inbox" for r in records.values())
        assert console_errors(page.driver) == []
