"""The same attempts through ``hookgate run`` as a real subprocess: a call id the model
re-uses for a gated call is a new attempt shown as asked (and blocked: the CLI has no one
to ask), and a PostToolUse hook failing with the tool's card number in its stderr shows
the fixed sentence, not the number."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.adversarial.conftest import Tally
from tests.adversarial.test_withheld_attempts import COMMAND, DIGITS
from tests.engines.world import clean_env

ROOT = Path(__file__).resolve().parents[2]

CONFIG = """
database: sqlite+aiosqlite:///{db}
orgs: [{{id: acme}}]
users: [{{id: alice, org: acme, token: t}}]
tools:
  - hookgate.examples.purchasing:oa__purchase_pay
  - tests.adversarial.test_withheld_attempts:crm__card
models:
  script:
    type: scripted
    turns:
      - tool_calls: [{{id: c1, name: oa__purchase_pay, args: {{amount: 120, vendor: ACME}}}}]
      - tool_calls: [{{id: c1, name: oa__purchase_pay, args: {{amount: 90000, vendor: EVIL}}}}]
      - tool_calls: [{{id: c1, name: crm__card, args: {{customer: Globex}}}}]
      - answer: done
agents:
  - id: buyer
    org: acme
    owner: alice
    model: script
    tools: [oa__purchase_pay, crm__card]
    model_config_json:
      hooks:
        command_hooks:
          - {{event: PostToolUse, matcher: crm__card, name: card-check, command: {command}}}
"""


def hookgate(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # The configuration names a tool of the tests package, so the checkout is on the path.
    env = clean_env()
    env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), str(ROOT)) if p)
    env["COLUMNS"] = "250"
    return subprocess.run([sys.executable, "-m", "hookgate.cli.main", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120, env=env)


def test_hookgate_run_keeps_reused_ids_apart_and_withheld_output_withheld(
        tmp_path: Path, attempt: Tally) -> None:
    (tmp_path / "cfg.yaml").write_text(CONFIG.format(db=tmp_path / "h.db",
                                                     command=json.dumps(COMMAND)))
    done = hookgate("run", "--config", "cfg.yaml", "--agent", "buyer", "pay and look up",
                    cwd=tmp_path)
    out = done.stdout + done.stderr
    assert done.returncode == 1, out  # calls were stopped by hooks: the run says so
    assert "2 tool call(s) stopped by a hook" in out
    attempt.record("cli: re-used call id for a large payment", "Paid 90" in out)
    attempt.record("cli: withheld card number printed", DIGITS in out.replace(" ", ""))
    assert "Paid 120" in out and "Paid 90" not in out
    assert "90000" in out and "EVIL" in out  # the re-use is shown as the model asked
    assert "needs a person's approval" in out
    assert DIGITS not in out.replace(" ", "")
    assert "••••1111" in out  # the operator sees what the hook printed, masked
    assert "Tool output withheld: the tool ran, but PostToolUse hook 'card-check' failed" in (
        " ".join(out.split()))
