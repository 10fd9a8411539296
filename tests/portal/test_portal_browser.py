"""The portal in a real headless Chromium against a real server: what a person does with it.

Sign in, start a run, watch it wait, approve it in the inbox, see the answer; on a phone-wide
screen; with the keyboard alone; with live updates and the server's refusals shown.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

from hookgate.demo.world import demo_deployment
from hookgate.runtime.deployment import Deployment
from tests.live_server import LiveServer, live_server
from tests.portal.browser import PHONE, chromium, console_errors, find_binaries, set_viewport
from tests.portal.steps import WAIT_S, pending_request, run_status, start_run
from tests.server.demo_world import TOKENS, auth, world


class Portal:
    """The portal page in the browser, in the words a person would use."""

    def __init__(self, driver: Any, server: LiveServer) -> None:
        from selenium.webdriver.common.by import By

        self.driver = driver
        self.server = server
        self.by = By

    def open(self, route: str = "#/inbox") -> None:
        self.driver.get(f"{self.server.url}/{route}")

    def until(self, what: str, check: Callable[[], Any], timeout: float = WAIT_S) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            try:
                value = check()
            except Exception:  # the element is not there yet, or was just redrawn
                value = None
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}; the page shows:\n"
                                     f"{self.text()}")
            time.sleep(0.05)

    def find(self, css: str) -> Any:
        return self.driver.find_element(self.by.CSS_SELECTOR, css)

    def find_all(self, css: str) -> list[Any]:
        return list(self.driver.find_elements(self.by.CSS_SELECTOR, css))

    def text(self, css: str = "body") -> str:
        return str(self.find(css).text)

    def sees(self, css: str, text: str, timeout: float = WAIT_S) -> Any:
        return self.until(f"'{text}' in {css}", lambda: text in self.text(css) and self.find(css),
                          timeout)

    def sign_in(self, user: str) -> None:
        field = self.until("the sign-in form", lambda: self.find("#token"))
        field.send_keys(TOKENS[user])
        self.find("form.signin button[type=submit]").click()
        self.sees("#who", user)

    def start_run(self, message: str, agent: str = "Purchasing agent") -> None:
        """Start a run with the "Start a run" form on the Runs page."""
        from selenium.webdriver.support.ui import Select

        self.find("a[data-nav=runs]").click()
        select = self.until("the agent list", lambda: Select(self.find("#agent")))
        self.until("the agents", lambda: select.options)
        select.select_by_visible_text(agent)
        self.find("#message").send_keys(message)
        self.find("form.start button[type=submit]").click()

    def expand(self, card: Any) -> Any:
        """Open a request's "Details" (or a decided request's one line), as a person does."""
        more = card.find_element(self.by.CSS_SELECTOR, "details.more")
        if more.get_attribute("open") is None:
            more.find_element(self.by.CSS_SELECTOR, "summary").click()
        return card

    def overflow(self) -> int:
        """How many CSS pixels the page is wider than the viewport (0: no sideways scroll)."""
        return int(self.driver.execute_script(
            "return document.documentElement.scrollWidth - window.innerWidth"))

    def focused(self) -> Any:
        return self.driver.switch_to.active_element


@contextmanager
def portal_for(deployment: Deployment) -> Iterator[tuple[Portal, httpx.Client]]:
    """A live server, a fresh browser on its portal, and an API client for the same server.

    The browser leaves the portal before the server stops: its open live streams would
    otherwise hold the server's shutdown until they time out.
    """
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c, \
            chromium() as driver:
        yield Portal(driver, srv), c


def test_a_payment_is_approved_in_the_portal_and_the_run_reaches_its_answer(
        database_url: str) -> None:
    deployment, bank = world(database_url)
    with portal_for(deployment) as (page, c):
        page.open()
        page.sign_in("alice")
        page.start_run("Pay ACME 60000 for the servers")

        # The run page shows the call and the wait for a person, live.
        page.until("the run page", lambda: re.search(r"#/runs/run_\w+$", page.driver.current_url))
        page.sees(".timeline", "Waiting for approval")
        page.sees("h1 .badge", "Waiting for approval")
        assert "Pay ACME 60000 for the servers" in page.text(".facts")
        assert page.find(".step.wait a[href^='#/confirmations/']")
        assert bank.payments == []

        page.find("a[data-nav=inbox]").click()
        card = page.sees("#waiting .request", "oa__purchase_pay")
        args = dict(zip([e.text for e in card.find_elements(page.by.CSS_SELECTOR, ".args dt")],
                        [e.text for e in card.find_elements(page.by.CSS_SELECTOR, ".args dd")],
                        strict=True))
        # The exact value, and beside it the number as people write it.
        assert args == {"amount": "60000 (60,000)", "vendor": "ACME"}
        assert "Purchasing agent" in card.text and "requested by alice" in card.text
        page.expand(card)
        context = card.find_element(page.by.CSS_SELECTOR, ".context").text
        assert "User asked\nPay ACME 60000 for the servers" in context
        assert "What the tool does\nPay a vendor." in context
        assert ("Why approval is needed\nthe tool's requires_confirmation predicate matched "
                "these arguments") in context
        assert re.search(r"\d+m \d\ds", page.text("#waiting .countdown"))
        assert page.text("#pending-count").split() == ["1", "waiting"]

        page.find("#waiting textarea[name=reason]").send_keys("within budget")
        page.find("#waiting button.approve").click()
        # Decided, the card moves at once from "Waiting" to "Recently decided".
        decided = page.sees("#decided .request", "Approved by alice via the web inbox")
        assert "within budget" not in decided.text  # one line until opened
        assert "within budget" in page.expand(decided).text
        assert page.find_all("#waiting .request") == []
        assert "Nothing is waiting" in page.text("main")
        page.until("the count to clear", lambda: not page.find("#pending-count").is_displayed())

        decided.find_element(page.by.LINK_TEXT, "Open the run").click()
        page.sees(".step.answer", "Paid ACME.")
        page.sees("h1 .badge", "Completed")
        timeline = page.text(".timeline")
        assert "Approved by alice" in timeline and "paid 60000 to ACME" in timeline
        assert bank.payments == [{"amount": 60000.0, "vendor": "ACME"}]
        record = c.get("/api/confirmations", headers=auth("alice")).json()[0]
        assert record["decision"]["reason"] == "within budget"
        assert console_errors(page.driver) == []


def test_pages_fit_a_phone_screen_without_sideways_scrolling(
        database_url: str) -> None:
    long_vendor = "ACME-Intergalactic-Procurement-Holdings-" * 4
    deployment, _ = world(database_url, turns=[
        {"tool_calls": [{"name": "oa__purchase_pay",
                         "args": {"amount": 60000, "vendor": long_vendor}}]},
        {"answer": "Paid " + long_vendor},
    ])
    with portal_for(deployment) as (page, c):
        set_viewport(page.driver, *PHONE)
        page.open()
        page.sign_in("alice")
        assert page.driver.execute_script("return window.innerWidth") == PHONE[0]
        assert page.overflow() == 0

        run_id = start_run(c, "x" * 300)
        page.sees("#waiting .request", long_vendor)
        assert page.overflow() == 0, "the inbox scrolls sideways at 375px"

        page.open(f"#/runs/{run_id}")
        page.sees(".timeline", "Waiting for approval")
        assert page.overflow() == 0, "the run page scrolls sideways at 375px"
        page.find("#run-waiting button.approve").click()
        page.sees(".step.answer", "Paid ")
        assert page.overflow() == 0

        page.open("#/runs")
        page.until("the runs list", lambda: page.find_all(".runs li"))
        assert page.overflow() == 0
        assert console_errors(page.driver) == []


def test_a_request_linked_from_a_chat_card_is_approved_with_the_keyboard_alone(
        database_url: str) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    deployment, bank = world(database_url)
    with portal_for(deployment) as (page, c):
        run_id = start_run(c)
        request = pending_request(c)
        # The link a channel card carries: <public_url>/#/confirmations/<id>.
        page.open(f"#/confirmations/{request['id']}")
        token = page.until("the sign-in form", lambda: page.find("#token"))
        assert page.focused() == token
        token.send_keys(TOKENS["alice"], Keys.ENTER)
        page.sees(".request", "oa__purchase_pay")

        keys = ActionChains(page.driver)
        for _ in range(40):
            if page.focused().get_attribute("class") == "button approve":
                break
            keys.send_keys(Keys.TAB).perform()
        approve = page.focused()
        assert approve.text == "Approve", "Tab never reached the Approve button"
        outline = page.driver.execute_script(
            "return getComputedStyle(document.activeElement).outlineStyle")
        assert outline != "none", "the focused button shows no focus ring"
        keys.send_keys(Keys.ENTER).perform()

        page.sees(".request", "Approved by alice")
        # Focus stays on the request that was just decided, not lost to the page's top.
        assert page.focused().tag_name == "h3"
        page.until("the run to finish", lambda: run_status(c, run_id) == "completed")
        assert bank.payments == [{"amount": 60000.0, "vendor": "ACME"}]

        page.find("#sign-out").click()
        page.until("the sign-in form", lambda: page.find("#token"))
        assert page.driver.execute_script("return localStorage.length") == 0
        assert console_errors(page.driver) == []


def test_the_inbox_updates_live_and_shows_arguments_as_plain_text(
        database_url: str) -> None:
    markup = '<img src=x onerror="window.pwned=1">'
    deployment, bank = world(database_url, scope="org_members", turns=[
        {"tool_calls": [{"name": "oa__purchase_pay",
                         "args": {"amount": 75000, "vendor": markup}}]},
        {"answer": "done"},
    ])
    with portal_for(deployment) as (page, c):
        page.open()
        page.sign_in("bob")
        page.sees("#waiting + *, main", "Nothing is waiting")

        start_run(c)  # alice starts a run elsewhere: the request appears without a reload
        card = page.sees("#waiting .request", "75000")
        assert markup in card.text
        assert page.find_all("main img") == []
        assert page.driver.execute_script("return window.pwned") is None

        request = pending_request(c)
        c.post(f"/api/confirmations/{request['id']}/respond",
               json={"decision": "reject", "reason": "unknown vendor"}, headers=auth("olivia"))
        decided = page.sees("#decided .request", "Rejected by olivia via the API")
        assert "unknown vendor" in page.expand(decided).text
        assert page.find_all("#waiting .request") == []
        assert bank.payments == []
        assert console_errors(page.driver) == []


def test_a_request_decided_elsewhere_first_shows_who_decided_it(
        database_url: str) -> None:
    deployment, bank = world(database_url, scope="org_members")
    with portal_for(deployment) as (page, c):
        start_run(c)
        request = pending_request(c)
        # Hold back the live stream so this page still shows the request as pending when
        # someone else decides it: the click must then be refused and say by whom.
        page.driver.execute_cdp_cmd("Network.enable", {})
        page.driver.execute_cdp_cmd("Network.setBlockedURLs",
                                {"urls": ["*/api/confirmations/events*"]})
        page.open()
        page.sign_in("bob")
        page.sees("#waiting .request", "oa__purchase_pay")
        assert c.post(f"/api/confirmations/{request['id']}/respond",
                      json={"decision": "approve"}, headers=auth("alice")).status_code == 200

        page.find("#waiting button.reject").click()
        alert = page.sees("#decided .request [role=alert]", "already decided: approved by alice")
        assert alert.is_displayed()
        page.sees("#decided .request", "Approved by alice via the API")
        assert page.find_all("#waiting .request") == []
        page.until("the run to finish", lambda: len(bank.payments) == 1)


def test_the_waiting_count_counts_only_requests_the_viewer_may_decide(
        database_url: str) -> None:
    # Scope "initiator": only alice, who starts the run, may decide its request.
    deployment, _ = world(database_url)
    with portal_for(deployment) as (page, c):
        page.open()
        page.sign_in("bob")
        start_run(c)
        card = page.sees("#waiting .request", "oa__purchase_pay")
        assert "You cannot decide this request" in card.text
        assert not page.find("#pending-count").is_displayed()
        page.driver.refresh()  # the count after a fresh load says the same
        page.sees("#waiting .request", "oa__purchase_pay")
        assert not page.find("#pending-count").is_displayed()

        page.find("#sign-out").click()
        page.sign_in("alice")
        page.until("alice's count", lambda: page.text("#pending-count").split() == ["1", "waiting"])
        assert console_errors(page.driver) == []


def test_a_rejected_payment_in_the_demo_shows_why_and_a_run_that_did_not_pay(
        database_url: str, tmp_path: Any) -> None:
    demo, token = demo_deployment(tmp_path, "http://127.0.0.1")
    demo = dataclasses.replace(demo, database_url=database_url)
    with portal_for(demo) as (page, _):
        page.open()
        page.until("the sign-in form", lambda: page.find("#token")).send_keys(token)
        page.find("form.signin button[type=submit]").click()
        page.sees("#who", "Alice")

        page.start_run("Pay ACME 60,000 for the servers")
        page.sees(".timeline", "Waiting for approval")

        page.find("a[data-nav=inbox]").click()
        card = page.expand(page.sees("#waiting .request", "oa__purchase_pay"))
        context = card.find_element(page.by.CSS_SELECTOR, ".context").text
        assert "User asked\nPay ACME 60,000 for the servers" in context
        assert "What the tool does\nPay a vendor through the OA system." in context
        assert "the tool's rule: payments above 50,000 need a person's approval" in context
        assert "60000 (60,000)" in card.text
        page.find("#waiting textarea[name=reason]").send_keys("not budgeted")
        page.find("#waiting button.reject").click()
        decided = page.expand(page.sees("#decided .request", "Rejected by alice via the web inbox"))

        decided.find_element(page.by.LINK_TEXT, "Open the run").click()
        answer = page.sees(".step.answer", "Did not pay ACME 60,000")
        assert "rejected by alice" in answer.text and "not budgeted" in answer.text
        assert "will" not in answer.text and "Paid ACME 60,000" not in answer.text
        page.sees("h1 .badge", "Completed; a call was not approved")
        assert "bad" in page.find("h1 .badge").get_attribute("class")
        assert "Completed; a call was not approved" in page.text(".step.done, .step.bad:last-child")

        page.find("a[data-nav=runs]").click()
        page.sees(".runs li", "Completed; a call was not approved")
        assert console_errors(page.driver) == []


def test_a_bad_token_is_refused_with_a_message(database_url: str) -> None:
    deployment, _ = world(database_url)
    with portal_for(deployment) as (page, _):
        page.open()
        page.until("the sign-in form", lambda: page.find("#token")).send_keys("not-a-token")
        page.find("form.signin button[type=submit]").click()
        page.sees("form.signin [role=alert]", "That token is not valid.")
        assert page.driver.execute_script("return localStorage.length") == 0
        assert page.find("#topbar").is_displayed() is False


def test_without_a_browser_the_tests_skip_outside_ci_and_fail_in_ci(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="chromium and chromedriver not found"):
        find_binaries()
    monkeypatch.setenv("CI", "1")
    with pytest.raises(pytest.fail.Exception, match="'chromium' and 'chromium-driver'"):
        find_binaries()


def test_the_inbox_shows_a_request_nobody_can_reach_then_its_reminder_and_escalation(
        database_url: str) -> None:
    from hookgate.escalation_policy import EscalationPolicy

    deployment, _ = world(database_url, scope="agent_owner")
    agent = dataclasses.replace(
        deployment.agents["buyer"], owner_user_id=None,
        followup=EscalationPolicy(remind_after_s=1.0, escalate_after_s=4.0,
                                escalate_to=("bob",)))
    deployment = dataclasses.replace(deployment, agents={"buyer": agent})
    with portal_for(deployment) as (page, c):
        page.open()
        page.sign_in("bob")
        run_id = start_run(c)  # alice's run
        card = "#waiting article.request"
        page.sees(f"{card} .badge.unreachable", "Nobody reachable")
        page.sees(card, "You cannot decide this request")
        assert not page.find("#pending-count").is_displayed()
        page.sees(f"{card} .alert.unreachable",
                  "No approver can be reached: no approver: agent 'buyer' has no owner")
        # Live: the reminder, then the escalation to bob, which clears the flag.
        page.sees(f"{card} .followup", "Reminded 1 time")
        page.sees(f"{card} .followup", "escalated to bob")
        page.until("the flag to clear", lambda: not page.find_all(f"{card} .unreachable"))
        # bob became an approver: the form and the waiting count appear without a reload.
        page.until("the decision form", lambda: page.find(f"{card} form.decide"))
        page.sees("#pending-count", "1")
        page.find(f"{card} button.approve").click()
        page.sees("#decided", "Approved")
        page.until("the run to complete", lambda: run_status(c, run_id) == "completed")
        assert console_errors(page.driver) == []
