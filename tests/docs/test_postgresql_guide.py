"""The guide "Several instances on PostgreSQL", followed as written against a real PostgreSQL
server: its role and database made with the page's commands, its configuration and
environment file written out, `hookgate check` and `hookgate db upgrade`, one `hookgate
serve`, one `serve --no-worker` and one `hookgate worker` on loopback, the health checks on
both instances, a run started on one and decided on the other with the page's commands,
the workers' health query, and the backup with `pg_dump`."""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from tests.docs.samples import DOCS, REPO, Block, blocks
from tests.instances import Instance
from tests.polling import wait_for

PAGE = DOCS / "deployment" / "postgresql.md"
ETC = "/etc/hookgate/"
GUIDE_URL = "postgresql://hookgate:change-me@db.internal:5432/hookgate"
TOKEN = "a-long-random-token"


def shell(block: Block, cwd: Path, env: dict[str, str], **swap: str) -> str:
    """Run a shell block with bash, `hookgate` being this interpreter's hookgate and the
    page's /etc/hookgate/ being ``cwd``."""
    script = block.code.replace(ETC, f"{cwd}/")
    for old, new in swap.items():
        script = script.replace(old, new)
    prelude = f'hookgate() {{ "{sys.executable}" -m hookgate.cli.main "$@"; }}\nset -e\n'
    done = subprocess.run(["bash", "-c", prelude + script], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{block.where}: {done.stdout}\n{done.stderr}"
    return done.stdout


def containing(page: list[Block], text: str) -> Block:
    found = [b for b in page if text in b.code]
    assert len(found) == 1, f"{PAGE.name}: {len(found)} blocks contain {text!r}"
    return found[0]


@pytest.mark.timeout(600)  # several real processes on a shared machine
def test_the_postgresql_guide_runs_as_written(tmp_path: Path,
                                              postgres_server_url: str) -> None:
    page = blocks(PAGE)
    server = urlsplit(postgres_server_url)
    if not server.hostname or not server.port:
        pytest.skip(f"the guide's createdb needs a server on TCP, not {postgres_server_url}")
    name = f"hg_docs_{secrets.token_hex(4)}"
    admin = {**os.environ, "PGHOST": server.hostname, "PGPORT": str(server.port),
             "PGUSER": server.username or "postgres", "PGDATABASE": "postgres"}
    if server.password:
        admin["PGPASSWORD"] = server.password
    url = f"postgresql://{name}:change-me@{server.hostname}:{server.port}/{name}"

    # 1. The role and the database, with the page's commands (as the server's superuser).
    create = containing(page, "createdb")
    script = re.sub(r"\bhookgate\b", name, create.code.replace("sudo -u postgres ", ""))
    done = subprocess.run(["bash", "-ec", script], env=admin, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    instances: list[Instance] = []
    try:
        # 3. The configuration (the one deploy/ ships) and the environment file.
        files = {b.file: b for b in page if b.file}
        assert set(files) == {"hookgate.yaml", "hookgate.env"}
        config = files["hookgate.yaml"].code
        assert config == (REPO / "deploy" / "hookgate.yaml").read_text(encoding="utf-8")
        (tmp_path / "hookgate.yaml").write_text(config, encoding="utf-8")
        env_file = files["hookgate.env"].code.replace(GUIDE_URL, url)
        assert url in env_file
        (tmp_path / "hookgate.env").write_text(env_file, encoding="utf-8")
        values = dict(line.split("=", 1) for line in env_file.splitlines() if line)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(REPO / "src"), str(REPO), os.environ.get("PYTHONPATH", "")]),
            "COLUMNS": "120", "NO_COLOR": "1"}

        # 4. Check and migrate (the page loads the environment file itself).
        checked = shell(containing(page, "hookgate check --config"), tmp_path,
                        {k: v for k, v in env.items() if k not in values})
        assert "ok: 1 agent(s)" in checked, checked

        # 5. Two instances on loopback: `serve` as written, `serve --no-worker` and a worker.
        both = containing(page, "--host 0.0.0.0 --port 8000\n").code.strip()
        assert both == "hookgate serve --config /etc/hookgate/hookgate.yaml --host 0.0.0.0 " \
                       "--port 8000"
        split = containing(page, "--no-worker\n").code.strip().splitlines()
        assert split == [both + " --no-worker",
                         "hookgate worker --config /etc/hookgate/hookgate.yaml"]
        hg1 = Instance("hg1", tmp_path / "hookgate.yaml", tmp_path, env=values)
        hg2 = Instance("hg2", tmp_path / "hookgate.yaml", tmp_path, env=values,
                       args=("--no-worker",))
        worker = Instance("worker", tmp_path / "hookgate.yaml", tmp_path, env=values,
                          command="worker")
        instances += [hg1, hg2, worker]
        for instance in instances:
            instance.spawn()
        hg1.wait_up()
        hg2.wait_up()

        # 11. Each instance answers its health check.
        health = containing(page, "/readyz && echo ready")
        for instance in (hg1, hg2):
            said = shell(health, tmp_path, env, **{"http://127.0.0.1:8000": instance.url})
            assert said.strip().endswith("ready"), said

        # 6. A run started on hg1 waits; its request is decided on hg2; hg1 shows it done.
        env.update(HOOKGATE_TOKEN=TOKEN)
        started = shell(containing(page, '"agent_id": "buyer"'), tmp_path, env,
                        **{"http://10.0.0.11:8000": hg1.url,
                           "http://10.0.0.12:8000": hg2.url})
        run_id = json.loads(started)["run_id"]
        auth = {"Authorization": f"Bearer {values['ALICE_TOKEN']}"}
        assert values["ALICE_TOKEN"] == TOKEN
        with httpx.Client(timeout=20, headers=auth) as client:
            def pending() -> list[str]:
                rows = client.get(f"{hg2.url}/api/confirmations",
                                  params={"status": "pending"}).json()
                return [r["id"] for r in rows if r["run_id"] == run_id]

            wait_for(pending, "the run's request on hg2", timeout=60)
            request_id = pending()[0]
            decided = shell(containing(page, "approvals approve REQUEST_ID"), tmp_path, env,
                            REQUEST_ID=request_id,
                            **{"$HG2": hg2.url})
            assert request_id in decided, decided

            def completed() -> bool:
                return client.get(f"{hg1.url}/api/runs/{run_id}").json()[
                    "status"] == "completed"

            wait_for(completed, "the run completed on hg1", timeout=60)
        seen = shell(containing(page, "audit list --tool oa__purchase_pay"), tmp_path, env,
                     RUN_ID=run_id, **{"$HG1": hg1.url})
        run, _ = json.JSONDecoder().raw_decode(seen)
        assert run["status"] == "completed" and run["answer"] == "Paid ACME 60,000."
        assert request_id in seen and "alice" in seen, seen

        # 11. The workers' health: hg1's worker and the worker process are alive.
        query = containing(page, "live_workers")
        said = shell(query, tmp_path, env, **{GUIDE_URL: url})
        live, overdue = (int(n) for n in re.findall(r"^\s*(\d+)\s*$", said, re.M))
        assert live >= 2 and overdue == 0, said

        # 9. The upgrade's migrate command on a current database changes nothing and says so.
        upgrade = [b for b in page if "db upgrade" in b.code and "check" not in b.code]
        assert len(upgrade) == 1
        shell(upgrade[0], tmp_path, {k: v for k, v in env.items() if k not in values})

        # 10. The backup, and that it holds the audit log.
        shell(containing(page, "pg_dump --format=custom"), tmp_path, env, **{GUIDE_URL: url})
        dumps = list(tmp_path.glob("hookgate-*.dump"))
        assert len(dumps) == 1
        listed = subprocess.run(["pg_restore", "--list", str(dumps[0])], capture_output=True,
                                text=True, check=True).stdout
        assert "TABLE DATA public connector_call_logs" in listed, listed[:2000]
    finally:
        for instance in instances:
            instance.stop()
        subprocess.run(["psql", "-c", f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)',
                        "-c", f'DROP ROLE IF EXISTS "{name}"'], env=admin,
                       capture_output=True, timeout=60)
