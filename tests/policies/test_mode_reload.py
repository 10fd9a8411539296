"""The ``mode:`` of configuration entries is hot-reloaded: real `hookgate serve` processes
(two on one PostgreSQL, one on SQLite) serve a gate rule (``guarded_calls.rules``) and a
declared hook (``command_hooks``) in shadow mode; the file is edited to ``mode: enforce``
and `hookgate policy reload --config` stamps it, and the next calls on every instance are
asked / denied with no restart, and back. A bad mode is refused by the reload (the servers
keep their modes); a change beyond a mode is named as needing a restart, and the servers
keep their modes until then; a stamp they cannot read leaves their modes in force."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.conftest import _fresh_pg_database
from tests.instances import Instance

ROOT = Path(__file__).resolve().parents[2]

CONFIG = """\
database: {db}
orgs: [{{id: acme}}]
users:
  - {{id: alice, org: acme, admin: true, token: tok-alice}}
  - {{id: bob, org: acme, token: tok-bob}}
models: {{script: {{type: scripted, turns: [{{answer: done}}]}}}}
agents:
  - id: scout
    org: acme
    owner: alice
    model: script
    model_config_json:
      hooks:
        class_hooks: [audit_log]
        command_hooks:
          - {{event: PreToolUse, matcher: web__delete, name: no-deletes, mode: shadow,
             command: "echo deletes are off >&2; exit 2"}}
      guarded_calls:
        rules: [{{matcher: web__search, requires_confirmation: true, mode: shadow,
                  reason: searches are watched}}]
"""
SCHEMA = {"type": "object", "properties": {"query": {"type": "string"}}}
_calls = itertools.count()


def decided(instance: Instance, tool: str) -> str:
    """A fresh guarded call of ``tool`` on ``instance``: its decision."""
    n = next(_calls)
    body = {"agent": "scout", "session_id": f"s-{instance.name}-{n}", "call_id": f"c-{n}",
            "tool": tool, "arguments": {"query": "cedar"}, "parameters": SCHEMA}
    answer = httpx.post(f"{instance.url}/api/v1/calls", json=body, timeout=30,
                        headers={"Authorization": "Bearer tok-bob"})
    assert answer.status_code == 200, answer.text
    return str(answer.json()["decision"])


def eventually(instance: Instance, tool: str, wanted: str) -> None:
    """Wait (generously) until a call of ``tool`` on ``instance`` is decided ``wanted``."""
    deadline = time.monotonic() + 30
    while (said := decided(instance, tool)) != wanted:
        assert time.monotonic() < deadline, f"{instance.name}: {tool} still {said}"
        time.sleep(0.2)


def logged(instance: Instance, text: str) -> str:
    """Call on ``instance`` (a call reads the modes, and so looks at the stamp) until its
    log says ``text``; the log."""
    deadline = time.monotonic() + 30
    while text not in (log := instance.log.read_text(encoding="utf-8", errors="replace")):
        assert time.monotonic() < deadline, f"{instance.name} never logged {text!r}:\n{log}"
        decided(instance, "web__delete")
        time.sleep(0.2)
    return log


def modes_status(instance: Instance) -> dict[str, object]:
    """What ``instance``'s `GET /api/policies/status` says of its modes."""
    answer = httpx.get(f"{instance.url}/api/policies/status", timeout=30,
                       headers={"Authorization": "Bearer tok-alice"})
    assert answer.status_code == 200, answer.text
    return dict(answer.json()["modes"])


def reload(config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hookgate.cli.main", "policy", "reload", "--config",
         str(config)], capture_output=True, text=True, timeout=120, cwd=config.parent,
        env={**os.environ, "PYTHONPATH": f"{ROOT / 'src'}:{ROOT}"}, check=False)


def edited(config: Path, change: Callable[[str], str]) -> None:
    config.write_text(change(config.read_text(encoding="utf-8")), encoding="utf-8")


def exercise(config: Path, instances: list[Instance]) -> None:
    for instance in instances:  # shadow: nothing asks, nothing is denied
        assert modes_status(instance)["state"] == "as started"
        assert decided(instance, "web__search") == "allow"
        assert decided(instance, "web__delete") == "allow"

    edited(config, lambda text: text.replace("mode: shadow", "mode: enforce"))
    done = reload(config)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "modes" in done.stdout, done.stdout
    for instance in instances:  # enforcing on every instance, with no restart
        eventually(instance, "web__search", "pending")
        eventually(instance, "web__delete", "deny")

    edited(config, lambda text: text.replace("mode: enforce", "mode: shadow"))
    done = reload(config)
    assert done.returncode == 0, done.stdout + done.stderr
    for instance in instances:  # and back
        eventually(instance, "web__search", "allow")
        eventually(instance, "web__delete", "allow")

    # A bad mode: the reload refuses it with the one-line error, nothing is stamped.
    stamp = config.with_name(config.name + ".modes")
    before = stamp.read_bytes()
    edited(config, lambda text: text.replace("mode: shadow,\n                  reason",
                                             "mode: observe,\n                  reason"))
    done = reload(config)
    assert done.returncode != 0, done.stdout
    said = (done.stdout + done.stderr).strip()
    assert "'mode' must be 'enforce' or 'shadow', got 'observe'" in said, said
    assert "guarded_calls.rules[0]" in said, said
    assert stamp.read_bytes() == before

    # A change beyond a mode: named as needing a restart; the servers keep their modes.
    edited(config, lambda text: text.replace("mode: observe", "mode: enforce")
           .replace("searches are watched", "searches are audited"))
    done = reload(config)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "guarded_calls.rules[0]" in done.stdout and "restart" in done.stdout, done.stdout
    for instance in instances:
        log = logged(instance, "need a restart")
        assert "guarded_calls.rules[0]" in log
        assert decided(instance, "web__search") == "allow"
        shown = modes_status(instance)
        assert shown["state"] == "needs restart", shown
        assert "guarded_calls.rules[0]" in str(shown["error"]), shown

    # A stamp an instance cannot read: it keeps its modes and says so.
    edited(config, lambda text: text.replace("searches are audited", "searches are watched"))
    stamp.write_text("{not json", encoding="utf-8")
    for instance in instances:
        logged(instance, "modes reload failed")
        assert decided(instance, "web__search") == "allow"
        assert decided(instance, "web__delete") == "allow"
        assert modes_status(instance)["state"] == "reload failed"


def test_modes_reload_on_two_postgresql_instances(tmp_path: Path,
                                                  request: pytest.FixtureRequest) -> None:
    db = _fresh_pg_database(request.getfixturevalue("postgres_server_url"))
    config = tmp_path / "hookgate.yaml"
    config.write_text(CONFIG.format(db=db), encoding="utf-8")
    first, second = Instance("a", config, tmp_path), Instance("b", config, tmp_path)
    try:
        first.spawn()
        first.wait_up()  # the schema is migrated once, by the first
        second.spawn()
        second.wait_up()
        exercise(config, [first, second])
    finally:
        first.stop()
        second.stop()


def test_modes_reload_on_sqlite(tmp_path: Path) -> None:
    config = tmp_path / "hookgate.yaml"
    config.write_text(CONFIG.format(db=f"sqlite+aiosqlite:///{tmp_path / 'h.db'}"),
                      encoding="utf-8")
    server = Instance("solo", config, tmp_path)
    try:
        server.spawn()
        server.wait_up()
        exercise(config, [server])
    finally:
        server.stop()



ENTRIES = """\
database: sqlite+aiosqlite:///{db}
orgs: [{{id: acme}}]
users: [{{id: alice, org: acme, admin: true, token: tok-alice}}]
tools: [tests.policies.world:oa__purchase_pay]
models: {{script: {{type: scripted, turns: [{{answer: done}}]}}}}
agents:
  - id: buyer
    org: acme
    owner: alice
    model: script
    tools: [oa__purchase_pay]
    model_config_json:
      claude_code:
        rules: [{{matcher: Bash, requires_confirmation: true, mode: shadow}}]
      coding_agents:
        rules: [{{matcher: Bash, requires_confirmation: true, mode: shadow}}]
policies:
  - {{org: acme, path: policies, default: deny, mode: shadow}}
"""


def test_every_kind_of_entry_reads_its_mode_where_it_is_built(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The class of the defect: every entry that carries a mode (a catalog hook, an org's
    # policy set, each section's gate rules) is read through the modes in force.
    from hookgate.catalog.build import build_registry
    from hookgate.config.loader import load_config
    from hookgate.config.modes import mode_catalogue
    from hookgate.external.policy import CallRules
    from hookgate.hooks.services import HookServices
    from hookgate.policies import modes
    from hookgate.policies.shadow import ShadowHook
    from hookgate.storage.database import Database
    from tests.policies.world import INVARIANTS, write_policies

    write_policies(tmp_path / "policies", INVARIANTS)
    config = tmp_path / "hookgate.yaml"
    config.write_text(ENTRIES.format(db=tmp_path / "h.db"), encoding="utf-8")
    cfg = load_config(str(config))
    live = modes.ModesInForce(config, mode_catalogue(cfg), recheck_s=0.0)
    monkeypatch.setattr(modes, "_IN_FORCE", live)
    agent = cfg.build_agent("buyer")  # built once, as the process started

    services = HookServices(database=Database(cfg.database))  # named, not opened

    def shadowed() -> list[str]:
        hooks = build_registry(agent, services).hooks()
        rules = [CallRules.read(agent, section, default_wait_s=0.0).rules[0].mode
                 for section in ("claude_code", "coding_agents")]
        return sorted([h.name for h in hooks if isinstance(h, ShadowHook)]
                      + [f"rule {mode}" for mode in rules])

    assert shadowed() == ["cedar_policy", "rule shadow", "rule shadow"]
    edited(config, lambda text: text.replace("mode: shadow", "mode: enforce"))
    modes.write_modes_stamp(config, mode_catalogue(load_config(str(config))))
    assert shadowed() == ["rule enforce", "rule enforce"]
    assert live.state == "in force"
