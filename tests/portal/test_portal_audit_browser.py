"""The portal's audit page in a real headless Chromium: the org's rows with who decided each
call (a person, linked to the request page, or a standing rule), the wait and the tool's
time; the filters narrow the rows, and another org's user sees none of them."""

from __future__ import annotations

import pytest

from tests.portal.browser import console_errors
from tests.portal.test_portal_browser import portal_for
from tests.server.test_audit_decisions import audited_world, decide_the_four_calls


@pytest.mark.both_databases
def test_the_audit_page_shows_who_decided_each_call_and_filters(database_url: str) -> None:
    deployment, bank = audited_world(database_url)
    with portal_for(deployment) as (page, c):
        ids = decide_the_four_calls(c, bank)
        page.open()
        page.sign_in("alice")
        page.find("a[data-nav=audit]").click()
        page.sees("#audit tbody", "blocked by approval_gate")
        rows = {r.get_attribute("data-call-id"): r for r in page.find_all("#audit tbody tr")}
        assert set(rows) == {"asked", "ruled", "small", "refused"}

        asked = rows["asked"]
        approver = asked.find_element(page.by.CSS_SELECTOR, ".decided-by a")
        assert approver.text == "alice (approved)"
        assert approver.get_attribute("href").endswith(f"#/confirmations/{ids['asked']}")
        assert asked.find_element(page.by.CSS_SELECTOR, ".request a").text == ids["asked"]
        assert asked.find_element(page.by.CSS_SELECTOR, ".wait").text.endswith(" s")
        assert "ok" in asked.text and "oa__purchase_pay" in asked.text
        ruled = rows["ruled"]
        assert ruled.find_element(page.by.CSS_SELECTOR, ".decided-by").text == (
            f"rule {ids['rule']} (created by alice) (approved)")
        assert ruled.find_elements(page.by.CSS_SELECTOR, ".request a") == []
        assert rows["small"].find_element(page.by.CSS_SELECTOR, ".decided-by").text == "–"
        # Who rejected a call is named for what they did, not as its "approver".
        assert rows["refused"].find_element(page.by.CSS_SELECTOR, ".decided-by").text == (
            "alice (rejected)")
        headers = [th.text for th in page.find_all("#audit thead th")]
        assert "Decided by" in headers and "Approver" not in headers and "Session" in headers
        # Runs started without a conversation id name no session.
        assert {r.find_element(page.by.CSS_SELECTOR, ".session").text
                for r in rows.values()} == {"–"}
        # No sub-agent made these calls: no delegation to show.
        assert {r.find_element(page.by.CSS_SELECTOR, ".delegation").text
                for r in rows.values()} == {"–"}
        assert "blocked by approval_gate" in rows["refused"].text

        from selenium.webdriver.support.ui import Select

        Select(page.find("#audit-outcome")).select_by_value("blocked")
        page.find("form.filters button[type=submit]").click()
        page.until("only the blocked row", lambda: [
            r.get_attribute("data-call-id") for r in page.find_all("#audit tbody tr")
        ] == ["refused"])
        page.find("#audit-tool").send_keys("oa__purchase_pay\u200b")  # a look-alike name
        page.find("form.filters button[type=submit]").click()
        page.sees("main", "No audit rows match.")
        page.find("#audit-tool").clear()
        page.find("#audit-session").send_keys("no-such-session")
        page.find("form.filters button[type=submit]").click()
        page.sees("main", "No audit rows match.")

        page.find("a[data-nav=rules]").click()
        page.find("a[data-nav=audit]").click()  # a fresh page: no filters
        link = page.until("the request link", lambda: page.find(
            "#audit tr[data-call-id=asked] .request a"))
        link.click()
        page.sees("main", "oa__purchase_pay")
        assert page.driver.current_url.endswith(f"#/confirmations/{ids['asked']}")
        assert console_errors(page.driver) == []

        page.find("#sign-out").click()
        page.sign_in("mallory")
        page.open("#/audit")
        page.sees("main", "No audit rows match.")
