"""A change that does not load keeps the last good set and is visible: `hookgate policy
status` names the state and the error (file and line), `hookgate policy reload` refuses to
stamp files that do not load (and stamps nothing), and the metrics count the failed load and
the set left serving an older version until a good change is reloaded."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from hookgate.policies import CallFacts
from hookgate.policies.live import LivePolicySet
from hookgate.policies.metrics import M_FAILING, M_LOADS, OUTCOME
from hookgate.policies.reload import reload_policies
from hookgate.policies.source import read_policy_files, version_of
from hookgate.policies.stamp import read_stamp, write_stamp
from tests.policies.world import INVARIANTS, PAYMENTS_ONLY, TOOLS, write_policies
from tests.telemetry.conftest import Otel, otel

__all__ = ["otel"]

ROOT = Path(__file__).resolve().parents[2]
CONFIG = """\
database: sqlite+aiosqlite:///{db}
orgs: [{{id: acme, read_only: false}}]
users: [{{id: alice, org: acme, admin: true}}]
tools: [tests.policies.world:oa__purchase_pay, tests.policies.world:crm__lookup]
models: {{script: {{type: scripted, turns: [{{answer: done}}]}}}}
agents:
  - {{id: buyer, org: acme, model: script, tools: [oa__purchase_pay, crm__lookup],
     model_config_json: {{hooks: {{class_hooks: [audit_log]}}}}}}
policies:
  - {{org: acme, path: policies, default: deny}}
"""
TYPO = INVARIANTS.replace("context.args.amount", "context.args.amout")


def _write(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


def policy(*args: str, cwd: Path) -> tuple[int, str]:
    """The real command (a console of its own, 400 columns wide)."""
    done = subprocess.run([sys.executable, "-m", "hookgate.cli.main", "policy", *args,
                           "--config", str(cwd / "hookgate.yaml")], cwd=cwd,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": f"{ROOT / 'src'}:{ROOT}",
                               "COLUMNS": "400", "NO_COLOR": "1"})
    return done.returncode, done.stdout + done.stderr


def test_status_and_reload_show_and_refuse_a_change_that_does_not_load(
        tmp_path: Path) -> None:
    policy_file = write_policies(tmp_path / "policies", INVARIANTS) / "invariants.cedar"
    (tmp_path / "hookgate.yaml").write_text(CONFIG.format(db=tmp_path / "h.db"))

    code, said = policy("reload", cwd=tmp_path)
    assert code == 0 and "stamped" in said, said
    good = read_stamp(tmp_path / "policies")
    code, said = policy("status", cwd=tmp_path)
    assert code == 0 and "in force" in said and str(good) in said, said

    _write(policy_file, TYPO)
    code, said = policy("status", cwd=tmp_path)
    assert code == 1 and "not reloaded" in said, said
    code, said = policy("reload", cwd=tmp_path)
    assert code == 1 and "nothing stamped" in said, said
    assert "policies/invariants.cedar:15: policy 'big-payments'" in said
    assert read_stamp(tmp_path / "policies") == good

    write_stamp(tmp_path / "policies", version_of(read_policy_files(tmp_path / "policies")))
    code, said = policy("status", cwd=tmp_path)
    assert code == 1 and "reload failed" in said
    assert "policies/invariants.cedar:15: policy 'big-payments'" in said


def test_a_failed_load_is_counted_and_the_set_left_behind_is_a_metric(
        otel: Otel, tmp_path: Path) -> None:
    folder = write_policies(tmp_path / "policies", PAYMENTS_ONLY)
    live = LivePolicySet(folder, "deny", TOOLS, recheck_s=0)
    facts = CallFacts(tool_name="oa__purchase_pay", args={"amount": 5, "vendor": "ACME"},
                      user_id="alice", org_id="acme", agent_id="buyer")
    first = live.decide(facts).version

    _write(folder / "invariants.cedar", TYPO)
    assert live.decide(facts).version == first  # not stamped: not taken
    write_stamp(folder, version_of(read_policy_files(folder)))
    assert live.decide(facts).version == first  # stamped, but it does not load

    def outcomes() -> dict[str, int]:
        return {p.attributes[OUTCOME]: p.value for p in otel.points(M_LOADS)}

    assert outcomes() == {"not_stamped": 1, "failed": 1}
    assert [p.value for p in otel.points(M_FAILING)] == [1]
    assert live.status().state == "reload failed"

    _write(folder / "invariants.cedar", INVARIANTS)
    reload_policies(folder, "deny", TOOLS)
    assert live.decide(facts).version != first
    assert outcomes() == {"not_stamped": 1, "failed": 1, "loaded": 1}
    assert [p.value for p in otel.points(M_FAILING)] == [0]
