"""The portal in a real headless Chromium signing in through a real OpenID Connect provider
on loopback: the provider's sign-in page, back to the inbox, approve, sign out; the session's
cookie is HttpOnly and, after sign-out, signs in as nobody."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from tests.oidc.provider import mock_provider
from tests.oidc.world import ALICE_ORG, pending_request, serving
from tests.portal.browser import chromium, console_errors
from tests.portal.steps import WAIT_S
from tests.server.demo_world import auth

pytestmark = pytest.mark.both_databases


def _until(what: str, check: Any, driver: Any) -> Any:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        try:
            value = check()
        except Exception:  # not there yet, or just redrawn
            value = None
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}; the page shows:\n"
                         f"{driver.find_element('tag name', 'body').text}")


def test_sign_in_approve_and_sign_out_in_a_browser(database_url: str) -> None:
    from selenium.webdriver.common.by import By

    with mock_provider() as idp, serving(database_url, idp) as (srv, bank), \
            httpx.Client(base_url=srv.url, timeout=20) as c, chromium() as driver:
        idp.set_user("carol-sub", ALICE_ORG)
        request = pending_request(c)
        driver.get(f"{srv.url}/#/inbox")
        _until("the provider's sign-in link",
               lambda: driver.find_element(By.ID, "oidc-sign-in"), driver).click()
        # The provider's own page: the person names who they are there.
        field = _until("the provider's form",
                       lambda: driver.find_element(By.CSS_SELECTOR, "input[name=sub]"), driver)
        assert driver.current_url.startswith(idp.url)
        field.send_keys("carol-sub\n")
        _until("the inbox, signed in", lambda: "Carol" in driver.find_element(
            By.ID, "who").text, driver)
        assert driver.current_url.startswith(srv.url)
        cookie = next(k for k in driver.get_cookies() if k["name"] == "hookgate_session")
        assert cookie["httpOnly"] is True and cookie["sameSite"] == "Lax"
        # The page's scripts cannot read the session.
        assert "hookgate_session" not in driver.execute_script("return document.cookie")

        card = _until("the request", lambda: driver.find_element(
            By.CSS_SELECTOR, "#waiting .request"), driver)
        assert "oa__purchase_pay" in card.text
        card.find_element(By.CSS_SELECTOR, "button.approve").click()
        _until("the decision", lambda: "Approved by" in driver.find_element(
            By.CSS_SELECTOR, "#decided .request").text, driver)
        deadline = time.monotonic() + WAIT_S
        while not bank.payments and time.monotonic() < deadline:
            time.sleep(0.05)
        assert bank.payments == [{"amount": 60000, "vendor": "ACME"}]
        shown = c.get(f"/api/confirmations/{request['id']}", headers=auth("alice")).json()
        assert shown["decision"]["channel_identity"] == f"oidc:{idp.url}#carol-sub"

        driver.find_element(By.ID, "sign-out").click()
        _until("the sign-in page again",
               lambda: driver.find_element(By.ID, "oidc-sign-in"), driver)
        with httpx.Client(base_url=srv.url, timeout=20,
                          cookies={"hookgate_session": cookie["value"]}) as replay:
            def ended() -> bool:
                return replay.get("/auth/session").json() == {"signed_in": False, "oidc": True}

            _until("the session to end at the server", ended, driver)
            assert replay.get("/api/confirmations").status_code == 401
        # The portal's own errors (the provider's page, a favicon and a stylesheet from a
        # CDN this machine cannot reach, is not the portal).
        assert [e for e in console_errors(driver) if e.startswith(srv.url)] == []
