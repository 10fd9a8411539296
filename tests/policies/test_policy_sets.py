"""Policy sets: a policy that does not parse or validate against the schema made from the
tools' signatures is an error naming the file, the line and the policy; a change to the
files is picked up at the next look at them, and one that does not load leaves the
previous set in force, loudly. `hookgate policy schema|test` on a configuration."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hookgate.cli.main import app
from hookgate.config import ConfigError, load_config
from hookgate.policies import CallFacts, PolicyLoadError, cedar_schema, load_policies
from hookgate.policies.live import LivePolicySet
from hookgate.policies.reload import reload_policies
from hookgate.policies.source import read_policy_files, version_of
from hookgate.policies.stamp import write_stamp
from tests.policies.world import INVARIANTS, PAYMENTS_ONLY, TOOLS, write_policies

SCHEMA = cedar_schema(TOOLS)
TYPO = """\
@id("any-payment")
permit(principal, action == Action::"oa__purchase_pay", resource);

// amount is misspelt
@id("big-payments")
@ask("payments above 50,000 need a person")
permit(principal, action == Action::"oa__purchase_pay", resource)
when { context.args.amout.greaterThan(decimal("50000.0")) };
"""


def facts(**args: object) -> CallFacts:
    return CallFacts(tool_name="oa__purchase_pay", args={"vendor": "ACME", **args},
                     user_id="alice", org_id="acme", agent_id="buyer", agent_audited=True,
                     writes=True)


def test_a_policy_that_does_not_match_the_schema_names_its_file_line_and_id(
        folder: Path) -> None:
    write_policies(folder, PAYMENTS_ONLY, "a.cedar")
    write_policies(folder, TYPO, "b.cedar")

    with pytest.raises(PolicyLoadError) as caught:
        load_policies(folder, SCHEMA, "deny")

    (problem,) = caught.value.problems
    assert problem.startswith("policies/b.cedar:5: policy 'big-payments': ")
    assert "args.amout" in problem


def test_a_policy_that_does_not_parse_names_its_line(folder: Path) -> None:
    write_policies(folder, PAYMENTS_ONLY + '\n// broken:\npermit(principal, action, resource)'
                                           ' when { context.args. };\n')

    with pytest.raises(PolicyLoadError) as caught:
        load_policies(folder, SCHEMA, "deny")

    assert caught.value.problems[0].startswith("policies/invariants.cedar:5: cannot be parsed")


def test_ask_on_a_forbid_and_a_repeated_id_are_refused(folder: Path) -> None:
    write_policies(folder, PAYMENTS_ONLY + '@id("payments")\n@ask("why")\n'
                                           'forbid(principal, action, resource);\n')

    with pytest.raises(PolicyLoadError) as caught:
        load_policies(folder, SCHEMA, "deny")

    said = str(caught.value)
    assert "policies/invariants.cedar:3: policy 'payments': @ask belongs on a permit" in said
    assert "policy id 'payments' is already used at policies/invariants.cedar:1" in said


def test_a_change_is_picked_up_and_a_broken_one_leaves_the_previous_set_in_force(
        folder: Path, caplog: pytest.LogCaptureFixture) -> None:
    policy_file = write_policies(folder, PAYMENTS_ONLY) / "invariants.cedar"
    live = LivePolicySet(folder, "deny", TOOLS, recheck_s=0)
    first = live.decide(facts(amount=60000))
    assert first.effect == "allow"

    write_policies(folder, INVARIANTS)
    _touch_later(policy_file)
    assert live.decide(facts(amount=60000)).version == first.version  # not reloaded yet
    assert live.status().state == "not reloaded"
    reload_policies(folder, "deny", TOOLS)
    asked = live.decide(facts(amount=60000))
    assert asked.effect == "ask" and asked.version != first.version

    policy_file.write_text(TYPO, encoding="utf-8")
    _touch_later(policy_file)
    write_stamp(folder, version_of(read_policy_files(folder)))  # stamped, but it fails
    with caplog.at_level(logging.ERROR, logger="hookgate.policies"):
        kept = live.decide(facts(amount=60000))
    assert kept.effect == "ask" and kept.version == asked.version
    assert live.reload_error is not None
    assert "stays in force" in caplog.text and "b.cedar" not in caplog.text
    assert "policies/invariants.cedar:5: policy 'big-payments'" in caplog.text


def _touch_later(path: Path) -> None:
    # A write within the file system's timestamp granularity must still count as a change.
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


CONFIG = """\
database: sqlite+aiosqlite:///{db}
orgs: [{{id: acme, read_only: false}}]
users: [{{id: alice, org: acme, admin: true}}]
tools: [tests.policies.world:oa__purchase_pay, tests.policies.world:crm__lookup]
models: {{script: {{type: scripted, turns: [{{answer: done}}]}}}}
agents:
  - id: buyer
    org: acme
    model: script
    tools: [oa__purchase_pay, crm__lookup]
    model_config_json: {{hooks: {{class_hooks: [audit_log]}}}}
policies:
  - {{org: acme, path: policies, default: deny}}
"""

CASES = """\
cases:
  - {name: small payment runs, user: alice, tool: oa__purchase_pay,
     args: {amount: 12000, vendor: ACME}, expect: allow}
  - {name: big payment asks a person, user: alice, tool: oa__purchase_pay,
     args: {amount: 60000, vendor: ACME}, expect: ask}
  - {name: no writes while read-only, user: alice, tool: oa__purchase_pay,
     args: {amount: 10, vendor: ACME}, org_read_only: true, expect: deny}
"""


def _config(tmp_path: Path, policies: str) -> Path:
    write_policies(tmp_path / "policies", policies)
    path = tmp_path / "hookgate.yaml"
    path.write_text(CONFIG.format(db=tmp_path / "h.db"), encoding="utf-8")
    return path


def test_an_invalid_policy_fails_the_configuration_load_naming_file_line_and_id(
        tmp_path: Path) -> None:
    path = _config(tmp_path, TYPO)

    with pytest.raises(ConfigError) as caught:
        load_config(path)

    said = str(caught.value)
    assert "policies[0]: the policies do not load" in said
    assert "policies/invariants.cedar:5: policy 'big-payments'" in said


def test_policy_test_prints_the_deciding_policies_and_fails_on_a_wrong_expectation(
        tmp_path: Path) -> None:
    path = _config(tmp_path, INVARIANTS)
    cases = tmp_path / "cases.yaml"
    cases.write_text(CASES, encoding="utf-8")
    env = {"COLUMNS": "200", "NO_COLOR": "1"}

    done = CliRunner().invoke(app, ["policy", "test", str(cases), "-c", str(path)], env=env)
    assert done.exit_code == 0, done.output
    assert "big-payments" in done.output and "read-only-org" in done.output
    assert "3 passed, 0 failed" in done.output and "policy set cedar-" in done.output

    cases.write_text(CASES.replace("expect: deny", "expect: allow"), encoding="utf-8")
    done = CliRunner().invoke(app, ["policy", "test", str(cases), "-c", str(path)], env=env)
    assert done.exit_code == 1 and "2 passed, 1 failed" in done.output


def test_policy_schema_types_the_arguments_from_the_signatures(tmp_path: Path) -> None:
    path = _config(tmp_path, INVARIANTS)

    done = CliRunner().invoke(app, ["policy", "schema", "-c", str(path)])

    assert done.exit_code == 0, done.output
    assert 'action "oa__purchase_pay" in [Action::"call_tool"]' in done.output
    for line in ("amount: __cedar::decimal", "vendor: __cedar::String",
                 "memo?: __cedar::String", "units?: __cedar::Long"):
        assert line in done.output
