"""Cedar reads a call's provenance: ``context.untrusted`` and ``context.untrusted_args``
decide a call whose argument came only from an untrusted result, and leave alone the same
call with the user's own value."""

from __future__ import annotations

from pathlib import Path

import pytest

from hookgate.storage.database import Database
from tests.policies.fixtures import pdb, policy_db_url
from tests.policies.world import PAID, agent, call, run, tool_events, write_policies
from tests.provenance.test_lazy import FactReads, fact_reads

__all__ = ["fact_reads", "pdb", "policy_db_url"]

POLICIES = """\
@id("tools-allowed")
permit(principal, action in Action::"call_tool", resource);

@id("untrusted-vendor")
@reason("the vendor came only from untrusted content")
forbid(principal, action == Action::"oa__purchase_pay", resource)
when { context.untrusted && context.untrusted_args.contains("vendor") };
"""


@pytest.mark.parametrize("vendor, ran", [("GLOBEX", False), ("ACME", True)])
async def test_a_policy_forbids_a_payment_to_a_vendor_only_an_untrusted_result_named(
        pdb: Database, tmp_path: Path, vendor: str, ran: bool) -> None:
    folder = write_policies(tmp_path / "policies", POLICIES)
    buyer = agent(folder)
    # The CRM's records are typed in by customers: the agent declares them untrusted.
    buyer.model_config_json["hooks"]["untrusted_output"] = ["crm__lookup"]
    PAID.clear()
    result = await run(pdb, buyer, call("crm__lookup", customer="Globex"),
                       call("oa__purchase_pay", amount=10, vendor=vendor),
                       message="look our new customer up, then pay ACME 10")
    lookup, pay = tool_events(result)
    assert lookup["status"] == "ok"
    if ran:
        assert pay["status"] == "ok" and PAID == [{"amount": 10, "vendor": "ACME"}]
    else:
        assert pay["status"] == "blocked" and PAID == []
        assert "deny by untrusted-vendor (the vendor came only from untrusted content)" in \
            pay["observation"]


@pytest.mark.parametrize("policies, reads", [
    (POLICIES, 1),
    # A policy set that does not name context.untrusted(_args): the facts are not read.
    ('@id("tools-allowed")\npermit(principal, action in Action::"call_tool", resource);\n',
     0),
])
async def test_the_facts_are_read_only_for_a_policy_set_that_names_provenance(
        pdb: Database, tmp_path: Path, policies: str, reads: int,
        fact_reads: FactReads) -> None:
    buyer = agent(write_policies(tmp_path / "policies", policies))
    buyer.model_config_json["hooks"]["untrusted_output"] = ["crm__lookup"]
    await run(pdb, buyer, call("crm__lookup", customer="Globex"),
              call("oa__purchase_pay", amount=10, vendor="ACME"),
              message="look our new customer up, then pay ACME 10")
    assert fact_reads.count == 2 * reads  # one per call
