"""The garbage collector's set-up for a server process (server/app.py tune_collector):
`hookgate serve`'s app applies it once its runtime has started; an app made for a test or
embedded in another program leaves the process's collector alone."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hookgate.server.app import GC_YOUNG_THRESHOLD

# The collector's thresholds are a performance setting: bench/perf_internals.py runs these.
pytestmark = pytest.mark.perf

ROOT = Path(__file__).resolve().parents[2]

SERVE_THEN_REPORT = textwrap.dedent("""
    import asyncio, gc, json, sys
    from hookgate.app import build_server
    from hookgate.server.serving import listen
    from tests.server.demo_world import world

    TUNE = sys.argv[2] == "serve"

    async def main():
        deployment, _ = world(sys.argv[1])
        if TUNE:
            server, _ = build_server(deployment, "127.0.0.1", 0)
        else:  # an app as the tests make one
            import uvicorn
            from hookgate.app import create_app
            from hookgate.runtime.runtime import Runtime
            from hookgate.server.serving import uvicorn_config
            server = uvicorn.Server(uvicorn_config(create_app(Runtime(deployment)),
                                                   "127.0.0.1", 0))
        before = (gc.get_threshold(), gc.get_freeze_count())
        task = asyncio.create_task(server.serve(sockets=[listen("127.0.0.1", 0)]))
        while not server.started:
            await asyncio.sleep(0.02)
        after = (gc.get_threshold(), gc.get_freeze_count())
        server.should_exit = True
        await task
        print(json.dumps({"before": before, "after": after}))

    asyncio.run(main())
""")


@pytest.mark.parametrize("how", ["serve", "embedded"])
def test_the_collector_is_tuned_by_serve_only_after_the_start(tmp_path: Path, how: str
                                                              ) -> None:
    out = subprocess.run(
        [sys.executable, "-c", SERVE_THEN_REPORT, f"sqlite+aiosqlite:///{tmp_path / 'h.db'}",
         how], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    (default_young, *older), frozen = seen["before"]
    # Python's own settings until the server has started.
    assert default_young != GC_YOUNG_THRESHOLD and frozen == 0
    (young, *after_older), frozen = seen["after"]
    assert after_older == older  # the older generations keep Python's thresholds
    if how == "serve":
        assert young == GC_YOUNG_THRESHOLD and frozen > 10_000  # modules, config, app
    else:
        assert young == default_young and frozen == 0
