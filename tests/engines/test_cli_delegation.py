"""`hookgate run` gives agents that declare delegates the call_agent tool, as the server does."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.engines.world import clean_env

CONFIG = """
database: sqlite+aiosqlite:///{db}
orgs: [{{id: acme}}]
users: [{{id: alice, org: acme, token: t-alice}}]
tools: [hookgate.examples.purchasing:oa__purchase_pay]
models:
  lead_script:
    type: scripted
    turns:
      - tool_calls: [{{name: call_agent, args: {{agent_id: buyer, message: pay ACME 100}}}}]
      - answer: the buyer paid
  buyer_script:
    type: scripted
    turns:
      - tool_calls: [{{name: oa__purchase_pay, args: {{amount: 100, vendor: ACME}}}}]
      - answer: paid 100
agents:
  - {{id: lead, org: acme, owner: alice, model: lead_script, tools: [],
     model_config_json: {{delegates: [buyer]}}}}
  - {{id: buyer, org: acme, owner: alice, model: buyer_script, tools: [oa__purchase_pay]}}
"""


def test_hookgate_run_delegates_to_a_declared_agent(tmp_path: Path) -> None:
    config = tmp_path / "hookgate.yaml"
    config.write_text(CONFIG.format(db=tmp_path / "hookgate.db"))
    out = subprocess.run(
        [sys.executable, "-m", "hookgate.cli.main", "run", "--config", str(config),
         "--agent", "lead", "--user", "alice", "get ACME paid"],
        capture_output=True, text=True, timeout=120, env=clean_env())
    assert out.returncode == 0, out.stdout + out.stderr
    assert "call_agent" in out.stdout
    assert "delegate_start" in out.stdout and "delegate_end" in out.stdout
    assert "the buyer paid" in out.stdout
