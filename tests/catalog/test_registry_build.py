"""Building a session's registry from an agent's declaration (SPEC §1.6, §1.7, §4): catalog
names, ``{name, params}``, ``module:Class`` and plug-ins build; anything else stops the agent
with an error that names the entry; the approval gate is always there, after the declared
hooks (a hook that asks for a priority above the gate's cannot slip a call past a person)."""

from __future__ import annotations

import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest

from hookgate import (
    Agent,
    HookBuildError,
    HookContext,
    HookPoint,
    HookResult,
    HookServices,
    PostToolUseHook,
    ReActEngine,
    ScriptedLLM,
    build_registry,
)
from hookgate.approvals.gate import ApprovalGate
from hookgate.catalog import catalog
from hookgate.catalog.builtin.result_truncate import ResultTruncate
from hookgate.hooks.registry import HookRegistry
from hookgate.tools import CallIdentity, ToolCall, execute_tool_call
from hookgate.tools.guarded_call import new_call
from tests.hookfixtures import SpendLimit, VeryLate, agent_with, pay_tool

FIXTURES = "tests.hookfixtures"
#: A database the hooks built in these tests are handed (none of them opens it).
DATABASE = object()


def pre_hook_names(agent: Agent) -> list[str]:
    return [h.name for h in build_registry(agent).hooks(HookPoint.PRE_TOOL_USE)]


# -- what builds --------------------------------------------------------------------------


def test_the_approval_gate_is_in_the_catalog_under_both_names() -> None:
    entries = catalog()

    assert entries["approval_gate"].target == "hookgate.approvals.gate:ApprovalGate"
    assert entries["feishu_gate"] is entries["approval_gate"]


@pytest.mark.parametrize("name", ["approval_gate", "feishu_gate"])
def test_a_catalog_name_builds_its_hook_and_the_gate_is_not_added_twice(name: str) -> None:
    registry = build_registry(agent_with([], name))

    [gate] = registry.hooks()
    assert isinstance(gate, ApprovalGate)
    assert gate.name == "approval_gate"


def test_a_module_class_entry_builds_that_class() -> None:
    registry = build_registry(agent_with([], f"{FIXTURES}:VeryLate"))

    assert isinstance(registry.get("very_late"), VeryLate)


def test_an_entry_with_params_builds_the_class_with_them() -> None:
    registry = build_registry(agent_with([], {"name": f"{FIXTURES}:SpendLimit",
                                              "params": {"limit": 1000}}))

    hook = registry.get("spend_limit")
    assert isinstance(hook, SpendLimit)
    assert hook.limit == 1000


def test_every_build_makes_a_fresh_registry_of_fresh_hooks() -> None:
    agent = agent_with([], f"{FIXTURES}:VeryLate",
                       {"name": f"{FIXTURES}:SpendLimit", "params": {"limit": 5}})

    first, second = build_registry(agent), build_registry(agent)

    assert first is not second
    assert [h.name for h in first.hooks()] == [h.name for h in second.hooks()]
    assert not {id(h) for h in first.hooks()} & {id(h) for h in second.hooks()}


def test_a_hooks_section_changed_in_place_is_read_again_at_the_next_build() -> None:
    # What a build resolved (each entry's class) is kept per agent only for as long as its
    # hooks section is the same, value and type, all the way down.
    agent = agent_with([], {"name": f"{FIXTURES}:SpendLimit", "params": {"limit": 5}})
    assert build_registry(agent).get("spend_limit").limit == 5  # type: ignore[union-attr]

    hooks = agent.model_config_json["hooks"]
    hooks["class_hooks"][0]["params"]["limit"] = 7
    assert build_registry(agent).get("spend_limit").limit == 7  # type: ignore[union-attr]

    hooks["class_hooks"].append(f"{FIXTURES}:VeryLate")
    assert isinstance(build_registry(agent).get("very_late"), VeryLate)

    hooks["class_hooks"][1] = "no_such_hook"
    with pytest.raises(HookBuildError, match="unknown hook 'no_such_hook'"):
        build_registry(agent)

    hooks["class_hooks"][1] = {"name": f"{FIXTURES}:VeryLate", "mode": "shadow"}
    assert type(build_registry(agent).get("very_late")).__name__ == "ShadowHook"
    hooks["class_hooks"][1]["mode"] = "bogus"
    with pytest.raises(HookBuildError, match="'mode' must be"):
        build_registry(agent)


def test_a_class_replaced_in_its_module_is_built_from_the_next_build_on(
        monkeypatch: pytest.MonkeyPatch) -> None:
    agent = agent_with([], f"{FIXTURES}:VeryLate")
    assert type(build_registry(agent).get("very_late")) is VeryLate

    class Later(VeryLate):
        pass

    monkeypatch.setattr(sys.modules[FIXTURES], "VeryLate", Later)
    assert type(build_registry(agent).get("very_late")) is Later


def test_a_hook_is_made_with_the_services_of_each_build() -> None:
    agent = agent_with([], "approval_gate")
    first, second = HookServices(approvals=object()), HookServices(approvals=object())

    gates = [build_registry(agent, s).get("approval_gate") for s in (first, second, first)]

    assert [g.service for g in gates] == [  # type: ignore[union-attr]
        first.approvals, second.approvals, first.approvals]
    assert len({id(g) for g in gates}) == 3


# -- hookgate's own hooks that keep nothing per call (decision record 0034) ---------------


class ClaimsShared(PostToolUseHook):
    """A third party's hook that says it may be shared: it is made anew all the same."""

    name = "claims_shared"
    shared_between_calls = True

    async def execute(self, ctx: HookContext) -> HookResult:
        return HookResult()


class SharedSubclass(ResultTruncate):
    """A third party's subclass of a built-in that is shared: its own class decides."""

    name = "shared_subclass"


def _ids(registry: HookRegistry) -> dict[str, int]:
    return {h.name: id(h) for h in registry.hooks()}


def test_hookgates_own_stateless_hooks_serve_every_build_and_the_gate_is_made_per_build(
        ) -> None:
    agent = agent_with([], "result_truncate", "untrusted_target")
    first, second = (HookServices(approvals=object(), database=DATABASE),
                     HookServices(approvals=object(), database=DATABASE))

    build_registry(agent, first)  # the first build finds out what the entries are
    one, two = build_registry(agent, first), build_registry(agent, second)

    assert one is not two
    assert [h.name for h in one.hooks()] == [h.name for h in two.hooks()] == [
        "untrusted_target", "approval_gate", "result_truncate"]
    assert _ids(one)["result_truncate"] == _ids(two)["result_truncate"]
    assert _ids(one)["untrusted_target"] == _ids(two)["untrusted_target"]
    # Each build's gate carries that build's approvals, never another call's.
    gates = [r.get("approval_gate") for r in (one, two)]
    assert [g.service for g in gates] == [  # type: ignore[union-attr]
        first.approvals, second.approvals]


@pytest.mark.parametrize("entry", [f"{__name__}:ClaimsShared", f"{__name__}:SharedSubclass",
                                   f"{FIXTURES}:VeryLate"])
def test_a_third_party_hook_is_made_anew_at_every_build_and_so_are_the_hooks_beside_it(
        entry: str) -> None:
    agent = agent_with([], "result_truncate", entry)

    one, two, three = build_registry(agent), build_registry(agent), build_registry(agent)

    assert not set(_ids(one).values()) & set(_ids(three).values())

    assert not set(_ids(one).values()) & set(_ids(two).values())


def test_shared_hooks_are_made_again_when_the_modes_in_force_or_the_database_change(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from hookgate.policies import modes

    agent = agent_with([], "result_truncate")
    build_registry(agent)
    before = _ids(build_registry(agent))["result_truncate"]
    assert _ids(build_registry(agent))["result_truncate"] == before

    monkeypatch.setattr(modes, "modes_version", lambda: "modes-stamped")  # a reload
    reloaded = _ids(build_registry(agent))["result_truncate"]
    assert reloaded != before
    assert _ids(build_registry(agent))["result_truncate"] == reloaded

    other = _ids(build_registry(agent, HookServices(database=DATABASE)))["result_truncate"]
    assert other != reloaded


def test_an_agent_whose_hooks_section_changed_gets_new_shared_hooks() -> None:
    agent = agent_with([], {"name": "result_truncate", "params": {"max_chars": 2_000}})
    build_registry(agent)
    first = build_registry(agent).get("result_truncate")
    assert build_registry(agent).get("result_truncate") is first
    agent.model_config_json["hooks"]["class_hooks"][0]["params"]["max_chars"] = 3_000

    second = build_registry(agent).get("result_truncate")

    assert second is not first
    assert second.max_chars == 3_000  # type: ignore[union-attr]
    reloaded = agent_with([], {"name": "result_truncate", "params": {"max_chars": 3_000}})
    assert build_registry(reloaded).get("result_truncate") is not second  # a new Agent


def test_an_option_assigned_on_a_shared_hook_holds_in_every_registry_built_with_it() -> None:
    agent = agent_with([], "untrusted_target")
    build_registry(agent)
    before = build_registry(agent)
    hook = before.get("untrusted_target")
    assert hook is not None
    assert [h.name for h in before.hooks(HookPoint.PRE_TOOL_USE)] == [
        "untrusted_target", "approval_gate"]

    hook.priority = 10**12  # after the gate

    after = build_registry(agent)
    assert after.get("untrusted_target") is hook
    for registry in (before, after):
        assert [h.name for h in registry.hooks(HookPoint.PRE_TOOL_USE)] == [
            "approval_gate", "untrusted_target"]


# -- a registry built again with a process's own services (decision record 0037) ----------


def test_a_registry_built_again_with_the_same_services_is_the_same_while_it_holds(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from hookgate.hooks import registry as registry_module
    from hookgate.policies import modes

    agent = agent_with([], "result_truncate", "untrusted_target")
    own = HookServices(approvals=object(), database=DATABASE)
    build_registry(agent, own)  # the first build finds out what the entries are

    kept = build_registry(agent, own, again=True)
    assert build_registry(agent, own, again=True) is kept
    assert kept.get("approval_gate").service is own.approvals  # type: ignore[union-attr]
    # Without ``again``, or with other services (a call's approvals), a build is new.
    assert build_registry(agent, own) is not kept
    call = HookServices(approvals=object(), database=DATABASE)
    per_call = build_registry(agent, call, again=True)
    assert per_call is not kept
    assert per_call.get("approval_gate").service is call.approvals  # type: ignore[union-attr]

    # The services' approvals replaced: the gate is made again with them.
    kept = build_registry(agent, own, again=True)
    own.approvals = object()
    regated = build_registry(agent, own, again=True)
    assert regated is not kept
    assert regated.get("approval_gate").service is own.approvals  # type: ignore[union-attr]
    # The modes in force changed (a policy reload), or telemetry was switched: made again.
    monkeypatch.setattr(modes, "modes_version", lambda: "modes-stamped")
    reloaded = build_registry(agent, own, again=True)
    assert reloaded is not regated
    assert build_registry(agent, own, again=True) is reloaded
    monkeypatch.setattr(registry_module, "instrument", lambda hook: hook.execute)
    assert build_registry(agent, own, again=True) is not reloaded


@pytest.mark.parametrize("extra", [
    {"class_hooks": ["result_truncate", f"{FIXTURES}:VeryLate"]},
    {"command_hooks": [{"event": "PostToolUse", "command": "true"}]},
])
def test_a_registry_with_a_hook_made_per_build_is_made_anew_even_built_again(
        extra: dict[str, Any]) -> None:
    agent = agent_with([], "result_truncate")
    agent.model_config_json["hooks"].update(extra)
    own = HookServices(approvals=object(), database=DATABASE)
    build_registry(agent, own)

    one, two = build_registry(agent, own, again=True), build_registry(agent, own, again=True)

    assert one is not two
    own_hooks = {h.name for h in one.hooks()} - {"result_truncate", "approval_gate"}
    assert own_hooks
    assert all(_ids(one)[name] != _ids(two)[name] for name in own_hooks)


def test_the_gate_is_added_to_an_agent_that_declares_no_hooks() -> None:
    plain = Agent(id="plain", name="Plain", instructions="", tools=[])

    assert [type(h) for h in build_registry(plain).hooks()] == [ApprovalGate]


@pytest.mark.parametrize("entries", [
    [f"{FIXTURES}:RecordCall", {"name": f"{FIXTURES}:SpendLimit", "params": {"limit": 5}}],
    ["approval_gate", f"{FIXTURES}:RecordCall"],
    [f"{FIXTURES}:RecordCall", "approval_gate", {"name": f"{FIXTURES}:SetArgs",
                                                 "params": {"values": {}, "priority": 999_999}}],
])
def test_the_gate_runs_after_every_declared_hook_wherever_it_is_declared(
    entries: list[Any],
) -> None:
    names = pre_hook_names(agent_with([], *entries))

    assert names[-1] == "approval_gate"
    assert names.count("approval_gate") == 1


async def test_a_rewrite_after_the_gate_that_makes_a_call_need_a_person_is_blocked() -> None:
    # A hook that asks for a priority above the gate's raises the amount past the
    # confirmation threshold after the gate has passed the call: the call must not run.
    runs: list[dict[str, Any]] = []
    pay = pay_tool(runs, requires_confirmation=lambda a: a["amount"] > 50_000)
    registry = build_registry(agent_with([pay], {"name": f"{FIXTURES}:SetArgs", "params": {
        "values": {"amount": 90_000}, "priority": 10**13}}))
    assert [h.name for h in registry.hooks(HookPoint.PRE_TOOL_USE)] == [
        "approval_gate", "set_args"]

    outcome = await execute_tool_call(
        new_call(CallIdentity(agent_id="buyer", user_id="alice", org_id="acme", run_id="r1"),
                 ToolCall("c1", pay.name, {"amount": 10, "vendor": "ACME"}), {pay.name: pay}),
        registry=registry,
    )

    assert runs == []
    assert not outcome.allowed
    assert outcome.args == {"amount": 90_000, "vendor": "ACME"}
    assert "requires a person's approval" in outcome.observation


# -- what does not build ------------------------------------------------------------------

GOOD = f"{FIXTURES}:VeryLate"

#: (case, class_hooks, text the error must contain besides the agent id)
BAD_DECLARATIONS: list[tuple[str, Any, str]] = [
    ("unknown name", [GOOD, "audit_logg"], "hooks.class_hooks[1] 'audit_logg': unknown hook"),
    ("missing module", [GOOD, "tests.no_such_module:Policy"],
     "hooks.class_hooks[1] 'tests.no_such_module:Policy': 'tests.no_such_module:Policy' cannot be "
     "imported"),
    ("missing attribute", [GOOD, f"{FIXTURES}:SpendLimt"],
     f"hooks.class_hooks[1] '{FIXTURES}:SpendLimt': '{FIXTURES}:SpendLimt' cannot be imported: "
     f"module '{FIXTURES}' has no attribute 'SpendLimt'"),
    ("class not a hook", [GOOD, f"{FIXTURES}:NotAHook"],
     f"hooks.class_hooks[1] '{FIXTURES}:NotAHook': '{FIXTURES}:NotAHook' is not a hook class"),
    ("constructor rejects params", [GOOD, {"name": f"{FIXTURES}:SpendLimit",
                                           "params": {"ceiling": 5}}],
     f"hooks.class_hooks[1] '{FIXTURES}:SpendLimit': bad params {{'ceiling': 5}}: TypeError"),
    ("required param missing", [f"{FIXTURES}:SpendLimit"],
     f"hooks.class_hooks[0] '{FIXTURES}:SpendLimit': bad params {{}}: TypeError"),
    ("class_hooks not a list", f"{FIXTURES}:SpendLimit",
     f"hooks.class_hooks must be a list, got str '{FIXTURES}:SpendLimit'"),
    ("entry neither string nor mapping", [GOOD, 42],
     "hooks.class_hooks[1] 42: must be a catalog name, 'module:Class', or {name, params}; got int"),
    ("entry with unknown keys", [{"name": f"{FIXTURES}:SpendLimit", "parms": {"limit": 1}}],
     f"hooks.class_hooks[0] '{FIXTURES}:SpendLimit': unknown keys parms"),
    ("params not a mapping", [{"name": f"{FIXTURES}:SpendLimit", "params": [1000]}],
     f"hooks.class_hooks[0] '{FIXTURES}:SpendLimit': 'params' must be a mapping, got list"),
]


def bad_agent(class_hooks: Any, tools: list[Any] | None = None) -> Agent:
    return Agent(id="buyer", name="Purchasing agent", instructions="Buy.", tools=tools or [],
                 model_config_json={"hooks": {"class_hooks": class_hooks}})


@pytest.mark.parametrize(("case", "class_hooks", "expected"), BAD_DECLARATIONS,
                         ids=[c[0] for c in BAD_DECLARATIONS])
def test_a_bad_entry_fails_the_build_with_an_error_naming_agent_and_entry(
    case: str, class_hooks: Any, expected: str
) -> None:
    with pytest.raises(HookBuildError) as raised:
        build_registry(bad_agent(class_hooks))

    message = str(raised.value)
    assert message.startswith("agent 'buyer': ")
    assert expected in message
    assert raised.value.agent_id == "buyer"


@pytest.mark.parametrize(("case", "class_hooks", "expected"), BAD_DECLARATIONS,
                         ids=[c[0] for c in BAD_DECLARATIONS])
async def test_the_engine_refuses_to_run_an_agent_whose_hooks_do_not_build(
    case: str, class_hooks: Any, expected: str
) -> None:
    asked: list[Any] = []
    runs: list[dict[str, Any]] = []

    def model(messages: list[dict[str, Any]]) -> dict[str, Any]:
        asked.append(messages)
        return {"tool_calls": [{"name": "oa__purchase_pay",
                                "args": {"amount": 1, "vendor": "ACME"}}]}

    result = await ReActEngine(ScriptedLLM(model)).run(
        bad_agent(class_hooks, [pay_tool(runs)]), "pay", user_id="alice")

    assert result.status == "blocked_build"
    assert asked == []
    assert runs == []
    assert result.answer is None
    assert expected in (result.error or "")
    assert [e["type"] for e in result.trace] == ["error", "done"]


# -- third-party hooks --------------------------------------------------------------------


async def test_a_third_party_package_adds_catalog_names_through_the_entry_point_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    module = f"acme_policies_{uuid.uuid4().hex[:8]}"
    request.addfinalizer(lambda: sys.modules.pop(module, None))
    (tmp_path / f"{module}.py").write_text(textwrap.dedent("""
        from hookgate import HookResult, PreToolUseHook

        class AcmeSpendLimit(PreToolUseHook):
            name = "acme_spend_limit"
            priority = 40

            def __init__(self, limit: int) -> None:
                self.limit = limit

            async def execute(self, ctx):
                if ctx.tool_args["amount"] > self.limit:
                    return HookResult(allow=False, error=f"over ACME's limit of {self.limit}")
                return HookResult()
    """))
    dist_info = tmp_path / "acme_policies-1.0.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: acme-policies\nVersion: 1.0\n")
    (dist_info / "entry_points.txt").write_text(
        f"[hookgate.hooks]\nacme_spend_limit = {module}:AcmeSpendLimit\n")
    assert "acme_spend_limit" not in catalog()

    monkeypatch.syspath_prepend(str(tmp_path))

    entry = catalog()["acme_spend_limit"]
    assert (entry.target, entry.source) == (f"{module}:AcmeSpendLimit", "plugin")
    assert "acme-policies" in entry.description

    runs: list[dict[str, Any]] = []
    pay = pay_tool(runs)
    agent = agent_with([pay], {"name": "acme_spend_limit", "params": {"limit": 100}})
    llm = ScriptedLLM([
        {"tool_calls": [{"name": pay.name, "args": {"amount": 500, "vendor": "A"}, "id": "a"},
                        {"name": pay.name, "args": {"amount": 50, "vendor": "B"}, "id": "b"}]},
        {"answer": "done"},
    ])

    result = await ReActEngine(llm, services=HookServices()).run(agent, "pay", user_id="al")

    assert [h.name for h in build_registry(agent).hooks()] == [
        "acme_spend_limit", "approval_gate"]
    assert runs == [{"amount": 50, "vendor": "B"}]
    blocked = next(e for e in result.tool_events() if e["tool_call_id"] == "a")
    assert blocked["observation"] == "over ACME's limit of 100"


def test_the_entry_points_are_scanned_once_per_import_path(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # The package exports a function of the module's name: reach the module itself.
    catalog_module = sys.modules["hookgate.catalog.catalog"]
    scans: list[str] = []
    real = catalog_module.entry_points

    def counting(**kwargs: Any) -> Any:
        scans.append(kwargs["group"])
        return real(**kwargs)

    monkeypatch.setattr(catalog_module, "entry_points", counting)
    catalog_module._catalog.cache_clear()
    for _ in range(5):
        assert "audit_log" in catalog()
    assert scans == ["hookgate.hooks"]
    monkeypatch.syspath_prepend(str(tmp_path))  # another import path: scanned again
    catalog()
    assert scans == ["hookgate.hooks", "hookgate.hooks"]
    catalog()["audit_log"] = catalog()["readonly_guard"]  # a caller's copy, not the cache
    assert catalog()["audit_log"].name == "audit_log"
