"""Every script under bench/ runs in its quick mode and prints the JSON it promises, so a
renamed function or a changed route cannot silently break a benchmark again.

The scripts run as subprocesses (a real `hookgate serve` for bench/throughput.py), against
SQLite and the test PostgreSQL server. Figures are not checked against targets here: that
is what the benches are for, on a quiet machine.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from numbers import Real
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"


def _number(value: Any) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool) and value == value


def _p50_p99(figure: dict[str, Any]) -> None:
    assert _number(figure["p50_us"]) and _number(figure["p99_us"]), figure
    assert 0 < figure["p50_us"] <= figure["p99_us"], figure


def check_hooks(out: dict[str, Any]) -> None:
    _p50_p99(out["no_hooks"])
    names = {"audit_log", "readonly_guard", "connector_rate_limit", "result_truncate",
             "all_four"}
    assert set(out["with_database"]) == {"sqlite", "postgresql"}
    for figures in (*out["with_database"].values(), out["decision_logic"]):
        assert set(figures) == names
        for figure in figures.values():
            _p50_p99(figure)
            assert _number(figure["hook_p50_us"])
    assert set(out["declarative"]) == {"command_hook", "python_hook"}
    # A process per call costs more than a function call, by any measure.
    assert (out["declarative"]["command_hook"]["p50_us"]
            > out["declarative"]["python_hook"]["p50_us"])
    assert isinstance(out["targets"]["four_with_postgresql_met"], bool)


def check_throughput(out: dict[str, Any]) -> None:
    startup = out["startup"]
    for key in ("import_hookgate_s", "import_public_names_s", "help_s",
                "import_server_dependencies_s", "serve_ready_s"):
        assert _number(startup[key]) and 0 < startup[key] < 60, (key, startup)
    assert set(out["backends"]) == {"sqlite", "postgresql"}
    # SQLite is served by one instance; PostgreSQL by the two the quick run asks for, its
    # clients spread over them (every run completed, whichever instance advanced it).
    assert out["backends"]["sqlite"]["instances"] == 1
    assert out["backends"]["postgresql"]["instances"] == 2
    for name, backend in out["backends"].items():
        assert _number(backend["serve_ready_s"])
        levels = backend["levels"]
        assert [level["concurrency"] for level in levels] == [1, 8]
        for level in levels:
            assert level["runs"] >= 8
            for key in ("runs_per_s", "guarded_calls_per_s", "server_cpu_ms_per_run",
                        "sql_statements_per_run", "transactions_per_run"):
                assert _number(level[key]) and level[key] > 0, (name, key, level)
            # Each statement is in a transaction; a transaction has one at least.
            assert level["transactions_per_run"] <= level["sql_statements_per_run"], level
            assert 0 < level["latency_ms"]["p50"] <= level["latency_ms"]["p99"]


def check_dispatch(out: dict[str, Any]) -> None:
    assert [r["hooks_per_point"] for r in out["results"]] == [0, 1, 5, 20]
    for r in out["results"]:
        assert _number(r["registry_us"]) and _number(r["guarded_path_us"])
    assert _number(out["ratio_at_5"])


def check_approval(out: dict[str, Any]) -> None:
    assert [r["pending"] for r in out["results"]] == [1, 20]
    for r in out["results"]:
        assert r["wake_latency_ms"]["decisions"] >= 1
        assert _number(r["wake_latency_ms"]["p50"]) and _number(r["rss_mb"])


def check_mcp_gateway(out: dict[str, Any]) -> None:
    paths = {"direct", "in_process_bare", "stdio_bare", "http_bare", "in_process_guarded",
             "stdio_guarded", "http_guarded", "stdio_in_process_bare", "stdio_http_bare"}
    if not out["skipped"]:  # FastMCP's proxy, side by side, where FastMCP is installed
        paths |= {"fastmcp_proxy_http", "fastmcp_proxy_stdio"}
        assert _number(out["http_bare_minus_fastmcp_http_p50_ms"])
        ratio = out["stdio_relay_over_fastmcp_stdio"]
        assert _number(ratio["added_p50"]) and _number(ratio["cpu_per_call"]), ratio
    assert set(out["paths"]) == paths, out["paths"]
    for figure in out["paths"].values():
        assert _number(figure["p50_ms"]) and figure["p50_ms"] > 0, figure
    assert set(out["added_p50_ms"]) == paths - {"direct"}
    assert all(_number(v) for v in out["added_p50_ms"].values())
    # Where each path spends CPU, by process (a quick run may see too few ticks to name all).
    assert set(out["cpu_us_per_call"]) == paths
    for spent in out["cpu_us_per_call"].values():
        assert set(spent) <= {"client", "serve", "relay", "stdio_in_process", "downstream",
                              "fastmcp_proxy", "other"}, spent
        assert all(_number(v) for v in spent.values()), spent


def check_policy_eval(out: dict[str, Any]) -> None:
    assert set(out["results"]) == {"10", "1000"}
    for count, figures in out["results"].items():
        assert figures["policies"] == int(count)
        for name in ("cedar", "cedar_engine_only", "python_hook"):
            _p50_p99(figures[name])


def check_policy_replay(out: dict[str, Any]) -> None:
    assert out["calls"] == 2000 and out["runs"] == 1, out
    assert 0 < out["changed"] < out["calls"], out
    for key in ("replay_calls_per_s", "replay_calls_per_minute", "live_decisions_per_s"):
        assert _number(out[key]) and out[key] > 0, (key, out)
    assert isinstance(out["goal_met"], bool)


def check_perf_internals(out: dict[str, Any]) -> None:
    assert out["passed"] >= 1 and out["failed"] == out["errors"] == 0, out


def check_guarded_calls(out: dict[str, Any]) -> None:
    _p50_p99(out["framework_tool_call"])
    for path in ("two_http_round_trips", "in_process", "loopback_http"):
        _p50_p99(out[path])
        assert _number(out[path]["added_p50_us"]) and _number(out[path]["added_p99_us"])
    for path in ("two_http_round_trips", "loopback_http"):
        assert _number(out[path]["server_cpu_us_per_call"]), out[path]
    assert set(out["added_p50_over_the_floor"]) == {"in_process", "loopback_http"}
    assert set(out["added_over_the_floor_us"]) == {"loopback_http"}
    # Run on PostgreSQL (the SQLite file is the default): what each path's database spent.
    assert out["database"] == "postgresql", out
    for path in ("in_process", "in_process_async", "loopback_http"):
        assert _number(out[path]["postgresql_cpu_us_per_call"]), out[path]
    assert all(_number(v) for v in out["added_over_the_floor_us"]["loopback_http"].values())
    assert all(isinstance(met, bool) for met in out["targets"].values())
    assert out["calls_per_path"] > 0


def check_coding_agent_hooks(out: dict[str, Any]) -> None:
    assert out["agents"] == ["codex", "copilot", "cursor", "gemini"], out["agents"]
    paths = ["noop_command_hook", "python_command_hook", "claude_code_http_pre_tool_use"]
    paths += [f"{a}_{hook}" for a in out["agents"] for hook in ("pre_tool_use", "post_tool_use")]
    for path in paths:
        figure = out[path]
        assert 0 < figure["p50_ms"] <= figure["p99_ms"], (path, figure)
    for agent, added in out["added"].items():
        assert _number(added["pre_tool_use_over_noop_p50_ms"]), (agent, added)
        assert _number(added["pre_tool_use_over_claude_code_p50_ms"]), (agent, added)
        assert isinstance(added["within_15_ms"], bool), (agent, added)
    assert out["calls_per_path"] > 0


def check_durable_path(out: dict[str, Any]) -> None:
    pg = out["postgresql"]
    for level in pg["levels"]:
        for system in ("hookgate", "langgraph", "floor"):
            figure = level[system]
            assert _number(figure["runs_per_s"]) and figure["runs_per_s"] > 0, figure
            assert _number(figure["commits_per_run"]), figure
        for key in ("hookgate_to_langgraph", "hookgate_to_floor"):
            assert _number(level[key]) and level[key] > 0, level
        # CPU per run: the server's, and PostgreSQL's (its backends, read from /proc: the
        # test's cluster runs on this machine) for hookgate and the floor.
        hookgate = level["hookgate"]
        assert _number(hookgate["server_cpu_ms_per_run"]) and hookgate[
            "server_cpu_ms_per_run"] > 0, hookgate
        for system in ("hookgate", "floor"):
            cpu = level[system]["postgresql_cpu_ms_per_run"]
            assert _number(cpu) and cpu > 0, level[system]
    decisions = pg["decision_to_tool_start_ms"]
    for system in ("hookgate", "hookgate_other_instance", "langgraph_http",
                   "langgraph_in_process"):
        latency = decisions[system]
        assert latency["n"] >= 1 and 0 < latency["p50"] <= latency["p99"], latency
    for key in ("hookgate_to_langgraph_http_p50", "hookgate_to_langgraph_in_process_p50"):
        assert _number(decisions[key]) and decisions[key] > 0, decisions
    for system in ("hookgate", "langgraph"):
        assert _number(pg["parking_per_s"][system]) and pg["parking_per_s"][system] > 0
    for level in out["sqlite"]["levels"]:
        assert level["hookgate_runs_per_s"] > 0 and level["floor_runs_per_s"] > 0, level


def check_startup(out: dict[str, Any]) -> None:
    for key in ("import_server_dependencies_s", "serve_ready_s", "import_hookgate_s",
                "import_config_s", "help_s", "check_s"):
        assert _number(out[key]) and out[key] > 0, (key, out)
    assert _number(out["serve_ready_over_dependencies"]), out
    assert isinstance(out["targets"]["serve_ready_met"], bool), out


def check_agentdojo(out: dict[str, Any]) -> None:
    figures = out["v1"]["overall"]
    assert figures["pairs"] > 0 and figures["user_tasks"] > 0, figures
    for key in ("benign_utility", "attack_success", "attacker_calls_unasked",
                "asked_attacker_calls_with_card_reason"):
        assert _number(figures[key]) and 0 <= figures[key] <= 1, (key, figures)
    assert _number(figures["approvals_per_benign_task"]), figures
    assert set(out["v1"]["suites"]) == {"banking"}


def check_report_write(out: dict[str, Any]) -> None:
    for form in ("three_statements", "one_statement"):
        assert len(out[form]["rounds"]) == out["rounds"] == 2, out
        for key in ("backend_cpu_us", "wall_us"):
            assert _number(out[form][key]) and out[form][key] > 0, (form, key, out)
    assert all(_number(v) and v > 0 for v in out["one_over_three"].values()), out


def check_provenance(out: dict[str, Any]) -> None:
    for backend in ("sqlite", "postgresql"):
        figures = out[backend]
        assert figures["no_reader"]["fact_reads_per_call"] == 0, figures
        assert figures["with_reader"]["fact_reads_per_call"] >= 1, figures
        for name in ("no_reader", "with_reader"):
            assert 0 < figures[name]["p50_us"] <= figures[name]["p99_us"], figures
        assert _number(figures["lookup_p50_us"]), figures


#: Each script's quick-mode arguments and the check of its output. bench/approval.py is run
#: with small sizes through its own options.
SCRIPTS: dict[str, tuple[list[str], Callable[[dict[str, Any]], None]]] = {
    "hooks.py": (["--quick"], check_hooks),
    "durable_path.py": (["--quick"], check_durable_path),
    # Two instances on PostgreSQL: the one run checks the bench both ways (a separate run
    # with --instances 2 cost another ~10 s of start-ups and runs).
    "throughput.py": (["--quick", "--instances", "2"], check_throughput),
    "dispatch.py": (["--quick"], check_dispatch),
    "mcp_gateway.py": (["--quick"], check_mcp_gateway),
    "policy_eval.py": (["--quick"], check_policy_eval),
    "policy_replay.py": (["--quick"], check_policy_replay),
    "guarded_calls.py": (["--quick"], check_guarded_calls),
    "coding_agent_hooks.py": (["--quick"], check_coding_agent_hooks),
    "agentdojo.py": (["--quick"], check_agentdojo),
    "startup.py": (["--quick"], check_startup),
    "provenance.py": (["--quick"], check_provenance),
    "report_write.py": (["--quick"], check_report_write),
    "approval.py": (["--sizes", "1,20", "--idle", "0.3", "--sample", "5"], check_approval),
    # One file's perf tests (a second or two), not all of them.
    "perf_internals.py": (["tests/runs/test_event_deferral.py"], check_perf_internals),
}


def test_every_bench_script_is_checked_here() -> None:
    assert sorted(p.name for p in BENCH.glob("*.py")) == sorted(SCRIPTS)
    assert sorted(p.name for p in (BENCH / "instructions").glob("*.py")
                  if not p.name.startswith("_")) == sorted(INSTRUCTION_SCRIPTS)


#: bench/instructions/: counts that do not depend on the machine's load, instructions under
#: valgrind and system calls under strace (minutes each, the tool needed), so the default
#: run checks that each starts and says how it is run (its imports of the benches it drives
#: resolve); the perf run (bench/perf_internals.py) counts for real.
INSTRUCTION_SCRIPTS: dict[str, list[str]] = {
    "guarded_call.py": ["--calls", "3", "--warm-up", "2"],
    "durable_run.py": ["--runs", "2"],
    "mcp_relay.py": ["--calls", "3", "--warm-up", "2"],
    "syscalls.py": ["--runs", "4", "--concurrency", "2"],
}
#: The tool each of them counts with.
COUNTED_BY = {"syscalls.py": "strace"}


@pytest.mark.parametrize("script", sorted(INSTRUCTION_SCRIPTS))
def test_an_instruction_count_script_says_how_it_is_run(script: str) -> None:
    done = subprocess.run([sys.executable, str(BENCH / "instructions" / script), "--help"],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert done.returncode == 0, done.stderr[-3000:]
    tool = COUNTED_BY.get(script, "callgrind")
    assert "--src" in done.stdout and tool in done.stdout, done.stdout


def test_the_guarded_call_instruction_count_refuses_a_folder_without_hookgate(
        tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(BENCH / "instructions" / "guarded_call.py"),
                           "--src", str(tmp_path)], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert done.returncode == 2
    assert "is not a source tree with a hookgate package" in done.stderr, done.stderr


@pytest.mark.perf
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("script", sorted(INSTRUCTION_SCRIPTS))
def test_an_instruction_count_script_counts_this_tree(
        script: str, postgres_server_url: str, tmp_path: Path) -> None:
    if COUNTED_BY.get(script) == "strace":
        if shutil.which("strace") is None:
            pytest.fail("strace is not installed (apt-get install strace)")
    elif shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        pytest.fail("valgrind is not installed (apt-get install valgrind)")
    args = [*INSTRUCTION_SCRIPTS[script], "--src", str(ROOT / "src")]
    if script in ("durable_run.py", "syscalls.py"):
        args += ["--postgres-url", postgres_server_url]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run([sys.executable, str(BENCH / "instructions" / script), *args],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1700)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout)
    if script == "syscalls.py":
        # A run's three requests are answered on its sockets: a write each at least.
        assert out["by_call"].get("sendto", 0) >= 3 and out["per_run"] > 3, out
        return
    counts = (out["per_run"],) if script == "durable_run.py" else tuple(
        n for paths in out["trees"].values() for figures in paths.values()
        for n in figures["per_call"])
    assert counts and all(_number(n) and n > 100_000 for n in counts), out


@pytest.mark.perf
@pytest.mark.timeout(1800)
def test_the_decision_instruction_count_counts_this_tree(
        postgres_server_url: str, tmp_path: Path) -> None:
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        pytest.fail("valgrind is not installed (apt-get install valgrind)")
    done = subprocess.run(
        [sys.executable, str(BENCH / "instructions" / "durable_run.py"), "--decisions",
         "--runs", "2", "--src", str(ROOT / "src"), "--postgres-url", postgres_server_url],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        capture_output=True, text=True, timeout=1700)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout)
    assert out["measured"] == "decisions" and _number(out["per_run"]), out
    assert out["per_run"] > 100_000, out


def test_the_syscall_count_refuses_a_folder_without_hookgate(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(BENCH / "instructions" / "syscalls.py"),
                           "--src", str(tmp_path), "--sqlite"], capture_output=True,
                          text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert done.returncode == 2
    assert "is not a source tree with a hookgate package" in done.stderr, done.stderr


def test_the_decision_instruction_count_refuses_sqlite() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH / "instructions" / "durable_run.py"), "--decisions",
         "--sqlite", "--src", str(ROOT / "src")], capture_output=True, text=True,
        timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert done.returncode == 2
    assert "--decisions parks its runs on PostgreSQL" in done.stderr, done.stderr


@pytest.mark.timeout(300)
@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_the_bench_runs_in_quick_mode_and_prints_its_json(
        script: str, postgres_server_url: str, tmp_path: Path) -> None:
    args, check = SCRIPTS[script]
    if script in ("hooks.py", "throughput.py", "durable_path.py", "provenance.py",
                  "guarded_calls.py", "report_write.py"):
        args = [*args, "--postgres-url", postgres_server_url]
    out = run_bench(script, args, tmp_path)
    assert out.get("benchmark"), out
    check(out)


def check_approval_cross(out: dict[str, Any]) -> None:
    result = out["result"]
    latency = result["decision_to_tool_start_ms"]
    assert latency["decisions"] >= 1 and 0 < latency["p50"] <= latency["p99"]
    idle = result["db_idle"]  # statements with pg_stat_statements, else transactions
    assert len(idle) == 2
    for rates in idle.values():
        rate = rates.get("queries_per_s", rates.get("transactions_per_s"))
        assert _number(rate) and rate >= 0, rates
    assert set(result["rss_mb_while_waiting"]) == {"A", "B", "C"}


def run_bench(script: str, args: list[str], cwd: Path) -> dict[str, Any]:
    """Run bench/``script`` on this tree's sources; the JSON it printed."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(ROOT / "src"), os.environ.get("PYTHONPATH")) if p)}
    done = subprocess.run([sys.executable, str(BENCH / script), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout)
    assert isinstance(out, dict), out
    return out


@pytest.mark.timeout(300)
def test_the_cross_instance_approval_bench_runs_small_and_prints_its_json(
        postgres_server_url: str, tmp_path: Path) -> None:
    check_approval_cross(run_bench(
        "approval.py", ["--cross-instance", "--postgres", postgres_server_url,
                        "--waiting", "5", "--decisions", "1", "--idle", "0.2",
                        "--settle", "0"], tmp_path))
