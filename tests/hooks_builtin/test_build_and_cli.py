"""The built-in hooks from a declaration: they refuse to build without a database (so the
agent does not run), `hookgate check` shows them in their chain, and `hookgate run` gives
them the configuration's database."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from hookgate import ReActEngine, ScriptedLLM
from hookgate.catalog import catalog_entries
from hookgate.catalog.build import build_registry
from hookgate.hooks.errors import HookBuildError
from hookgate.hooks.services import HookServices
from tests.cli.test_cli import hookgate
from tests.hooks_builtin.world import OA, agent, call

CONFIG = """
database: sqlite+aiosqlite:///{db}
orgs: [{{id: acme, name: ACME}}]
users: [{{id: alice, org: acme, admin: true}}]
tools: [hookgate.examples.purchasing:oa__purchase_pay]
models:
  script:
    type: scripted
    turns:
      - tool_calls: [{{name: oa__purchase_pay, args: {{amount: 100, vendor: ACME}}}}]
      - answer: paid
agents:
  - id: buyer
    org: acme
    owner: alice
    model: script
    tools: [oa__purchase_pay]
    model_config_json:
      hooks:
        class_hooks:
          - audit_log
          - readonly_guard
          - {{name: connector_rate_limit, params: {{limits: {{oa: 10/minute}}, per: org}}}}
          - {{name: result_truncate, params: {{max_chars: 8000}}}}
"""


@pytest.mark.parametrize(("hook", "keeps"), [
    ("audit_log", "its rows"), ("readonly_guard", "the orgs' read-only flags"),
    ({"name": "connector_rate_limit", "params": {"limits": {"oa": "1/minute"}}},
     "its counters"),
])
async def test_a_hook_that_keeps_records_does_not_build_without_a_database(
        hook: object, keeps: str) -> None:
    oa = OA()
    with pytest.raises(HookBuildError) as info:
        build_registry(agent(oa, hook), HookServices())
    assert f"keeps {keeps} in the database, and none is configured here" in str(info.value)

    engine = ReActEngine(ScriptedLLM([call("oa__purchase_pay", amount=1, vendor="A")]))
    result = await engine.run(agent(oa, hook), "go", user_id="alice", org_id="acme")
    assert result.status == "blocked_build" and oa.payments == []


def test_the_catalog_lists_the_four_built_in_hooks() -> None:
    names = {e.name for e in catalog_entries() if e.source == "builtin"}
    assert {"audit_log", "readonly_guard", "connector_rate_limit", "result_truncate"} <= names
    listed = hookgate("hooks")
    assert listed.returncode == 0
    for name in ("audit_log", "readonly_guard", "connector_rate_limit"):
        assert name in listed.stdout


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "hookgate.yaml"
    path.write_text(textwrap.dedent(CONFIG.format(db=tmp_path / "hookgate.db")), "utf-8")
    return path


def test_hookgate_check_shows_the_built_in_hooks_in_run_order(config: Path) -> None:
    done = hookgate("check", "--config", str(config))

    assert done.returncode == 0, done.stderr
    rows = [line.split("│") for line in done.stdout.splitlines() if "│" in line]
    chain = [(r[1].strip(), r[2].strip(), r[3].strip(), r[4].strip(), r[6].strip())
             for r in rows]
    assert chain == [
        ("PreToolUse", "readonly_guard", "10", "closed", "writes=True"),
        ("PreToolUse", "connector_rate_limit", "900000", "closed", "oa 10/minute per org"),
        ("PreToolUse", "approval_gate", "1000000", "closed", "-"),
        ("PostToolUse", "result_truncate", "900", "closed", "-"),
        ("PostToolUse", "audit_log", "10000000", "closed", "every call"),
    ]
    assert not (config.parent / "hookgate.db").exists()  # check opens no database


def test_hookgate_run_records_and_guards_with_the_configured_database(config: Path) -> None:
    paid = hookgate("run", "--config", str(config), "--agent", "buyer", "pay")
    assert paid.returncode == 0, paid.stdout + paid.stderr
    assert "Paid 100.00 to ACME" in paid.stdout

    on = hookgate("orgs", "read-only", "acme", "on", "--config", str(config))
    assert on.returncode == 0, on.stderr
    blocked = hookgate("run", "--config", str(config), "--agent", "buyer", "pay")
    assert "BLOCKED" in blocked.stdout and "readonly_guard" in blocked.stdout
    assert "Org is in read-only mode — write blocked." in blocked.stdout

    verified = hookgate("audit", "verify", "--config", str(config))
    assert verified.returncode == 0, verified.stderr
    assert "ok: 2 row(s) in 1 chain(s) verified" in verified.stdout
