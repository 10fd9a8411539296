"""A limit written as a Dogwood policy is read into the very declaration a native limit
gives (one parser, one counting path): each supported form admits exactly what its native
twin admits, on SQLite and PostgreSQL; a construct outside the subset is refused at load in
one line that names it."""

from __future__ import annotations

import random
import re
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from hookgate.catalog.build import build_registry
from hookgate.catalog.builtin.session_limits import SessionLimits, approved_key, parse_limit
from hookgate.hooks.errors import HookBuildError
from hookgate.hooks.model import HookContext, HookPoint
from hookgate.hooks.services import HookServices
from hookgate.storage.database import Database
from hookgate.storage.session_limits import LimitClaims
from tests.hooks_builtin.world import OA, agent, call, run, tool_events

PAY = 'Action::"oa__purchase_pay"'
SCOPE = f"forbid(principal, action == {PAY}, resource)"


def summed(window: str, pin: str, cap: int) -> str:
    return f"""@id("spend") {SCOPE}
when temporal {{
    exists (total: Long). (
        (sum a for (a: Long), (t: Timepoint). where (
            formerly within {window} ({PAY}::request{{ input.amount: a, {pin} }} && tp(t))
        )) == total && total > {cap}
    )
}};"""


#: (native declaration, the same limit in Dogwood).
FORMS: dict[str, tuple[dict[str, Any], str]] = {
    "sum per user": (
        {"tools": ["oa__purchase_pay"], "per": "user", "window": "1h", "sum": "amount",
         "max": 5000},
        summed("1h", "callerPrincipal: principal", 5000)),
    "sum per org": (
        {"tools": ["oa__purchase_pay"], "per": "org", "window": "2h", "sum": "amount",
         "max": 7000},
        summed("2h", "org: context.org", 7000)),
    "count per session, >=": (
        {"tools": ["oa__purchase_pay"], "per": "session", "window": "30m", "count": 2},
        f"""{SCOPE} when temporal {{
            (count for (t: Timepoint). where
                formerly within 30m ({PAY}::request{{ session: context.session,
                                                      input.vendor: _ }} && tp(t))) >= 3
        }};"""),
    "count per agent, N <": (
        {"tools": ["oa__purchase_pay"], "per": "agent", "window": "1d", "count": 3},
        f"""{SCOPE} when temporal {{
            3 < count for (t: Timepoint). where (
                formerly within 1d ({PAY}::request{{ callerResource: resource }} && tp(t)))
        }}"""),
    "count per user, exists": (
        {"tools": ["oa__purchase_pay"], "per": "user", "window": "90s", "count": 4},
        f"""{SCOPE} when temporal {{
            exists (n: Long). ((count for (t: Timepoint). where (
                formerly within 90s ({PAY}::request{{ callerPrincipal: principal }}
                                     && tp(t)))) == n && n > 4)
        }};"""),
}
APPROVED = (
    {"tools": ["oa__purchase_pay"], "after_approved": "review", "approved_within": "24h"},
    f"""{SCOPE} unless temporal {{
        formerly within 24h Action::"review"::approved{{ session: context.session }}
    }};""")


@pytest.mark.parametrize("form", [*FORMS, "approved"])
def test_a_dogwood_limit_is_the_native_declaration(form: str) -> None:
    native, dogwood = FORMS.get(form, APPROVED)
    tools = {t.name: t.parameters for t in OA().tools()}
    assert parse_limit("l", {"dogwood": dogwood}, tools) == parse_limit("l", native, tools)


def limits(**specs: Any) -> dict[str, Any]:
    return {"name": "session_limits", "params": {"limits": specs}}


@pytest.mark.both_databases
@pytest.mark.parametrize("form", list(FORMS))
async def test_a_dogwood_limit_admits_exactly_what_its_native_twin_admits(
        db: Database, form: str) -> None:
    native, dogwood = FORMS[form]
    amounts = random.Random(form).choices([500, 1000, 1500, 2000, 2500], k=12)
    seen: dict[str, list[list[str]]] = {}
    for kind, spec in (("native", native), ("dogwood", {"dogwood": dogwood})):
        oa = OA()
        the_agent = agent(oa, limits(**{kind: spec}), agent_id=f"buyer-{kind}")
        seen[kind] = []
        for user, share in (("alice", amounts[:7]), ("carol", amounts[7:])):
            result = await run(db, the_agent, *[
                call("oa__purchase_pay", amount=a, vendor="ACME") for a in share], user=user)
            seen[kind].append([e["status"] for e in tool_events(result)])
    assert seen["dogwood"] == seen["native"]
    statuses = {s for run_ in seen["native"] for s in run_}
    assert statuses == {"ok", "blocked"}, seen  # the limit was reached, and not at once


@pytest.mark.both_databases
async def test_an_approval_counts_only_within_its_window(db: Database) -> None:
    claims = LimitClaims(db)
    now = time.time()
    await claims.record_approved("approved|session:s1|review", "s1|c1", now=now - 7200)
    assert await claims.approved("approved|session:s1|review")
    assert await claims.approved("approved|session:s1|review", 7200, now=now)
    assert not await claims.approved("approved|session:s1|review", 3600, now=now)


@pytest.mark.parametrize(("policy", "named"), [
    (f"{SCOPE} when temporal {{ {PAY}::request{{ session: context.session }} since "
     f"within 1h Action::\"login\"::request{{ session: context.session }} }};", "'since'"),
    (f"{SCOPE} when temporal {{ previous within 1h {PAY}::request{{ }} }};", "'previous'"),
    (f"{SCOPE} when temporal {{ !{PAY}::request{{ }} }};", "negation '!'"),
    (f"permit(principal, action == {PAY}, resource) when temporal {{ formerly within 1h "
     "Action::\"review\"::approved{ session: context.session } };", "'permit'"),
    (summed("1h", "callerPrincipal: principal", 5000).replace("::request", "::response"),
     "counting ::response events"),
    (summed("1h", "input.vendor: \"ACME\"", 5000), 'the field pattern input.vendor: "ACME"'),
    (summed("1h", "input.vendor: _", 5000), "without exactly one of callerPrincipal"),
    (summed("1h", "callerPrincipal: principal, callerResource: resource", 5000),
     "without exactly one of callerPrincipal"),
    (summed("1h", "callerPrincipal: principal", 5000).replace(
        f"formerly within 1h ({PAY}", "formerly within 1h (Action::\"login\""),
     "counting calls of 'login' to decide on 'oa__purchase_pay'"),
    (summed("1h", "callerPrincipal: principal", 5000).replace(", (t: Timepoint)", ""),
     "an aggregate without one (t: Timepoint) binder"),
    (summed("1h", "callerPrincipal: principal", 5000).replace("total > 5000",
                                                               "total >= 5000"),
     "a sum compared with '>='"),
    (summed("1h", "callerPrincipal: principal", 5000).replace("total > 5000",
                                                               "total < 5000"),
     "the comparison '<'"),
    (f"{SCOPE} when temporal {{ exists (n: Long). ((count for (u: String), (t: Timepoint). "
     f"where (formerly within 1h ({PAY}::request{{ input.vendor: u, callerPrincipal: "
     "principal } && tp(t)))) == n && n > 2) };", "a count of distinct values"),
    (summed("1h", "callerPrincipal: principal", 5000).replace(PAY, 'Bank::Action::"pay"'),
     "a namespaced action"),
    (f"{SCOPE} when {{ context.args.amount > 5 }};", "a plain Cedar 'when { … }' condition"),
    (f"def temporal recent(?w) {{ formerly within ?w {PAY}::request{{ }} }}; {SCOPE}",
     "macros ('def temporal')"),
    (f"{SCOPE} when temporal {{ formerly within 1h {PAY}::request{{ }} }} when guardrails "
     "{ true };", "'guardrails' clauses"),
    (f"{SCOPE} unless temporal {{ formerly within 1h Action::\"review\"::request{{ "
     "session: context.session } };", "'unless temporal' over ::request events"),
    (f"{SCOPE} unless temporal {{ formerly within 1h Action::\"review\"::approved{{ "
     "callerPrincipal: principal } };", "an approval looked for per user"),
    (summed("1h", "callerPrincipal: principal", 5000) + summed("1h", "org: context.org", 1),
     "more than one clause or policy"),
    (f"{SCOPE} unless temporal {{ 3 < count for (t: Timepoint). where (formerly within 1h "
     f"({PAY}::request{{ session: context.session }} && tp(t))) }};",
     "'unless temporal' with anything but 'formerly"),
])
def test_an_unsupported_dogwood_construct_is_refused_at_load_by_name(policy: str,
                                                                      named: str) -> None:
    db = Database("sqlite+aiosqlite:///unused.db")  # named, never opened
    with pytest.raises(HookBuildError) as info:
        build_registry(agent(OA(), limits(spend={"dogwood": policy})),
                       HookServices(database=db))
    message = str(info.value)
    assert "limits.spend.dogwood: unsupported Dogwood construct: " in message, message
    assert named in message and "\n" not in message, message


@pytest.mark.parametrize(("spec", "problem"), [
    ({"dogwood": summed("1h", "callerPrincipal: principal", 5000), "per": "user"},
     "a limit written in Dogwood has no other keys"),
    ({"dogwood": 5}, "limits.spend.dogwood: give one Dogwood policy as text"),
    ({"dogwood": f"{SCOPE} when temporal {{"}, "limits.spend.dogwood: expected"),
    ({"dogwood": summed("2w", "callerPrincipal: principal", 5000)},
     "a window's unit is one of s, m, h, d"),
    ({"dogwood": summed("400d", "callerPrincipal: principal", 5000)},
     "must be from one second to 366 days"),
    ({"dogwood": summed("1h", "callerPrincipal: principal", 5000).replace("input.amount",
                                                                           "input.amont")},
     "tool 'oa__purchase_pay' has no argument 'amont'"),
    ({"tools": ["oa__purchase_pay"], "approved_within": "1h", "count": 1, "window": "1h",
      "per": "session"},
     "approved_within is how far back an approval counts: give after_approved"),
])
def test_a_bad_dogwood_limit_fails_at_load_in_one_line(spec: dict[str, Any],
                                                       problem: str) -> None:
    db = Database("sqlite+aiosqlite:///unused.db")  # named, never opened
    with pytest.raises(HookBuildError) as info:
        build_registry(agent(OA(), limits(spend=spec)), HookServices(database=db))
    message = str(info.value)
    assert problem in message and "\n" not in message, message


@pytest.mark.both_databases
@pytest.mark.parametrize(("window", "admitted"), [("1h", False), ("3h", True)])
async def test_an_approval_older_than_the_window_unlocks_nothing_either_way(
        db: Database, window: str, admitted: bool) -> None:
    claims = LimitClaims(db)
    await claims.record_approved(approved_key("session:s1", "review"), "s1|v1",
                                 now=time.time() - 7200)
    native = {"tools": ["oa__purchase_pay"], "after_approved": "review",
              "approved_within": window}
    dogwood = {"dogwood": f"""{SCOPE} unless temporal {{
        formerly within {window} Action::"review"::approved{{ session: context.session }}
    }};"""}
    outcomes = []
    for n, spec in enumerate((native, dogwood, {"tools": ["oa__purchase_pay"],
                                                "after_approved": "review"})):
        hook = SessionLimits([parse_limit("refunds", spec, {})], claims)
        ctx = HookContext(hook_point=HookPoint.PRE_TOOL_USE, tool_name="oa__purchase_pay",
                          tool_args={"amount": 1, "vendor": "ACME"}, user_id="alice",
                          agent_id="buyer", metadata={"run_id": "s1", "tool_call_id": f"c{n}"})
        outcomes.append((await hook.execute(ctx)).allow)
    # Without approved_within, the session's approval counts whenever it was.
    assert outcomes == [admitted, admitted, True]


def test_the_guides_declarations_load_and_its_dogwood_limit_is_what_it_says() -> None:
    page = (Path(__file__).parents[2] / "docs" / "guides" / "limits.md").read_text()
    blocks = [yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", page, re.S)]
    declared = [entry["params"]["limits"] for block in blocks
                for entry in block["class_hooks"]]
    tools = {"transfer": {"type": "object", "properties": {"amount": {"type": "number"}}}}
    loaded = {name: parse_limit(name, spec, tools)
              for limits_ in declared for name, spec in limits_.items()}
    assert loaded["refunds"].approved_within_s == 86_400
    native = {"tools": ["transfer"], "per": "user", "window": "1h", "sum": "amount",
              "max": 5000}
    written = declared[-1]["transfers"]
    assert set(written) == {"dogwood"}
    assert parse_limit("transfers", written, tools) == parse_limit("transfers", native, tools)
