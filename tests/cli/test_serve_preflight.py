"""`hookgate serve` checks what `hookgate check` checks before it listens: a database that
cannot be served and an agent that does not build are each one clear line and a non-zero
exit, before anything says "serving" (or, for agents, with --allow-broken-agents, named in
the log and in GET /api/agents). Real `hookgate` subprocesses, SQLite and PostgreSQL.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from tests.adversarial_tally import TALLY
from tests.instances import Instance
from tests.live_server import free_port
from tests.loopback_http import HTTP

REPO = Path(__file__).resolve().parents[2]

TOOLS = '''
from hookgate import tool


@tool(writes=True)
async def oa__purchase_pay(amount: float, vendor: str) -> str:
    """Pay a vendor."""
    return f"Paid {amount:,.2f} to {vendor}"
'''

CONFIG = """
database: {database}
orgs: [{{id: acme}}]
users: [{{id: alice, org: acme, token: t-alice}}]
tools: [mytools:oa__purchase_pay]
models:
  script: {{type: scripted, turns: [{{answer: done}}]}}
agents:
  - id: buyer
    org: acme
    model: script
    tools: [oa__purchase_pay]
    model_config_json: {{hooks: {{class_hooks: [{buyer_hook}]}}}}
  - id: seller
    org: acme
    model: script
    tools: [oa__purchase_pay]
    model_config_json: {{hooks: {{class_hooks: [{seller_hook}]}}}}
"""
GOOD_HOOK = "audit_log"
#: A hook module that fails to import, and a built-in hook with a typo'd parameter.
MISSING_MODULE = "'no_such_hooks:Guard'"
TYPO_PARAM = "{name: result_truncate, params: {max_chrs: 3000}}"


def hookgate(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR",)}
    env.update(COLUMNS="200", NO_COLOR="1",
               PYTHONPATH=os.pathsep.join(p for p in (str(REPO / "src"), str(REPO),
                                                      os.environ.get("PYTHONPATH")) if p))
    return subprocess.run([sys.executable, "-m", "hookgate.cli.main", *args], cwd=cwd,
                          capture_output=True, text=True, env=env, timeout=timeout)


def write_project(root: Path, database: str, *, buyer_hook: str = GOOD_HOOK,
                  seller_hook: str = GOOD_HOOK) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "mytools.py").write_text(TOOLS, encoding="utf-8")
    config = root / "hookgate.yaml"
    config.write_text(CONFIG.format(database=database, buyer_hook=buyer_hook,
                                    seller_hook=seller_hook), encoding="utf-8")
    return config


def port_is_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path / 'project' / 'shop.db'}"
    return _pg(request)


def _pg(request: pytest.FixtureRequest) -> str:
    from tests.conftest import _drop_pg_database, _fresh_pg_database

    server = request.getfixturevalue("postgres_server_url")
    url = _fresh_pg_database(server)
    request.addfinalizer(lambda: _drop_pg_database(server, url))
    return url


def migrate(request: pytest.FixtureRequest, database: str) -> None:
    """Bring the ``database`` fixture's new database to the head of the migrations, as
    `hookgate db upgrade` does (it runs the migrations and nothing else): made a copy of the
    worker's migrated template in place, under the same name. A `db upgrade` process here
    cost ~1 CPU-s a test; tests/cli/test_cli_first_hour.py runs the command itself."""
    if database.startswith("sqlite+aiosqlite:///"):
        shutil.copyfile(request.getfixturevalue("sqlite_template"),
                        database.removeprefix("sqlite+aiosqlite:///"))
        return
    import pgcluster

    server = request.getfixturevalue("postgres_server_url")
    template = request.getfixturevalue("postgres_template").rpartition("/")[2]
    pgcluster.drop_database(server, database)
    pgcluster._admin(server, f'CREATE DATABASE "{database.rpartition("/")[2]}" '
                             f'TEMPLATE "{template}"')


# -- agents that do not build -------------------------------------------------------------------


def test_serve_refuses_to_start_naming_each_broken_agent_and_entry(tmp_path: Path,
                                                                   database: str) -> None:
    config = write_project(tmp_path / "project", database, buyer_hook=MISSING_MODULE,
                           seller_hook=TYPO_PARAM)
    port = free_port()

    done = hookgate("serve", "-c", str(config), "--port", str(port), cwd=tmp_path)
    checked = hookgate("check", "-c", str(config), cwd=tmp_path)

    TALLY.record(f"serve an agent whose hooks do not build ({database.split(':')[0]})",
                 got_through=done.returncode == 0 or not port_is_free(port))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "serving" not in done.stdout + done.stderr and "Traceback" not in done.stderr
    assert port_is_free(port)
    said = done.stderr
    assert ("agents[0] ('buyer'): model_config_json.hooks.class_hooks[0] "
            "'no_such_hooks:Guard': 'no_such_hooks:Guard' cannot be imported") in said
    assert "agents[1] ('seller'): model_config_json.hooks.class_hooks[0]" in said
    assert "max_chrs" in said
    assert ("2 agent(s) cannot run (buyer, seller): fix them (`hookgate check` shows each "
            "chain) or start with --allow-broken-agents") in said
    # `check` says the same of each agent: one check, two commands.
    assert checked.returncode == 1
    for line in said.splitlines()[:2]:
        assert line in checked.stderr


def test_serve_with_allow_broken_agents_names_them_in_the_log_and_the_agents_list(
        tmp_path: Path, database: str) -> None:
    config = write_project(tmp_path / "project", database, buyer_hook=MISSING_MODULE)
    server = Instance("broken", config, tmp_path, args=("--allow-broken-agents",))
    server.spawn()
    try:
        server.wait_up()
        auth = {"Authorization": "Bearer t-alice"}
        agents = {a["id"]: a for a in HTTP.get(f"{server.url}/api/agents", headers=auth,
                                                 timeout=10).json()}
        started = HTTP.post(f"{server.url}/api/runs", headers=auth, timeout=10,
                            json={"agent_id": "buyer", "message": "pay"}).json()
        status = _final_status(server.url, started["run_id"], auth)
    finally:
        server.stop()

    assert agents["buyer"]["broken"] is True
    assert "'no_such_hooks:Guard' cannot be imported" in agents["buyer"]["error"]
    assert agents["seller"]["broken"] is False and agents["seller"]["error"] is None
    log = server.log.read_text()
    assert "broken agent: " in log and "agents[0] ('buyer')" in log
    assert log.index("broken agent: ") < log.index("hookgate serving")
    assert status == "blocked_build"  # what the flag accepts, as the help says


def _final_status(url: str, run_id: str, auth: dict[str, str]) -> str:
    with HTTP.stream("GET", f"{url}/api/runs/{run_id}/events", headers=auth,
                     timeout=60) as events:
        for line in events.iter_lines():
            if line.startswith("event: done"):
                break
    return str(HTTP.get(f"{url}/api/runs/{run_id}", headers=auth, timeout=10)
               .json()["status"])


# -- databases that cannot be served ------------------------------------------------------------


DATABASE_MISTAKES = [
    ("mysql://root@127.0.0.1/shop",
     "database: database URL scheme 'mysql' is not supported: use sqlite+aiosqlite:///FILE "
     "or postgresql://USER@HOST:PORT/DATABASE"),
    ("postgresq://postgres@127.0.0.1/shop",
     "database URL scheme 'postgresq' is not supported"),
    ("postgresql://postgres@127.0.0.1:{closed}/shop",
     "database: cannot reach the database at postgresql+psycopg://postgres@127.0.0.1:"
     "{closed}/shop: connection failed"),
    ("sqlite+aiosqlite:///{tmp}/no/such/folder/shop.db",
     "database: the SQLite file {tmp}/no/such/folder/shop.db cannot be made: the folder "
     "{tmp}/no/such/folder does not exist"),
]


@pytest.mark.parametrize(("command", "url", "expected"), [
    (command, url, expected) for url, expected in DATABASE_MISTAKES
    for command in ("serve", "check", "worker")
    # `worker` refuses any SQLite database first (tests/cli/test_cli.py).
    if not (command == "worker" and url.startswith("sqlite"))])
def test_a_database_mistake_is_one_line_before_anything_says_serving(
        tmp_path: Path, url: str, expected: str, command: str) -> None:
    closed = free_port()
    filled = {"closed": str(closed), "tmp": str(tmp_path)}
    config = write_project(tmp_path / "project", url.format(**filled))

    args = ["--port", str(free_port())] if command == "serve" else []
    done = hookgate(command, "-c", str(config), *args, cwd=tmp_path)

    assert done.returncode == 1, done.stdout + done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"error: {config}: database: ") or line.startswith(
        f"error: {config.name}: database: "), line
    assert expected.format(**filled) in line
    assert "serving" not in done.stdout and "Traceback" not in done.stderr
    assert not list(tmp_path.rglob("*.instance.lock"))


def test_check_refuses_a_database_migrated_by_a_newer_hookgate(
        tmp_path: Path, database: str, request: pytest.FixtureRequest) -> None:
    config = write_project(tmp_path / "project", database)
    migrate(request, database)
    sync_url = database.replace("sqlite+aiosqlite", "sqlite").replace(
        "postgresql+asyncpg", "postgresql+psycopg")
    engine = create_engine(sync_url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = 'from_the_future'"))
    engine.dispose()

    checked = hookgate("check", "-c", str(config), cwd=tmp_path)
    served = hookgate("serve", "-c", str(config), "--port", str(free_port()), cwd=tmp_path)

    TALLY.record("serve a database migrated by a newer hookgate",
                 got_through=served.returncode == 0)
    for done in (checked, served):
        assert done.returncode == 1
        assert "has schema revision from_the_future, which this hookgate does not know" \
               in done.stderr
        assert "Traceback" not in done.stderr


def test_check_says_the_database_is_new_then_up_to_date(
        tmp_path: Path, database: str, request: pytest.FixtureRequest) -> None:
    config = write_project(tmp_path / "project", database)

    before = hookgate("check", "-c", str(config), cwd=tmp_path)
    # Checking writes nothing: `check` does not make the SQLite file.
    assert not (tmp_path / "project" / "shop.db").exists()
    migrate(request, database)
    after = hookgate("check", "-c", str(config), cwd=tmp_path)

    assert before.returncode == 0, before.stderr
    assert "database: new (its schema is made on start)" in before.stdout
    assert after.returncode == 0 and "database: schema up to date" in after.stdout


# -- the SQLite instance lock -------------------------------------------------------------------


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_serve_leaves_no_instance_lock_file_behind(tmp_path: Path, sig: signal.Signals) -> None:
    config = write_project(tmp_path / "project",
                           f"sqlite+aiosqlite:///{tmp_path / 'project' / 'shop.db'}")
    server = Instance("lock", config, tmp_path)
    server.spawn()
    try:
        server.wait_up()
        lock = tmp_path / "project" / "shop.db.instance.lock"
        assert lock.exists()
        second = hookgate("serve", "-c", str(config), "--port", str(free_port()),
                          cwd=tmp_path)
        server.signal(sig)
        assert server.proc is not None and server.proc.wait(60) is not None
    finally:
        server.stop()

    assert second.returncode == 2 and "is already served by hookgate pid" in second.stderr
    assert not lock.exists()
    assert (tmp_path / "project" / "shop.db").exists()
    ignored = subprocess.run(["git", "check-ignore", "-q", "data/shop.db.instance.lock"],
                             cwd=REPO, check=False)
    assert ignored.returncode == 0
