"""The inbox at a glance, in a real headless Chromium against a real server: with many
pending and decided requests, the first pending request's Approve and Reject are on screen
without scrolling (1280×900 and 420 px wide), decided requests are one line each, every
pending request says what its run already did, a call a standing rule approved reads
"approved by rule …", the Rules page names agents, and an edit's error shows in view."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.portal.browser import set_viewport
from tests.portal.steps import WAIT_S, start_run, wait_finished
from tests.portal.test_portal_browser import Portal, portal_for
from tests.server.demo_world import auth, world

DESKTOP = (1280, 900)
NARROW = (420, 900)


def _pay(amount: int, vendor: str = "ACME") -> dict[str, Any]:
    return {"tool_calls": [{"name": "oa__purchase_pay",
                            "args": {"amount": amount, "vendor": vendor}}]}


# 12,000 runs without asking (the tool asks above 50,000); 60,000 then waits for a person.
PAID_THEN_ASKS = [_pay(12000), _pay(60000), {"answer": "Paid ACME."}]


def _pending(c: httpx.Client, count: int) -> list[dict[str, Any]]:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        pending = c.get("/api/confirmations", params={"status": "pending"},
                        headers=auth("alice")).json()
        if len(pending) >= count:
            return list(pending)
        time.sleep(0.05)
    raise AssertionError(f"{count} pending requests did not appear")


def _rect(page: Portal, element: Any) -> dict[str, float]:
    return dict(page.driver.execute_script(
        "const r = arguments[0].getBoundingClientRect();"
        "return {top: r.top, bottom: r.bottom, left: r.left, right: r.right,"
        " height: window.innerHeight, width: window.innerWidth,"
        " scrolled: window.scrollY};", element))


def _in_view(page: Portal, element: Any) -> bool:
    """The element is wholly inside the viewport and nothing covers its middle."""
    r = _rect(page, element)
    if not (r["top"] >= 0 and r["left"] >= 0 and r["bottom"] <= r["height"]
            and r["right"] <= r["width"]):
        return False
    return bool(page.driver.execute_script(
        "const e = arguments[0], r = e.getBoundingClientRect();"
        "const hit = document.elementFromPoint((r.left + r.right) / 2, (r.top + r.bottom) / 2);"
        "return hit !== null && (hit === e || e.contains(hit));", element))


def _shot(page: Portal, tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name}.png"
    page.driver.save_screenshot(str(path))
    return path


def _expand(page: Portal, card: Any) -> None:
    """Open a card's "Details" the way a person does: a click on its summary."""
    card.find_element(page.by.CSS_SELECTOR, "details.more > summary").click()


@pytest.mark.parametrize("viewport", [DESKTOP, NARROW], ids=["1280x900", "420px"])
def test_the_first_pending_request_is_decided_without_scrolling_in_a_busy_inbox(
        database_url: str, tmp_path: Path, viewport: tuple[int, int]) -> None:
    deployment, bank = world(database_url, turns=PAID_THEN_ASKS)
    with portal_for(deployment) as (page, c):
        runs = [start_run(c, f"Pay ACME, batch {n}") for n in range(11)]
        asked = _pending(c, len(runs))
        # Five decided (approved and rejected) and six still waiting.
        for n, request in enumerate(asked[:5]):
            r = c.post(f"/api/confirmations/{request['id']}/respond", headers=auth("alice"),
                       json={"decision": "approve" if n % 2 else "reject",
                             "reason": "a long reason for the record " * 5})
            assert r.status_code == 200, r.text

        set_viewport(page.driver, *viewport)
        page.open()
        page.sign_in("alice")
        page.until("6 waiting, 5 decided", lambda: len(page.find_all("#waiting .request")) == 6
                   and len(page.find_all("#decided .request")) == 5)
        page.until("the run history", lambda: all(
            "Already done in this run" in card.text for card in page.find_all("#waiting .request")))
        shot = _shot(page, tmp_path, f"inbox-{viewport[0]}")
        first = page.find_all("#waiting .request")[0]
        approve = first.find_element(page.by.CSS_SELECTOR, "button.approve")
        reject = first.find_element(page.by.CSS_SELECTOR, "button.reject")
        assert page.driver.execute_script("return window.scrollY") == 0
        for name, button in (("Approve", approve), ("Reject", reject)):
            assert _in_view(page, button), (
                f"{name} of the first pending request is not in the {viewport} viewport "
                f"without scrolling: {_rect(page, button)}; screenshot: {shot}")
        assert page.overflow() <= 0, f"the page scrolls sideways; screenshot: {shot}"
        assert page.driver.execute_script("return window.innerWidth") == viewport[0], (
            f"the page is wider than the screen, so a phone zooms out; screenshot: {shot}")

        # Every decided request is one line until opened, and says who decided how.
        for card in page.find_all("#decided .request"):
            line = card.find_element(page.by.CSS_SELECTOR, "summary.line")
            height = _rect(page, line)["bottom"] - _rect(page, line)["top"]
            assert height < 40, f"a decided card is {height}px tall; screenshot: {shot}"
            assert card.find_element(page.by.CSS_SELECTOR, "details.more").get_attribute(
                "open") is None
            assert "by alice via the API" in card.text
        assert "a long reason" not in page.text("#decided")
        page.driver.execute_script("document.getElementById('decided-h').scrollIntoView()")
        _shot(page, tmp_path, f"inbox-{viewport[0]}-decided")
        page.driver.execute_script("window.scrollTo(0, 0)")

        # What the same run already did, on each pending request.
        history = first.find_element(page.by.CSS_SELECTOR, ".history").text
        assert history == ("Already done in this run:\n"
                           "oa__purchase_pay amount 12,000 · vendor ACME — done"), (
            f"{history!r}; screenshot: {shot}")

        # Reason and message are there on demand, and Approve still decides the request.
        _expand(page, first)
        first.find_element(page.by.NAME, "reason").send_keys("within budget")
        _shot(page, tmp_path, f"inbox-{viewport[0]}-details")
        approve.click()
        page.until("six decided", lambda: len(page.find_all("#decided .request")) == 6)
        decided = c.get("/api/confirmations", headers=auth("alice")).json()
        assert sum(r["status"] == "approved" and r["decision"].get("reason") == "within budget"
                   for r in decided) == 1
        approved_runs = [r["run_id"] for r in decided if r["status"] == "approved"]
        for run_id in approved_runs:
            assert wait_finished(c, run_id) == "completed"
        # Each run paid 12,000 on its own; the approved ones paid 60,000 too.
        assert sorted(p["amount"] for p in bank.payments).count(60000.0) == len(approved_runs)


def test_a_rule_approved_call_reads_as_the_rule_and_an_edit_error_shows_in_view(
        database_url: str, tmp_path: Path) -> None:
    deployment, bank = world(database_url, turns=[
        _pay(60000), _pay(70000), _pay(90000), {"answer": "Paid ACME three times."}])
    with portal_for(deployment) as (page, c):
        run_id = start_run(c)
        [first] = _pending(c, 1)
        r = c.post(f"/api/confirmations/{first['id']}/respond", headers=auth("alice"), json={
            "decision": "approve",
            "remember": {"scope": "run", "when": "args.amount <= 80000"}})
        assert r.status_code == 200, r.text
        rule_id = r.json()["rule"]["id"]
        # 70,000 is approved by the rule; 90,000 is above it and asks.
        deadline = time.monotonic() + WAIT_S
        while len(bank.payments) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        third = next(q for q in _pending(c, 1) if q["id"] != first["id"])
        record = c.get(f"/api/confirmations/{third['id']}", headers=auth("alice")).json()
        assert [(call["args"]["amount"], call["approval"]["rule_id"])
                for call in record["run_history"]["calls"]] == [(60000, None), (70000, rule_id)]

        set_viewport(page.driver, *NARROW)
        page.open()
        page.sign_in("alice")
        card = page.sees("#waiting .request", f"approved by rule {rule_id}")
        shot = _shot(page, tmp_path, "rule-history")
        assert card.find_element(page.by.CSS_SELECTOR, ".history").text == (
            "Already done in this run:\n"
            "oa__purchase_pay amount 60,000 · vendor ACME — done, approved by alice\n"
            f"oa__purchase_pay amount 70,000 · vendor ACME — done, approved by rule {rule_id} "
            "(created by alice)"), f"screenshot: {shot}"

        # An edit the server refuses: the error is beside "Approve with these arguments",
        # in view, and the request stays pending.
        _expand(page, card)
        card.find_element(page.by.CSS_SELECTOR, "details.edit summary").click()
        # The JSON, kept for nested values, under the form per argument.
        card.find_element(page.by.CSS_SELECTOR, "details.raw summary").click()
        field = card.find_element(page.by.NAME, "arguments")
        field.clear()
        field.send_keys('{"amount": "lots", "vendor": "ACME"}')
        edited = card.find_element(page.by.CSS_SELECTOR, "button[value=approve-edited]")
        page.driver.execute_script("window.scrollTo(0, 0)")
        edited.click()
        error = page.sees(".request details.edit [role=alert]", "edited arguments refused")
        shot = _shot(page, tmp_path, "edit-error")
        assert _in_view(page, error), f"the edit error is off-screen: {_rect(page, error)}; " \
                                      f"screenshot: {shot}"
        gap = _rect(page, error)["top"] - _rect(page, edited)["bottom"]
        assert 0 <= gap < 40, f"the error is {gap}px from its button; screenshot: {shot}"
        assert c.get(f"/api/confirmations/{third['id']}",
                     headers=auth("alice")).json()["status"] == "pending"
        # Not JSON at all: refused in the page, shown in the same place.
        field.clear()
        field.send_keys('{"amount": 40000,')
        edited.click()
        error = page.sees(".request details.edit [role=alert]", "not valid JSON")
        assert _in_view(page, error), f"screenshot: {_shot(page, tmp_path, 'json-error')}"
        card.find_element(page.by.CSS_SELECTOR, "button.reject").click()
        assert wait_finished(c, run_id) == "completed"
        assert [p["amount"] for p in bank.payments] == [60000.0, 70000.0]

        # The run page says the rule approved the call, not a person.
        page.open(f"#/runs/{run_id}")
        page.sees(".timeline", "Run finished")
        steps = [s.text for s in page.find_all(".timeline .step-title")]
        assert f"Approved by rule {rule_id} (created by alice)" in steps, steps
        assert steps.count("Approved by alice") == 1, steps  # the first call only

        # The Rules page names the agent, as people know it.
        page.find("a[data-nav=rules]").click()
        rule = page.sees("#rules .rule", "oa__purchase_pay")
        shot = _shot(page, tmp_path, "rules")
        assert rule.find_element(page.by.CSS_SELECTOR, ".agent").text == "Purchasing agent", \
            f"screenshot: {shot}"
        assert "buyer" not in rule.find_element(page.by.CSS_SELECTOR, ".meta").text


@pytest.mark.both_databases
def test_the_run_history_of_a_request_is_shown_only_to_those_who_may_see_the_request(
        database_url: str) -> None:
    from tests.live_server import live_server

    deployment, _bank = world(database_url, turns=PAID_THEN_ASKS)
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        start_run(c)
        [request] = _pending(c, 1)
        seen = c.get(f"/api/confirmations/{request['id']}", headers=auth("bob")).json()
        [call] = seen["run_history"]["calls"]
        assert (call["tool_name"], call["args"], call["status"], call["approval"]) == (
            "oa__purchase_pay", {"amount": 12000, "vendor": "ACME"}, "ok", None)
        # Another org's member gets no request, and so no history of its run.
        other = c.get(f"/api/confirmations/{request['id']}", headers=auth("mallory"))
        assert other.status_code == 404 and "run_history" not in other.text
        assert "12000" not in other.text
