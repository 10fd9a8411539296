"""The ``hookgate`` command, run as a real subprocess: what a person at a terminal sees."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from tests.fakes.chat_completions import FakeChatCompletions, closed_port_url, tool_then_answer

REPO = Path(__file__).resolve().parents[2]

POLICIES = '''
from hookgate import HookResult, PostToolUseHook, PreToolUseHook, SessionStartHook


class VendorCase(PreToolUseHook):
    """Writes vendor names the way the OA system spells them."""

    name = "vendor_case"
    priority = 10
    matcher = "oa__purchase_pay"

    def should_trigger(self, ctx):
        return ctx.tool_name == self.matcher

    async def execute(self, ctx):
        args = {**ctx.tool_args, "vendor": ctx.tool_args["vendor"].upper()}
        return HookResult(modified_args=args, side_effects=["vendor name normalised"])


class FlakyNotifier(PostToolUseHook):
    name = "flaky_notifier"
    priority = 50
    fail_mode = "open"
    timeout = 2

    async def execute(self, ctx):
        raise RuntimeError("notification service unreachable")


class AuditDay(SessionStartHook):
    name = "audit_day"
    priority = 5

    async def execute(self, ctx):
        return HookResult(additional_context="Today is audit day.")
'''

CONFIG = """
orgs: [{id: acme}]
users: [{id: alice, org: acme}, {id: bob, org: acme}]
tools:
  - hookgate.examples.purchasing:oa__purchase_pay
  - hookgate.examples.purchasing:oa__list_vendors
models:
  script:
    type: scripted
    turns:
      - tool_calls: [{name: oa__purchase_pay, args: {amount: 100, vendor: acme}}]
      - answer: paid
agents:
  - id: buyer
    org: acme
    owner: alice
    model: script
    tools: [oa__purchase_pay, oa__list_vendors]
    model_config_json:
      hooks:
        class_hooks: [cli_policies:FlakyNotifier, cli_policies:VendorCase, cli_policies:AuditDay]
"""


def hookgate(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "FORCE_COLOR"}
    paths = [str(cwd)] if cwd else []
    env.update(COLUMNS="200", NO_COLOR="1",
               PYTHONPATH=os.pathsep.join([*paths, str(REPO), env.get("PYTHONPATH", "")]))
    # Not the repository: `run` creates the example's SQLite file in its working folder.
    with tempfile.TemporaryDirectory(prefix="hookgate-cli-") as scratch:
        return subprocess.run(
            [sys.executable, "-m", "hookgate.cli.main", *args],
            capture_output=True, text=True, env=env, cwd=cwd or scratch, timeout=120,
        )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A folder with a hook module and a configuration that uses it."""
    (tmp_path / "cli_policies.py").write_text(POLICIES, encoding="utf-8")
    (tmp_path / "hookgate.yaml").write_text(textwrap.dedent(CONFIG), encoding="utf-8")
    return tmp_path


def lines_with(output: str, *needles: str) -> list[int]:
    """The index of the first line containing each needle (for order assertions)."""
    lines = output.splitlines()
    return [next(i for i, line in enumerate(lines) if n in line) for n in needles]


# -- hooks ---------------------------------------------------------------------------------


def test_hooks_lists_the_catalog_with_the_gate_and_its_alias():
    done = hookgate("hooks")

    assert done.returncode == 0, done.stderr
    gate_line = next(line for line in done.stdout.splitlines() if "approval_gate" in line)
    assert "approval_gate" in gate_line and "builtin" in gate_line
    assert "Human approval gate" in gate_line


# -- run -----------------------------------------------------------------------------------


def test_the_purchasing_example_pays_the_small_order_and_the_gate_blocks_the_large_one():
    done = hookgate("run", "--example", "purchasing", "--agent", "buyer", "buy")

    # The run completes, but a hook stopped a call: exit code 1, as the help says.
    assert done.returncode == 1, done.stderr
    out = done.stdout
    assert "result    oa__purchase_pay: Paid 12,000.00 to ACME" in out
    blocked = next(line for line in out.splitlines() if line.startswith("BLOCKED"))
    assert "oa__purchase_pay by hook 'approval_gate'" in blocked
    assert "needs a person's approval" in blocked
    assert "Paid 60,000" not in out
    order = lines_with(out, "oa__list_vendors {}", '"amount": 12000', '"amount": 60000',
                       "BLOCKED", "answer", "run completed; 1 tool call(s) stopped by a hook")
    assert order == sorted(order)


def test_run_shows_every_hook_decision_as_it_happens(project):
    done = hookgate("run", "--config", "hookgate.yaml", "--agent", "buyer", "pay acme",
                    cwd=project)

    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "hooks added to the prompt: Today is audit day." in out
    assert ("hook 'vendor_case' rewrote the arguments → "
            '{"amount": 100.0, "vendor": "ACME"}') in out
    assert "effect  vendor_case: vendor name normalised" in out
    # What the hook raised is shown to whoever runs the CLI (it holds the configuration).
    assert ("FAILED  hook 'flaky_notifier' failed (RuntimeError): RuntimeError: notification "
            "service unreachable (fail_mode=open)") in out
    assert "result    oa__purchase_pay: Paid 100.00 to ACME" in out
    assert "answer    paid" in out


def test_run_exits_1_when_the_agents_hooks_cannot_be_built(project):
    config = project / "hookgate.yaml"
    config.write_text(config.read_text().replace("cli_policies:AuditDay",
                                                 "cli_policies:AuditNight"))

    done = hookgate("run", "-c", "hookgate.yaml", "-a", "buyer", "pay acme", cwd=project)

    assert done.returncode == 1
    assert "has no attribute 'AuditNight'" in done.stdout
    assert "run blocked_build" in done.stdout


def test_run_drives_an_agent_with_an_openai_compatible_endpoint(project):
    respond = tool_then_answer("oa__purchase_pay", {"amount": 250, "vendor": "globex"})
    with FakeChatCompletions("sk-cli", "tiny-model", respond) as fake:
        config = project / "hookgate.yaml"
        config.write_text(config.read_text().replace(
            "models:\n", f"models:\n  gpt: {{type: openai, base_url: '{fake.base_url}', "
                         "api_key: sk-cli, model: tiny-model}\n"
        ).replace("model: script", "model: gpt"))

        done = hookgate("run", "-c", "hookgate.yaml", "-a", "buyer", "pay globex", cwd=project)

    assert done.returncode == 0, done.stderr
    assert "answer    Done: Paid 250.00 to GLOBEX" in done.stdout
    assert fake.requests[0].body["messages"][0]["content"].endswith("Today is audit day.")
    assert fake.requests[1].tool_messages()[0]["content"] == (
        "Paid 250.00 to GLOBEX; OA payment confirmed.")


def test_run_against_an_endpoint_that_is_down_exits_1_naming_it(project):
    url = closed_port_url()
    config = project / "hookgate.yaml"
    config.write_text(config.read_text().replace(
        "models:\n", f"models:\n  gpt: {{type: openai, base_url: '{url}', api_key: k, "
                     "model: m, max_retries: 0}\n"
    ).replace("model: script", "model: gpt"))

    done = hookgate("run", "-c", "hookgate.yaml", "-a", "buyer", "pay", cwd=project)

    assert done.returncode == 1
    error = next(line for line in done.stdout.splitlines() if line.startswith("ERROR"))
    assert f"model 'm' at {url}: cannot connect" in error
    assert "run failed" in done.stdout


def test_run_of_an_agent_not_in_the_file_exits_2_listing_the_agents(project):
    done = hookgate("run", "-c", "hookgate.yaml", "-a", "seller", "hi", cwd=project)

    assert done.returncode == 2
    assert "hookgate.yaml: agents: no agent 'seller' (agents: buyer)" in done.stderr


def test_run_as_a_user_not_in_the_file_exits_2(project):
    done = hookgate("run", "-c", "hookgate.yaml", "-a", "buyer", "-u", "mallory", "hi",
                    cwd=project)

    assert done.returncode == 2
    assert "no user 'mallory' (users: alice, bob)" in done.stderr


def test_run_with_a_broken_config_exits_2_with_the_file_and_key(project):
    config = project / "hookgate.yaml"
    config.write_text(config.read_text().replace("owner: alice", "owner: alicia"))

    done = hookgate("run", "-c", "hookgate.yaml", "-a", "buyer", "hi", cwd=project)

    assert done.returncode == 2
    assert ("error: hookgate.yaml: agents[0].owner: unknown user 'alicia' (users: alice, bob)"
            in done.stderr)


def test_run_with_an_engine_that_does_not_exist_exits_2(project):
    done = hookgate("run", "-c", "hookgate.yaml", "-a", "buyer", "--engine", "magic", "hi",
                    cwd=project)

    assert done.returncode == 2
    assert "unknown engine 'magic' (engines: react" in done.stderr


# -- check ---------------------------------------------------------------------------------


def test_check_prints_each_agents_chain_in_run_order(project):
    done = hookgate("check", "--config", "hookgate.yaml", cwd=project)

    assert done.returncode == 0, done.stderr
    out = done.stdout
    rows = [line.split("│") for line in out.splitlines() if line.count("│") >= 6]
    chain = [(r[1].strip(), r[2].strip(), r[3].strip(), r[4].strip(), r[6].strip())
             for r in rows]
    assert chain == [
        ("SessionStart", "audit_day", "5", "closed", "-"),
        ("PreToolUse", "vendor_case", "10", "closed", "oa__purchase_pay"),
        ("PreToolUse", "approval_gate", "1000000", "closed", "-"),
        ("PostToolUse", "flaky_notifier", "50", "open", "-"),
    ]
    assert "ok: 1 agent(s), 2 tool(s), 1 model(s)" in out


def test_check_of_the_bundled_example_prints_its_path():
    done = hookgate("check", "--example", "purchasing")

    assert done.returncode == 0, done.stderr
    assert "examples" in done.stdout and "purchasing.yaml" in done.stdout


def test_check_of_an_unknown_hook_exits_1_naming_file_agent_and_entry(project):
    config = project / "hookgate.yaml"
    config.write_text(config.read_text().replace("cli_policies:AuditDay", "audit_dya"))

    done = hookgate("check", "-c", "hookgate.yaml", cwd=project)

    assert done.returncode == 1
    assert ("hookgate.yaml: agents[0] ('buyer'): model_config_json.hooks.class_hooks[2] "
            "'audit_dya': unknown hook 'audit_dya'") in done.stderr
    assert "unknown hook 'audit_dya'" in done.stderr


def test_check_of_an_unknown_tool_exits_1_with_the_file_and_key(project):
    config = project / "hookgate.yaml"
    config.write_text(config.read_text().replace("tools: [oa__purchase_pay, oa__list_vendors]",
                                                 "tools: [oa__purchase_pay, oa__pay]"))

    done = hookgate("check", "-c", "hookgate.yaml", cwd=project)

    assert done.returncode == 1
    assert ("hookgate.yaml: agents[0].tools[1]: unknown tool 'oa__pay' (configured tools: "
            "oa__purchase_pay, oa__list_vendors)") in done.stderr


def test_check_without_a_configuration_says_how_to_give_one():
    done = hookgate("check")

    assert done.returncode == 1
    assert "give --config FILE (or --example NAME" in done.stderr


@pytest.mark.skipif(shutil.which("hookgate") is None, reason="the hookgate script is not installed")
def test_the_installed_hookgate_script_runs_the_same_app():
    done = subprocess.run([str(shutil.which("hookgate")), "--help"], capture_output=True,
                          text=True, timeout=60)

    assert done.returncode == 0
    for command in ("run", "check", "hooks"):
        assert command in done.stdout
