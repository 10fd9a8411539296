"""A newcomer's first hour, as real subprocesses started from a folder that is not the
configuration's: every command that runs agents gives them the same services, paths follow
the configuration file, exit codes and messages say what happened once, help fits 80 columns.
"""

from __future__ import annotations

import json
import os
import re
import socket
import sqlite3
import subprocess
import sys
import tempfile
from functools import cache
from pathlib import Path

import pytest

from tests.live_server import free_port

REPO = Path(__file__).resolve().parents[2]

TOOLS = '''
from hookgate import tool


@tool(writes=True)
async def oa__purchase_pay(amount: float, vendor: str) -> str:
    """Pay a vendor."""
    return f"Paid {amount:,.2f} to {vendor}"


@tool
async def oa__list_vendors() -> list[str]:
    """List vendors."""
    return ["ACME"]
'''

# A Claude Code style PreToolUse script: exit 2 blocks, stderr is the reason.
CHECK_SCRIPT = """#!/bin/sh
cat > /dev/null
echo "vendor not on the list" >&2
exit 2
"""

CONFIG = """
database: sqlite+aiosqlite:///data/shop.db
orgs: [{id: acme, read_only: false}]
users: [{id: alice, org: acme}]
tools:
  - mytools:oa__purchase_pay
  - mytools:oa__list_vendors
models:
  script:
    type: scripted
    turns:
      - tool_calls: [{name: oa__list_vendors, args: {}}]
      - tool_calls: [{name: oa__purchase_pay, args: {amount: 100, vendor: ACME}}]
      - answer: Paid ACME.
agents:
  - id: buyer
    org: acme
    owner: alice
    model: script
    tools: [oa__purchase_pay, oa__list_vendors]
    model_config_json:
      hooks:
        class_hooks: [readonly_guard, audit_log]
"""

SUITE = """
name: first hour
agent: buyer
cases:
  - name: pays
    message: pay ACME
    expect:
      answer_contains: Paid ACME
      tool_calls: [{name: oa__list_vendors}, {name: oa__purchase_pay, args: {amount: 100}}]
"""

WORKFLOW = """
id: pay
as_agent: buyer
nodes:
  - {id: pay, type: tool, tool: oa__purchase_pay, args: {amount: 5, vendor: ACME}}
"""


def prose(text: str) -> str:
    """Help text with its box drawing removed and lines joined, to search for sentences."""
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", text).split())


def hookgate(*args: str, cwd: Path, columns: int = 200) -> subprocess.CompletedProcess[str]:
    """``hookgate ARGS`` in ``cwd``; PYTHONPATH names only the code under test, never the
    configuration's folder (finding that is the command's job)."""
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "PYTHONPATH")}
    env.update(COLUMNS=str(columns), NO_COLOR="1",
               PYTHONPATH=os.pathsep.join(p for p in (str(REPO / "src"),
                                                      os.environ.get("PYTHONPATH")) if p))
    return subprocess.run([sys.executable, "-m", "hookgate.cli.main", *args], cwd=cwd,
                          capture_output=True, text=True, env=env, timeout=120)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A configuration with its tools module and files next to it."""
    root = tmp_path / "project"
    (root / "hooks").mkdir(parents=True)
    (root / "data").mkdir()
    (root / "mytools.py").write_text(TOOLS, encoding="utf-8")
    (root / "hooks" / "check.sh").write_text(CHECK_SCRIPT, encoding="utf-8")
    (root / "hookgate.yaml").write_text(CONFIG, encoding="utf-8")
    (root / "suite.yaml").write_text(SUITE, encoding="utf-8")
    (root / "workflow.yaml").write_text(WORKFLOW, encoding="utf-8")
    return root


@pytest.fixture
def elsewhere(tmp_path: Path) -> Path:
    """The folder the commands are started from: not the configuration's."""
    path = tmp_path / "elsewhere"
    path.mkdir()
    return path


def audit_tools(db: Path) -> list[str]:
    with sqlite3.connect(db) as conn:
        return [row[0] for row in conn.execute(
            "SELECT tool_name FROM connector_call_logs ORDER BY seq")]


# -- every entry point gives agents the same services -----------------------------------------


def test_eval_runs_agents_whose_hooks_keep_records(project: Path, elsewhere: Path) -> None:
    done = hookgate("eval", str(project / "suite.yaml"), "-c", str(project / "hookgate.yaml"),
                    cwd=elsewhere)

    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed, 0 failed (hooks_bypassed: true)" in done.stdout
    assert "blocked_build" not in done.stdout


def test_workflow_run_gives_its_agents_the_database(project: Path, elsewhere: Path) -> None:
    done = hookgate("workflow", "run", str(project / "workflow.yaml"),
                    "-c", str(project / "hookgate.yaml"), cwd=elsewhere)

    assert done.returncode == 0, done.stdout + done.stderr
    assert "result    oa__purchase_pay: Paid 5.00 to ACME" in done.stdout
    # audit_log wrote its row into the configuration's database, as `run` and the server do.
    assert audit_tools(project / "data" / "shop.db") == ["oa__purchase_pay"]


EXAMPLE_SUITE = """
name: example
agent: buyer
cases:
  - name: pays the small order, the large one is bypassed too
    message: buy
    expect:
      answer_contains: Paid ACME 12,000
      tool_calls: [{name: oa__list_vendors}, {name: oa__purchase_pay, args: {amount: 12000}},
                   {name: oa__purchase_pay, args: {amount: 60000}}]
"""


def test_eval_and_workflow_run_the_bundled_example(elsewhere: Path) -> None:
    (elsewhere / "suite.yaml").write_text(EXAMPLE_SUITE)
    (elsewhere / "wf.yaml").write_text(WORKFLOW.replace("amount: 5", "amount: 7"))

    evaluated = hookgate("eval", "suite.yaml", "--example", "purchasing", cwd=elsewhere)
    flowed = hookgate("workflow", "run", "wf.yaml", "--example", "purchasing", cwd=elsewhere)

    assert evaluated.returncode == 0, evaluated.stdout + evaluated.stderr
    assert "1 passed, 0 failed (hooks_bypassed: true)" in evaluated.stdout
    assert flowed.returncode == 0, flowed.stdout + flowed.stderr
    assert "Paid 7.00 to ACME" in flowed.stdout
    # A bundled example keeps its SQLite file in the working directory.
    assert f"database: SQLite file {elsewhere / 'hookgate.db'}" in flowed.stderr
    assert audit_tools(elsewhere / "hookgate.db") == ["oa__purchase_pay"]


# -- paths follow the configuration file --------------------------------------------------------


def test_tools_module_hook_script_and_sqlite_file_follow_the_file(project: Path,
                                                                   elsewhere: Path) -> None:
    config = project / "hookgate.yaml"
    config.write_text(CONFIG.replace(
        "        class_hooks: [readonly_guard, audit_log]",
        "        class_hooks: [readonly_guard, audit_log]\n"
        "        command_hooks:\n"
        "          - {event: PreToolUse, matcher: oa__purchase_pay, name: vendor-check,\n"
        "             command: 'sh hooks/check.sh'}"))

    done = hookgate("run", "-c", str(config), "-a", "buyer", "pay", cwd=elsewhere)

    assert done.returncode == 1, done.stdout + done.stderr  # the script blocked the payment
    assert "result    oa__list_vendors" in done.stdout  # mytools imported from its folder
    assert ("BLOCKED   oa__purchase_pay by hook 'vendor-check': vendor not on the list"
            in done.stdout)
    database = project / "data" / "shop.db"
    assert f"database: SQLite file {database}" in done.stderr
    assert audit_tools(database) == ["oa__list_vendors", "oa__purchase_pay"]
    assert list(elsewhere.iterdir()) == []  # nothing made where the command was started


def test_a_tools_module_that_is_nowhere_says_where_it_was_looked_for(project: Path,
                                                                      elsewhere: Path) -> None:
    config = project / "hookgate.yaml"
    config.write_text(CONFIG.replace("mytools:oa__list_vendors", "mytool:oa__list_vendors"))

    done = hookgate("check", "-c", str(config), cwd=elsewhere)

    assert done.returncode == 1
    assert "tools[1]: 'mytool:oa__list_vendors' cannot be imported: No module named " \
           "'mytool'" in done.stderr
    assert "next to the configuration file" in done.stderr


def test_commands_that_open_the_database_show_it(project: Path, elsewhere: Path) -> None:
    (project / "data").rmdir()
    missing = hookgate("db", "upgrade", "-c", str(project / "hookgate.yaml"), cwd=elsewhere)
    (project / "data").mkdir()
    done = hookgate("db", "upgrade", "-c", str(project / "hookgate.yaml"), cwd=elsewhere)

    assert missing.returncode == 1
    assert f"failed: the folder {project / 'data'} does not exist" in missing.stderr
    assert done.returncode == 0, done.stderr
    assert f"database: SQLite file {project / 'data' / 'shop.db'}" in done.stderr
    assert (project / "data" / "shop.db").exists()


# -- exit codes and messages --------------------------------------------------------------------


def test_run_exits_1_when_every_write_was_blocked(project: Path, elsewhere: Path) -> None:
    config = project / "hookgate.yaml"
    config.write_text(CONFIG.replace("read_only: false", "read_only: true"))

    done = hookgate("run", "-c", str(config), "-a", "buyer", "pay", cwd=elsewhere)

    assert done.returncode == 1, done.stdout
    out = done.stdout
    assert ("BLOCKED   oa__purchase_pay by hook 'readonly_guard': Org is in read-only mode — "
            "write blocked.") in out
    assert "done      run completed; 1 tool call(s) stopped by a hook" in out
    help_text = prose(_run_help().stdout)
    assert "1 when it did not complete (failed, blocked at build, …), a hook blocked a " \
           "call or withheld its result" in help_text


def test_a_block_reason_is_said_once(project: Path, elsewhere: Path) -> None:
    config = project / "hookgate.yaml"
    config.write_text(CONFIG.replace(
        "        class_hooks: [readonly_guard, audit_log]",
        "        command_hooks:\n"
        "          - {event: PreToolUse, matcher: oa__purchase_pay, name: vendor-check,\n"
        "             command: 'sh hooks/check.sh'}"))

    done = hookgate("run", "-c", str(config), "-a", "buyer", "pay", cwd=elsewhere)

    assert "Blocked by hook" not in done.stdout and "Blocked:" not in done.stdout
    [line] = [ln for ln in done.stdout.splitlines() if "vendor not on the list" in ln]
    assert line.count("vendor-check") == 1


def test_check_names_a_bad_hook_entry_by_its_0_based_path(project: Path,
                                                           elsewhere: Path) -> None:
    config = project / "hookgate.yaml"
    config.write_text(CONFIG.replace("[readonly_guard, audit_log]", "[readonly_guard, audit_lg]"))

    done = hookgate("check", "-c", str(config), cwd=elsewhere)

    assert done.returncode == 1
    assert ("agents[0] ('buyer'): model_config_json.hooks.class_hooks[1] 'audit_lg': "
            "unknown hook 'audit_lg'") in done.stderr
    assert "hook entry" not in done.stderr and "agent 'buyer'" not in done.stderr


@pytest.mark.parametrize("command", [["demo"], ["serve", "--example", "purchasing"]])
def test_a_busy_port_is_one_line_of_error(command: list[str], elsewhere: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]

        done = hookgate(*command, "--port", str(port), cwd=elsewhere)

    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"error: cannot listen on 127.0.0.1:{port}: Address already in use (another server "
        "runs there: stop it or pick another --port)"]
    assert "Traceback" not in done.stdout + done.stderr


# -- help at 80 columns -------------------------------------------------------------------------


# One process prints every command's --help, as `hookgate … --help` would (one process per
# command would take the suite a minute on a loaded machine).
HELP_DUMP = """
import contextlib, io, json
import typer.main
from hookgate.cli.main import app

out = {}

def walk(command, path):
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.suppress(SystemExit):
        root.main(args=[*path, "--help"], prog_name="hookgate", standalone_mode=False)
    out[" ".join(path)] = buf.getvalue()
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        walk(sub, [*path, name])

root = typer.main.get_command(app)
walk(root, [])
print(json.dumps(out))
"""


@cache
def _helps() -> dict[tuple[str, ...], str]:
    """``--help`` of every command and subcommand at 80 columns, printed from an empty folder
    (not the configuration's). Once per process: two tests read it, and the dump takes ~0.8
    CPU-s; nothing a test does changes what it prints."""
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR",)}
    env.update(COLUMNS="80", NO_COLOR="1")
    with tempfile.TemporaryDirectory(prefix="hookgate-help-") as cwd:
        done = subprocess.run([sys.executable, "-c", HELP_DUMP], cwd=cwd, capture_output=True,
                              text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    return {tuple(k.split()): v for k, v in json.loads(done.stdout).items()}


@cache
def _run_help() -> subprocess.CompletedProcess[str]:
    """The real `hookgate run --help` at 80 columns, from an empty folder: once per process,
    for the two tests that read it."""
    with tempfile.TemporaryDirectory(prefix="hookgate-help-") as cwd:
        return hookgate("run", "--help", cwd=Path(cwd), columns=80)


def _leading_words(text: str) -> tuple[str, ...]:
    words: list[str] = []
    for word in text.split():
        if not re.fullmatch(r"[a-z][a-z-]*", word):
            break
        words.append(word)
    return tuple(words)


def documented_commands() -> list[tuple[tuple[str, ...], list[str]]]:
    """(command path, options named) for each command in the CLI reference's command table."""
    found: list[tuple[tuple[str, ...], list[str]]] = []
    page = REPO / "docs" / "reference" / "cli.md"
    for line in page.read_text(encoding="utf-8").splitlines():
        if not line.startswith("| `hookgate "):
            continue
        parts = line.split("`")[1].split(r"\|")
        base = _leading_words(parts[0])[1:]
        found.append((base, re.findall(r"--[a-z-]+", parts[0])))
        for part in parts[1:]:
            words = _leading_words(part)
            if words:  # "approve ID": another subcommand of the same group
                found.append(((*base[:-1], *words), re.findall(r"--[a-z-]+", part)))
            else:  # "off] --config FILE": the rest of the same command
                found[-1][1].extend(re.findall(r"--[a-z-]+", part))
    return found


def test_every_help_is_coherent_at_80_columns() -> None:
    helps = _helps()
    # The CLI reference's command table names real commands with options they have.
    documented = documented_commands()
    assert len(documented) >= 15
    for path, options in documented:
        assert path in helps, (
            f"the CLI reference names 'hookgate {' '.join(path)}', which does not exist")
        for option in options:
            assert option in helps[path], f"hookgate {' '.join(path)} has no {option}"
    assert "--config" in dict(documented)[("users", "create")]
    assert ("run",) in helps and ("approvals", "approve") in helps and len(helps) > 20
    for path, text in helps.items():
        label = " ".join(["hookgate", *path])
        usage = next(line for line in text.splitlines() if "Usage:" in line)
        assert "{" not in usage and usage.strip().startswith(f"Usage: {label}"), usage
        assert "<bool>" not in text, label
        assert "…" not in text.replace("(failed, blocked at build, …)", ""), label
        assert max(len(line) for line in text.splitlines()) <= 80, label
    top = helps[()]
    assert top.index("Start here") < top.index("demo") < top.index("run ") < top.index(
        "Server")
    assert "Usage: hookgate orgs read-only [OPTIONS] ORG [STATE]" in helps[
        ("orgs", "read-only")]
    # And the real command prints the same help.
    run_help = _run_help()
    assert run_help.returncode == 0 and run_help.stdout == helps[("run",)]
    assert "Usage: hookgate run [OPTIONS] MESSAGE" in run_help.stdout
    assert "Its SQLite file is made in the working directory" in prose(run_help.stdout)


def test_the_pinned_demo_and_serve_options_are_unchanged(elsewhere: Path) -> None:
    for command in ("demo", "serve"):
        text = hookgate(command, "--help", cwd=elsewhere, columns=80).stdout
        assert "--host" in text and "--port" in text
    refused = hookgate("serve", "--example", "purchasing", "--port", "70000", cwd=elsewhere)
    assert refused.returncode == 2 and "70000 is not a port (1 to 65535)" in refused.stderr


def test_usage_errors_name_arguments_in_capitals(elsewhere: Path) -> None:
    done = hookgate("run", "-a", "buyer", "--example", "purchasing", cwd=elsewhere)
    assert done.returncode == 2
    assert "MESSAGE" in done.stderr and "{message}" not in done.stderr


# -- the same words everywhere ------------------------------------------------------------------


def test_every_top_level_command_sits_in_a_named_panel() -> None:
    top = _helps()[()]
    assert "Commands" not in top  # no panel of one stray command
    server = top[top.index("Server"):top.index("Integrations")]
    assert "rules" in server and "approvals" in server


DURATIONS = [0, 0.4, 9, 59.9, 60, 61, 3414, 3599, 3600, 3661, 86399, 86400, 90061,
             10 * 86400 + 5, -5]


def test_the_cli_reads_a_time_left_as_the_inbox_countdown_does() -> None:
    from hookgate.durations import duration_text
    from hookgate.server.app import STATIC

    script = (STATIC / "app.js").read_text(encoding="utf-8")
    found = re.search(r"  function duration\(totalSeconds\) \{.*?\n  \}\n", script, re.S)
    assert found, "app.js has no duration()"
    program = found.group(0) + f"console.log(JSON.stringify({DURATIONS}.map(duration)));"
    inbox = subprocess.run(["node", "-e", program], capture_output=True, text=True,
                           timeout=60, check=True)

    assert json.loads(inbox.stdout) == [duration_text(s) for s in DURATIONS]
    assert duration_text(3441) == "57m 21s"


def test_check_prints_its_chain_whole_at_80_columns_into_a_pipe(project: Path,
                                                                elsewhere: Path) -> None:
    matcher = "oa__purchase_pay|oa__list_vendors_and_every_other_vendor_tool"
    config = project / "hookgate.yaml"
    config.write_text(CONFIG.replace(
        "        class_hooks: [readonly_guard, audit_log]",
        "        class_hooks: [readonly_guard, audit_log]\n"
        "        command_hooks:\n"
        f"          - {{event: PreToolUse, matcher: '{matcher}', name: vendor-check,\n"
        "             command: 'sh hooks/check.sh'}"))

    done = hookgate("check", "-c", str(config), cwd=elsewhere, columns=80)

    assert done.returncode == 0, done.stderr
    header = next(line for line in done.stdout.splitlines() if "point" in line)
    assert header.split("┃")[-1].strip() == "matcher"
    assert "priority" in header and "…" not in done.stdout
    assert any(line.rstrip().endswith(matcher) for line in done.stdout.splitlines())


def test_a_server_that_is_not_there_is_said_with_the_way_to_name_it(elsewhere: Path) -> None:
    closed = free_port()

    done = hookgate("approvals", "list", "--url", f"http://127.0.0.1:{closed}", "--token", "t",
                    cwd=elsewhere)

    assert done.returncode == 1
    assert f"cannot reach the server at http://127.0.0.1:{closed}" in done.stderr
    assert "--url or HOOKGATE_URL" in done.stderr


@pytest.mark.parametrize("database_url", ["sqlite", "postgresql"], indirect=True)
def test_status_all_time_left_and_rule_uses_read_the_same_in_the_cli_and_the_api(
        database_url: str, elsewhere: Path) -> None:
    import httpx

    from tests.live_server import live_server
    from tests.portal.steps import pending_request, start_run, wait_finished
    from tests.server.demo_world import TOKENS, auth, world

    deployment, _ = world(database_url)
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        first = start_run(c)
        request = pending_request(c)
        every = c.get("/api/confirmations", params={"status": "all"}, headers=auth("alice"))
        wrong = c.get("/api/confirmations", params={"status": "everything"},
                      headers=auth("alice"))
        creds = ("--url", srv.url, "--token", TOKENS["alice"])
        listed = hookgate("approvals", "list", "--status", "all", *creds, cwd=elsewhere)
        shown = hookgate("approvals", "show", request["id"], *creds, cwd=elsewhere)
        approved = hookgate("approvals", "approve", request["id"], "--remember", "agent_user",
                            *creds, cwd=elsewhere)
        assert approved.returncode == 0, approved.stderr
        wait_finished(c, first)
        wait_finished(c, start_run(c))  # approved by the rule: its first use
        rules = hookgate("rules", "list", *creds, cwd=elsewhere)

    assert every.status_code == 200 and [r["id"] for r in every.json()] == [request["id"]]
    assert wrong.status_code == 422 and "or all" in wrong.text
    assert re.search(r", 59m \d\ds left", listed.stdout), listed.stdout
    assert re.search(r"time left\s+59m \d\ds", shown.stdout), shown.stdout
    assert "used 1 time" in rules.stdout and "used 1 times" not in rules.stdout
