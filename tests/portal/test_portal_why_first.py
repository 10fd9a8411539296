"""The inbox shows why before you decide, in a real headless Chromium against a real
`hookgate serve` process: a pending request shows why a person is asked, what the user asked
and what the tool does without a click; "approve with edits" is a form per argument typed
from the tool's parameters (the JSON kept for nested values), and the edit made in the form
is what the approval carries and what runs; a run waiting for approval shows its card first.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.instances import Instance
from tests.portal.browser import chromium, console_errors
from tests.portal.steps import WAIT_S, pending_request, start_run, wait_finished
from tests.portal.test_portal_browser import Portal
from tests.server.demo_world import TOKENS, auth

MESSAGE = "Send Initech the deposit for the server racks, 2,500 in two batches."
ASKED = {"amount": 2500, "vendor": "Initech", "express": False, "batches": 2,
         "tags": ["racks", "q4"]}

CONFIG = """
database: sqlite+aiosqlite:///{db}
orgs: [{{id: acme, name: ACME}}]
users:
  - {{id: alice, org: acme, admin: true, token: {token}}}
tools: [tests.portal.typed_tools:bank__transfer]
models:
  script:
    type: scripted
    turns:
      - tool_calls: [{{name: bank__transfer, id: t1, args: {args}}}]
      - answer: sent
agents:
  - id: buyer
    name: Buyer
    org: acme
    owner: alice
    model: script
    tools: [bank__transfer]
    confirmation_mode: inline_only
"""


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, sqlite_template: Path
          ) -> Iterator[tuple[Instance, httpx.Client, Path]]:
    """`hookgate serve` on a config with the typed tool, an API client and the tool's ledger
    file, for the module (one start instead of one per test: each test starts its own run
    and reads the ledger lines its run added)."""
    tmp_path = tmp_path_factory.mktemp("why-first")
    ledger = tmp_path / "ledger.jsonl"
    config = tmp_path / "hookgate.yaml"
    shutil.copyfile(sqlite_template, tmp_path / "hookgate.db")  # at the head: no migrating
    config.write_text(CONFIG.format(db=tmp_path / "hookgate.db", token=TOKENS["alice"],
                                    args=json.dumps(ASKED)))
    server = Instance("serve", config, tmp_path, env={"HOOKGATE_TEST_LEDGER": str(ledger)})
    server.spawn()
    try:
        server.wait_up()
        with httpx.Client(base_url=server.url, timeout=20) as c:
            yield server, c, ledger
    finally:
        server.stop()


@contextmanager
def served(world: tuple[Instance, httpx.Client, Path]
           ) -> Iterator[tuple[Portal, httpx.Client, Callable[[], list[dict[str, Any]]]]]:
    """A browser on the module's server, its API client, and what the tool wrote since."""
    server, c, ledger = world
    before = len(_lines(ledger))
    with chromium() as driver:
        yield Portal(driver, server), c, lambda: _ledger(ledger, before)


def _lines(ledger: Path) -> list[str]:
    return ledger.read_text().splitlines() if ledger.exists() else []


def _ledger(ledger: Path, before: int) -> list[dict[str, Any]]:
    """The ledger's lines after its first ``before``, once there are any."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        added = [line for line in _lines(ledger)[before:] if line.strip()]
        if added:
            return [json.loads(line) for line in added]
        time.sleep(0.05)
    return []


def _field(card: Any, page: Portal, name: str) -> Any:
    return card.find_element(page.by.CSS_SELECTOR, f".arg-fields [data-arg={name}]")


def test_a_pending_card_shows_why_and_the_edit_form_is_typed_and_what_is_approved(
        world: tuple[Instance, httpx.Client, Path]) -> None:
    with served(world) as (page, c, paid):
        run_id = start_run(c, MESSAGE)
        request = pending_request(c)
        # The API gives the tool's parameters to whoever may edit.
        assert set(request["parameters"]["properties"]) == set(ASKED)

        page.open()
        page.sign_in("alice")
        card = page.sees("#waiting .request", "bank__transfer")
        # Without a click: why a person is asked, what the user asked, what the tool does.
        context = card.find_element(page.by.CSS_SELECTOR, ".context")
        assert context.is_displayed()
        for words in ("Why approval is needed", "transfers above 1,000 need a person's approval",
                      "User asked", MESSAGE,
                      "What the tool does", "Transfer money to a supplier's account."):
            assert words in context.text, (words, context.text)
        assert not card.find_elements(page.by.CSS_SELECTOR, "details:not([open]) .context")

        # The edit form: one input per argument, typed from the tool's schema.
        page.expand(card)
        card.find_element(page.by.CSS_SELECTOR, "details.edit summary").click()
        amount, vendor = _field(card, page, "amount"), _field(card, page, "vendor")
        express, batches = _field(card, page, "express"), _field(card, page, "batches")
        assert (amount.get_attribute("type"), amount.get_attribute("value")) == ("number", "2500")
        assert (batches.get_attribute("type"), batches.get_attribute("step")) == ("number", "1")
        assert (vendor.get_attribute("type"), vendor.get_attribute("value")) == ("text", "Initech")
        assert express.get_attribute("type") == "checkbox" and not express.is_selected()
        # The nested value has no field: it is edited in the JSON, which says so.
        assert not card.find_elements(page.by.CSS_SELECTOR, ".arg-fields [data-arg=tags]")
        assert "Edit tags as JSON below." in card.text

        amount.clear()
        amount.send_keys("1800")
        vendor.clear()
        vendor.send_keys("Initech Ltd")
        express.click()
        batches.clear()
        batches.send_keys("3")
        # The JSON fallback follows the form, and an edit there shows in the form too.
        card.find_element(page.by.CSS_SELECTOR, "details.raw summary").click()
        raw = card.find_element(page.by.CSS_SELECTOR, "textarea[name=arguments]")
        assert json.loads(raw.get_attribute("value")) == {
            "amount": 1800, "vendor": "Initech Ltd", "express": True, "batches": 3,
            "tags": ["racks", "q4"]}
        raw.clear()
        raw.send_keys(json.dumps({"amount": 1800, "vendor": "Initech Ltd", "express": True,
                                  "batches": 4, "tags": ["racks"]}))
        assert _field(card, page, "batches").get_attribute("value") == "4"

        card.find_element(page.by.CSS_SELECTOR, "button[value=approve-edited]").click()
        page.sees("#decided .request", "Approved by alice")
        assert wait_finished(c, run_id) == "completed"
        edited = {"amount": 1800.0, "vendor": "Initech Ltd", "express": True, "batches": 4,
                  "tags": ["racks"]}
        record = c.get(f"/api/confirmations/{request['id']}", headers=auth("alice")).json()
        assert record["payload"]["edited_args"] == edited
        assert paid() == [edited]
        assert console_errors(page.driver) == []


def test_a_waiting_run_shows_its_approval_card_first(
        world: tuple[Instance, httpx.Client, Path]) -> None:
    with served(world) as (page, c, paid):
        run_id = start_run(c, MESSAGE)
        request = pending_request(c)
        page.open()
        page.sign_in("alice")
        page.open(f"#/runs/{run_id}")
        card = page.sees("#main .request", "bank__transfer")
        assert card.get_attribute("data-request-id") == request["id"]
        # The first thing under the heading, and its Approve within the first screen.
        first = page.driver.execute_script(
            "const h = document.querySelector('#main > h1');"
            "return h.nextElementSibling.querySelector('.request');")
        assert first == card, page.text()
        approve = card.find_element(page.by.CSS_SELECTOR, "button.approve")
        assert page.driver.execute_script(
            "const r = arguments[0].getBoundingClientRect();"
            "return window.scrollY === 0 && r.bottom <= window.innerHeight;", approve)
        assert "User asked" in card.text and "Why approval is needed" in card.text

        approve.click()
        assert wait_finished(c, run_id) == "completed"
        page.sees(".timeline", "Run finished")
        page.until("the card gone", lambda: not page.find_all("#run-waiting .request"))
        assert paid() == [{**ASKED, "amount": 2500.0}]
