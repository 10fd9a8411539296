"""``hookgate workflow run`` and ``hookgate eval``, run as real subprocesses."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from tests.engines.world import clean_env

CONFIG = """
database: sqlite+aiosqlite:///{db}
orgs: [{{id: acme}}]
users: [{{id: alice, org: acme, token: t}}]
tools:
  - hookgate.examples.purchasing:oa__purchase_pay
  - hookgate.examples.purchasing:oa__list_vendors
models:
  writer: {{type: scripted, turns: [{{answer: "Month closed."}}]}}
  payer:
    type: scripted
    turns:
      - tool_calls: [{{name: oa__purchase_pay, args: {{amount: 60000, vendor: ACME}}}}]
      - answer: Paid ACME 60,000.
agents:
  - {{id: buyer, org: acme, owner: alice, model: payer,
     tools: [oa__purchase_pay, oa__list_vendors]}}
  - {{id: writer, org: acme, owner: alice, model: writer}}
"""

WORKFLOW = """
id: month_end
as_agent: buyer
nodes:
  - {id: vendors, type: tool, tool: oa__list_vendors}
  - {id: has_acme, type: condition, expr: "'ACME' in vendors"}
  - {id: small, type: tool, tool: oa__purchase_pay, args: {amount: 12000, vendor: ACME}}
  - {id: large, type: tool, tool: oa__purchase_pay, args: {amount: 60000, vendor: ACME}}
  - {id: close, type: agent, agent: writer, message: "Close the month for {{ input }}"}
edges:
  - {from: vendors, to: has_acme}
  - {from: has_acme, to: small, when: true}
  - {from: has_acme, to: large, when: true}
  - {from: small, to: close}
"""

SUITE = """
name: purchasing evals
agent: buyer
cases:
  - name: large payment runs without waiting (hooks bypassed)
    message: pay ACME 60000
    expect:
      answer_contains: Paid ACME
      tool_calls: [{name: oa__purchase_pay, args: {amount: 60000}}]
  - name: expects a different vendor
    message: pay Globex
    expect:
      tool_calls: [{name: oa__purchase_pay, args: {vendor: Globex}}]
"""


def hookgate(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hookgate.cli.main", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120,
                          env=clean_env())


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).format(db=tmp_path / "h.db") if name == "cfg.yaml"
                    else text, encoding="utf-8")
    return path


def test_workflow_run_shows_each_node_and_blocks_what_needs_a_person(tmp_path: Path) -> None:
    write(tmp_path, "cfg.yaml", CONFIG)
    write(tmp_path, "wf.yaml", WORKFLOW)

    done = hookgate("workflow", "run", "wf.yaml", "--config", "cfg.yaml", "--input", "March",
                    cwd=tmp_path)

    # The run completes, but one call was blocked for want of an approval service: exit 1.
    assert done.returncode == 1, done.stderr + done.stdout
    out = done.stdout
    assert "Paid 12,000.00 to ACME" in out
    assert "requires a person's approval" in out or "no approval service" in out
    assert "node_result" in out and "Month closed." in out


def test_workflow_run_refuses_a_malformed_file_with_the_reason(tmp_path: Path) -> None:
    write(tmp_path, "cfg.yaml", CONFIG)
    write(tmp_path, "wf.yaml", WORKFLOW.replace("{from: small, to: close}",
                                                "{from: small, to: nowhere}"))
    done = hookgate("workflow", "run", "wf.yaml", "--config", "cfg.yaml", cwd=tmp_path)
    assert done.returncode == 2
    assert "unknown node 'nowhere'" in done.stderr


def test_eval_reports_each_case_says_hooks_were_bypassed_and_fails_on_a_failed_case(
        tmp_path: Path) -> None:
    write(tmp_path, "cfg.yaml", CONFIG)
    write(tmp_path, "suite.yaml", SUITE)

    done = hookgate("eval", "suite.yaml", "--config", "cfg.yaml", cwd=tmp_path)

    assert done.returncode == 1, done.stderr
    out = done.stdout
    assert "large payment runs without waiting" in out and "PASS" in out
    assert "expects a different vendor" in out and "FAIL" in out
    assert "1 passed, 1 failed (hooks_bypassed: true)" in out

    passing = SUITE.split("  - name: expects")[0]
    write(tmp_path, "suite.yaml", passing)
    assert hookgate("eval", "suite.yaml", "--config", "cfg.yaml", cwd=tmp_path).returncode == 0
