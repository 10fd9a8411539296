#!/usr/bin/env python3
"""Start or stop a throwaway PostgreSQL cluster on 127.0.0.1 for the test suite.

    python scripts/pgcluster.py start DIR [--port N]   # prints the URL on stdout
    python scripts/pgcluster.py stop DIR [--keep]      # stops it and deletes DIR

It uses the machine's PostgreSQL server binaries (initdb, pg_ctl). As root it runs them as
the ``postgres`` system user, since PostgreSQL refuses to run as root.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path


def find_bindir() -> Path | None:
    """The directory holding initdb and pg_ctl, or None when PostgreSQL is not installed."""
    env = os.environ.get("HOOKGATE_PG_BINDIR")
    candidates = [env] if env else []
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    candidates += ["/usr/local/pgsql/bin"]
    for c in candidates:
        if c and (Path(c) / "initdb").exists() and (Path(c) / "pg_ctl").exists():
            return Path(c)
    on_path = shutil.which("initdb")
    if on_path and shutil.which("pg_ctl"):
        return Path(on_path).parent
    return None


def _as_pg_user(cmd: list[str]) -> list[str]:
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *cmd]
    return cmd


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(datadir: Path, port: int | None = None, *, settings: dict[str, str] | None = None
          ) -> str:
    """Start (initialising if needed) a cluster in ``datadir``; ``settings`` are extra
    server settings (e.g. ``shared_preload_libraries``). Returns its URL."""
    bindir = find_bindir()
    if bindir is None:
        raise RuntimeError("no PostgreSQL server binaries (initdb, pg_ctl) found")
    port = port or free_port()
    datadir.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        shutil.chown(datadir, "postgres", "postgres")
    pgdata = datadir / "data"
    if not (pgdata / "PG_VERSION").exists():
        subprocess.run(
            _as_pg_user([str(bindir / "initdb"), "-D", str(pgdata), "-U", "postgres",
                         "-A", "trust", "-E", "UTF8", "--no-sync"]),
            check=True, stdout=subprocess.DEVNULL,
        )
    opts = (f"-c listen_addresses=127.0.0.1 -c port={port} -c unix_socket_directories={datadir} "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
            "-c max_connections=300")
    for key, value in (settings or {}).items():
        opts += f" -c {key}={value}"
    subprocess.run(
        _as_pg_user([str(bindir / "pg_ctl"), "-D", str(pgdata), "-o", opts, "-w",
                     "-l", str(datadir / "server.log"), "start"]),
        check=True, stdout=subprocess.DEVNULL,
    )
    return f"postgresql+asyncpg://postgres@127.0.0.1:{port}/postgres"


def stop(datadir: Path, *, keep: bool = False) -> None:
    """Stop the cluster in ``datadir`` and, unless ``keep``, delete the directory (a data
    directory is tens of MB; a test run must not leave one behind per session)."""
    bindir = find_bindir()
    if bindir is not None and (datadir / "data").exists():
        subprocess.run(
            _as_pg_user([str(bindir / "pg_ctl"), "-D", str(datadir / "data"), "-m",
                         "immediate", "-w", "stop"]),
            check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
    if not keep:
        shutil.rmtree(datadir, ignore_errors=True)


def _admin(server_url: str, sql: str) -> None:
    """Run one statement on the server of ``server_url`` (a postgresql+asyncpg:// URL)."""
    import asyncio

    import asyncpg  # type: ignore[import-untyped]

    async def run() -> None:
        conn = await asyncpg.connect(server_url.replace("postgresql+asyncpg://",
                                                        "postgresql://"))
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    asyncio.run(run())


def create_database(server_url: str, prefix: str = "t_", *, template: str | None = None
                    ) -> str:
    """A new database on the server of ``server_url``; returns its URL. It is empty, or a
    copy of the database ``template`` (a URL on the same server, with no open sessions)."""
    import uuid

    name = prefix + uuid.uuid4().hex[:16]
    copy = f' TEMPLATE "{template.rpartition("/")[2]}"' if template else ""
    _admin(server_url, f'CREATE DATABASE "{name}"{copy}')
    base, _, _ = server_url.rpartition("/")
    return f"{base}/{name}"


def drop_database(server_url: str, database_url: str) -> None:
    """Drop the database of ``database_url`` (made by ``create_database``), sessions and all."""
    name = database_url.rpartition("/")[2]
    _admin(server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] not in ("start", "stop"):
        print(__doc__, file=sys.stderr)
        return 2
    datadir = Path(argv[1]).resolve()
    if argv[0] == "start":
        port = int(argv[3]) if len(argv) > 3 and argv[2] == "--port" else None
        print(start(datadir, port))
    else:
        stop(datadir, keep="--keep" in argv[2:])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
