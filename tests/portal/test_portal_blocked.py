"""A run in which a hook blocked a call completed, but not as asked: the HTTP API's
``outcome`` says ``call_blocked`` (as `hookgate run` exits 1 for it), and the portal shows
"Completed; a call was blocked" on the run page and in the runs list, live and on reload.
"""

from __future__ import annotations

import dataclasses

import httpx
import pytest

from hookgate.runtime.deployment import Deployment, OrgSpec
from tests.live_server import live_server
from tests.portal.steps import start_run, wait_finished
from tests.server.demo_world import auth, world

#: A small payment (no approval needed) and a read-only org: readonly_guard blocks it.
SMALL_PAYMENT = [
    {"tool_calls": [{"name": "oa__purchase_pay", "args": {"amount": 100, "vendor": "ACME"}}]},
    {"answer": "I could not pay ACME."},
]


def read_only_world(database_url: str, *, read_only: bool = True) -> Deployment:
    deployment, _ = world(database_url, turns=SMALL_PAYMENT)
    agent = deployment.agents["buyer"]
    agent.model_config_json = {"hooks": {"class_hooks": ["readonly_guard"]}}
    orgs = [OrgSpec(o.id, o.name, read_only if o.id == "acme" else o.read_only)
            for o in deployment.orgs]
    return dataclasses.replace(deployment, orgs=orgs)


@pytest.mark.both_databases
@pytest.mark.parametrize("read_only", [True, False])
def test_the_api_says_a_completed_run_had_a_call_blocked(database_url: str,
                                                          read_only: bool) -> None:
    with live_server(read_only_world(database_url, read_only=read_only)) as srv, \
            httpx.Client(base_url=srv.url, timeout=20) as c:
        run_id = start_run(c)
        assert wait_finished(c, run_id) == "completed"
        run = c.get(f"/api/runs/{run_id}", headers=auth("alice")).json()
        [listed] = [r for r in c.get("/api/runs", headers=auth("alice")).json()
                    if r["run_id"] == run_id]

    expected = "call_blocked" if read_only else "completed"
    assert (run["status"], run["outcome"]) == ("completed", expected)
    assert (listed["status"], listed["outcome"]) == ("completed", expected)
    assert run["not_approved"] == []


def test_the_portal_shows_completed_with_a_blocked_call(database_url: str) -> None:
    from tests.portal.browser import console_errors
    from tests.portal.test_portal_browser import portal_for

    with portal_for(read_only_world(database_url)) as (page, _):
        page.open()
        page.sign_in("alice")
        page.start_run("pay ACME 100")
        page.sees("h1 .badge", "Completed; a call was blocked")  # live, from the events
        assert "bad" in page.find("h1 .badge").get_attribute("class")
        page.driver.refresh()  # and from the run's outcome
        page.sees("h1 .badge", "Completed; a call was blocked")
        page.find("a[data-nav=runs]").click()
        page.sees(".runs li", "Completed; a call was blocked")
        assert console_errors(page.driver) == []
