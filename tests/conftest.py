"""Shared fixtures: real databases (SQLite files and a throwaway PostgreSQL cluster).

PostgreSQL: ``HOOKGATE_TEST_POSTGRES_URL`` (set by .ci/run) is used when present; otherwise
a cluster is started from the machine's binaries for the session. Without binaries the
PostgreSQL cases skip with the reason shown, unless ``CI`` is set, where they fail.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import shutil
import sqlite3
import ssl
import sys
import tempfile
import warnings
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

# Bytecode caches are written even where the environment turns them off
# (PYTHONDONTWRITEBYTECODE): the suite starts hundreds of Python processes (`hookgate serve`,
# the CLI, hook commands) and every xdist worker imports every test module; without the
# caches each of them compiles hookgate's modules again (about 0.35 s of CPU per process).
# Set here, before the workers and any subprocess start, so they inherit it.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

# TLS trust for every HTTP client the tests and their processes make: the CA directory
# (hashed, read lazily at a handshake) instead of a bundle file that each new client reads
# whole (SSL_CERT_FILE, or certifi's): ~25 ms of CPU per client, and the tests make thousands
# of clients (one per httpx.get(), per test client, per CLI process), all to
# loopback HTTP with no TLS at all. Set before the workers start, so they and every process
# they start inherit it.
_CA_DIRECTORY = ssl.get_default_verify_paths().capath
if _CA_DIRECTORY and os.path.isdir(_CA_DIRECTORY):
    os.environ.pop("SSL_CERT_FILE", None)
    os.environ["SSL_CERT_DIR"] = _CA_DIRECTORY

import pgcluster  # noqa: E402

from hookgate.storage.database import Database  # noqa: E402

BACKENDS = ["sqlite", "postgresql"]

pytest_plugins = ["tests.adversarial_tally", "tests.hot_routes"]


@pytest.fixture(scope="session")
def postgres_server_url() -> Iterator[str]:
    url = os.environ.get("HOOKGATE_TEST_POSTGRES_URL")
    if url:
        yield url
        return
    if pgcluster.find_bindir() is None:
        if os.environ.get("CI"):
            pytest.fail("CI is set but no PostgreSQL binaries exist: .ci/run must install them")
        pytest.skip("PostgreSQL tests skipped: no PostgreSQL server binaries (initdb, pg_ctl) "
                    "on this machine; install the 'postgresql' package to run them")
    datadir = Path(tempfile.mkdtemp(prefix="hookgate-pg-"))
    os.chmod(datadir, 0o755)
    try:
        url = pgcluster.start(datadir)
        yield url
    finally:
        pgcluster.stop(datadir)  # and delete the data directory


#: Databases made on the server named by HOOKGATE_TEST_POSTGRES_URL and not dropped yet
#: (a throwaway cluster goes with all of its databases at the end of the session).
_LEFT: list[tuple[str, str]] = []


def _fresh_pg_database(server_url: str, template: str | None = None) -> str:
    url = pgcluster.create_database(server_url, template=template)
    if server_url == os.environ.get("HOOKGATE_TEST_POSTGRES_URL"):
        _LEFT.append((server_url, url))
    return url


async def _migrate(url: str) -> None:
    database = Database(url)
    try:
        await database.upgrade()
    finally:
        await database.dispose()


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file migrated to the head once per session (per worker): a test's migrated
    database is a copy of it, which costs a file copy instead of every migration."""
    path = tmp_path_factory.mktemp("template") / "hookgate.db"
    asyncio.run(_migrate(f"sqlite+aiosqlite:///{path}"))
    with contextlib.closing(sqlite3.connect(path)) as conn:  # everything in the main file
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path


@pytest.fixture(scope="session")
def postgres_template(postgres_server_url: str) -> str:
    """A PostgreSQL database migrated to the head once per session (per worker), with no
    open sessions: a test's migrated database is made from it (CREATE DATABASE … TEMPLATE)."""
    url = _fresh_pg_database(postgres_server_url)
    asyncio.run(_migrate(url))
    return url


def migrated_database_url(request: pytest.FixtureRequest, folder: Path) -> str:
    """A URL of a database of the backend ``request.param`` names (``sqlite`` or
    ``postgresql``), already at the head of the migrations, for a module's or the session's
    own server: a copy of the worker's template (a file copy in ``folder`` on SQLite,
    CREATE DATABASE … TEMPLATE on PostgreSQL), so the server's start finds nothing to
    migrate instead of running every migration (0.6-1 s on PostgreSQL at this machine's
    load). A PostgreSQL database is dropped when the session ends."""
    if request.param == "sqlite":
        path = folder / "hookgate.db"
        shutil.copyfile(request.getfixturevalue("sqlite_template"), path)
        return f"sqlite+aiosqlite:///{path}"
    assert request.param == "postgresql", request.param
    return _fresh_pg_database(request.getfixturevalue("postgres_server_url"),
                              request.getfixturevalue("postgres_template"))


def _drop_pg_database(server_url: str, url: str) -> None:
    with contextlib.suppress(ValueError):
        _LEFT.remove((server_url, url))
    try:
        pgcluster.drop_database(server_url, url)
    except Exception as exc:  # a leftover database must not fail the test that used it
        warnings.warn(f"could not drop the test database {url}: {exc}", stacklevel=1)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Drop what module-level fixtures made on a named server (``database_url`` drops its
    own after each test)."""
    # Test modules import this file as ``tests.conftest``, which pytest may have loaded
    # under another name: each copy keeps its own list.
    for module in {sys.modules.get("tests.conftest"), sys.modules.get(__name__)}:
        left = getattr(module, "_LEFT", [])
        while left:
            module._drop_pg_database(*left[-1])  # type: ignore[union-attr]


@pytest.fixture
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A URL of a database of the backend under test (default: SQLite), already migrated to
    the head (a copy of the session's template: most tests would otherwise spend a fifth of a
    second each migrating it), or empty for a test marked ``empty_database``. A PostgreSQL
    database is dropped after its test (sessions and all): on a server named by
    HOOKGATE_TEST_POSTGRES_URL a full run otherwise left ~1,000 of them, ~8 GB."""
    backend = getattr(request, "param", "sqlite")
    empty = request.node.get_closest_marker("empty_database") is not None
    if backend == "sqlite":
        path = tmp_path / "hookgate.db"
        if not empty:
            shutil.copyfile(request.getfixturevalue("sqlite_template"), path)
        yield f"sqlite+aiosqlite:///{path}"
        return
    server = request.getfixturevalue("postgres_server_url")
    url = _fresh_pg_database(
        server, None if empty else request.getfixturevalue("postgres_template"))
    yield url
    _drop_pg_database(server, url)


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[Database]:
    """A migrated database of the backend under test (the upgrade finds it at the head,
    unless the test is marked ``empty_database``)."""
    database = Database(database_url)
    await database.upgrade()
    try:
        yield database
    finally:
        await database.dispose()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # Tests marked ``both_databases`` run once on SQLite and once on PostgreSQL.
    if metafunc.definition.get_closest_marker("both_databases") and (
        "database_url" in metafunc.fixturenames
    ):
        metafunc.parametrize("database_url", BACKENDS, indirect=True)


#: Files of long tests (a bench script's run, a real coding agent waiting out a hung
#: hookgate, a trial of thousands of claims: ten seconds to a minute each), longest first,
#: run before everything else: collected last, they ran when the other xdist workers had
#: nothing left to take, and the run waited for them alone. The slowest tests of a run
#: (`--durations`) say which files belong here.
LONG_FIRST = (
    "tests/limits/test_claims_exact.py",
    "tests/policies/test_shadow_property.py",
    "tests/test_benches.py",
    "tests/server/test_revocation.py",
    "tests/policies/test_replay.py",
    "tests/coding_agents/test_gemini_cli.py",
    "tests/coding_agents/test_codex_cli.py",
    "tests/coding_agents/test_copilot_cli.py",
    "tests/policies/test_mode_reload.py",
    "tests/policies/test_shadow_mcp_rules.py",
    "tests/server/test_audit_decisions.py",
    "tests/docs/test_postgresql_guide.py",
    "tests/runs/test_redis_streams.py",
    "tests/docs/test_policies_guide.py",
    "tests/docs/test_framework_pages.py",
    "tests/docs/test_channel_pages.py",
    "tests/policies/test_reload_instances.py",
    "tests/server/test_instances.py",
)
_FIRST = {name: rank for rank, name in enumerate(LONG_FIRST)}


def pytest_collection_finish(session: pytest.Session) -> None:
    # The collector set up as `hookgate serve` sets its own (server/app.py tune_collector):
    # what the worker holds once the tests are collected (hookgate, its dependencies, every
    # test module and item) lives until it exits, so it moves out of every later collection,
    # and a young collection waits for 20,000 new objects. A late worker's full collections
    # otherwise took up to 2 s of CPU each (4 s of wall on a loaded machine), about 15 s of
    # CPU per worker in all.
    from hookgate.server.app import tune_collector

    gc.collect()
    tune_collector()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: _FIRST.get(item.nodeid.split("::")[0], len(LONG_FIRST)))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "both_databases: run the test on SQLite and on PostgreSQL"
    )
    config.addinivalue_line(
        "markers", "empty_database: database_url is an empty database, not a migrated one"
    )
