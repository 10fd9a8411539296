"""How long hookgate takes to start, next to what its dependencies alone take to import.

Times whole processes, the contenders taking turns round after round so that all of them see
the same machine state, and prints the medians as JSON (seconds):

  - ``import_server_dependencies_s``: ``python -c "import fastapi, sqlalchemy..., uvicorn,
    pydantic, yaml, httpx"`` — what `hookgate serve` cannot start without, whatever hookgate
    does: the floor under ``serve_ready_s``.
  - ``serve_ready_s``: `hookgate serve` on a SQLite file, from exec to its first HTTP answer
    (a new database file each round, as every test's server has; the first run migrates it).
  - ``import_hookgate_s``, ``import_config_s`` (``import hookgate.config``, what every
    command that reads a configuration pays), ``help_s`` (``hookgate --help``) and
    ``check_s`` (``hookgate check`` on the same configuration).

Each figure has its CPU twin (``*_cpu_s``: user + system seconds of the process, to its
end or to ready), which a busy shared machine disturbs far less than the wall time.
Every process runs with byte code cached (in a folder of its own, written by an uncounted
first round), as an installed package has it; PYTHONDONTWRITEBYTECODE is dropped.
``--quick`` (the tests' check that the bench runs, not a measurement) times one round with
no uncounted one before it, and byte code as this environment keeps it.

Goal (issue #42): ``serve_ready_s`` at most 1.5 times ``import_server_dependencies_s``.
``--against SRC`` times another source tree (its ``src`` folder) in the same rounds.

    python bench/startup.py [--rounds 7] [--quick] [--against SRC]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

SERVER_DEPENDENCIES = ("import fastapi, sqlalchemy.ext.asyncio, sqlalchemy.orm, uvicorn, "
                       "pydantic, yaml, httpx")
CONFIG = """\
database: sqlite+aiosqlite:///{database}
orgs:
  - {{id: acme, name: ACME}}
users:
  - {{id: alice, org: acme, admin: true, token: bench-token-alice}}
tools:
  - hookgate.examples.purchasing:oa__list_vendors
models:
  script:
    type: scripted
    turns:
      - answer: done
agents:
  - id: bench
    org: acme
    owner: alice
    model: script
    instructions: Benchmark agent.
    tools: [oa__list_vendors]
    model_config_json:
      hooks:
        class_hooks: [audit_log, readonly_guard]
"""
#: serve_ready_s over import_server_dependencies_s, at most.
READY_OVER_DEPENDENCIES = 1.5


def hookgate_command() -> list[str]:
    return [sys.executable, "-m", "hookgate.cli.main"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_timed(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of ``cmd`` from exec to its end."""
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=env, cwd=cwd)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise RuntimeError(f"{cmd} exited with {proc.returncode}")
    return wall, usage.ru_utime + usage.ru_stime


def _cpu_s(pid: int) -> float:
    """A process's user + system CPU seconds so far (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def serve_ready(config: Path, env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """Wall and CPU seconds from exec of `hookgate serve` to its first HTTP answer."""
    port = free_port()
    log = (cwd / f"serve-{port}.log").open("wb")
    started = time.perf_counter()
    proc = subprocess.Popen([*hookgate_command(), "serve", "--config", str(config), "--port",
                             str(port), "--log-level", "warning"],
                            cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = started + 60
        while time.perf_counter() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"hookgate serve exited with {proc.returncode}; "
                                   f"see {log.name}")
            try:
                httpx.get(f"http://127.0.0.1:{port}/", timeout=1)
                return time.perf_counter() - started, _cpu_s(proc.pid)
            except httpx.TransportError:
                time.sleep(0.005)
        raise RuntimeError("hookgate serve was not ready within 60 s")
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        log.close()


def measure(envs: dict[str, dict[str, str]], rounds: int, workdir: Path,
            warm_up: bool = True) -> dict[str, dict[str, float]]:
    """Median seconds per contender and source tree, everything taking turns each round."""
    cmd = hookgate_command()
    times: dict[str, dict[str, list[float]]] = {name: {} for name in envs}
    # Round 0 warms the file cache and the byte code, and is not counted.
    for i in range(0 if warm_up else 1, rounds + 1):
        for name, env in envs.items():
            config = workdir / f"hookgate-{name}-{i}.yaml"
            config.write_text(CONFIG.format(database=workdir / f"{name}-{i}.db"))
            figures = {
                "import_server_dependencies_s": run_timed(
                    [sys.executable, "-c", SERVER_DEPENDENCIES], env, workdir),
                "import_hookgate_s": run_timed([sys.executable, "-c", "import hookgate"],
                                               env, workdir),
                "import_config_s": run_timed([sys.executable, "-c", "import hookgate.config"],
                                             env, workdir),
                "help_s": run_timed([*cmd, "--help"], env, workdir),
                "serve_ready_s": serve_ready(config, env, workdir),
                "check_s": run_timed([*cmd, "check", "--config", str(config)], env, workdir),
            }
            if i:
                for key, (wall, cpu) in figures.items():
                    times[name].setdefault(key, []).append(wall)
                    times[name].setdefault(key.removesuffix("_s") + "_cpu_s", []).append(cpu)
    return {name: {k: round(statistics.median(v), 3) for k, v in per.items()}
            for name, per in times.items()}


def with_ratio(figures: dict[str, float]) -> dict[str, Any]:
    wall = figures["serve_ready_s"] / figures["import_server_dependencies_s"]
    cpu = figures["serve_ready_cpu_s"] / figures["import_server_dependencies_cpu_s"]
    return {**figures, "serve_ready_over_dependencies": round(wall, 2),
            "serve_ready_over_dependencies_cpu": round(cpu, 2)}


def main(opts: argparse.Namespace) -> dict[str, Any]:
    src = str(Path(__file__).resolve().parent.parent / "src")
    workdir = Path(tempfile.mkdtemp(prefix="hookgate-startup-"))
    # Byte code cached as an installed package has it (pip compiles on install): the
    # uncounted first round writes it, under the work folder, not into the source trees.
    base = {k: v for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE")}
    base["PYTHONPYCACHEPREFIX"] = str(workdir / "pycache")
    if opts.quick:  # no round to write that cache: byte code as this environment keeps it
        base = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    envs = {"this": {**base, "PYTHONPATH": src}}
    if opts.against:
        envs["against"] = {**base, "PYTHONPATH": str((opts.against / "src").resolve())}
    try:
        figures = measure(envs, 1 if opts.quick else opts.rounds, workdir,
                          warm_up=not opts.quick)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    this = with_ratio(figures["this"])
    out: dict[str, Any] = {
        "benchmark": "startup",
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "rounds": 1 if opts.quick else opts.rounds,
        **this,
        "targets": {"serve_ready_over_dependencies_at_most": READY_OVER_DEPENDENCIES,
                    "serve_ready_met": this["serve_ready_over_dependencies"]
                    <= READY_OVER_DEPENDENCIES,
                    "serve_ready_cpu_met": this["serve_ready_over_dependencies_cpu"]
                    <= READY_OVER_DEPENDENCIES},
    }
    if opts.against:
        out["against"] = {"source": str(opts.against.resolve()),
                          **with_ratio(figures["against"])}
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--quick", action="store_true",
                        help="one round, none uncounted (checks the bench runs)")
    parser.add_argument("--against", metavar="SRC", type=Path,
                        help="another source tree (a checkout) timed in the same rounds")
    print(json.dumps(main(parser.parse_args()), indent=2))
