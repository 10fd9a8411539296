"""How the suite is spread over xdist's workers: test by test, longest first, except the
files whose tests share a fixture wider than one test (module, class or package scope),
which go to one worker whole so that fixture is set up once."""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

#: Files of long tests (a bench script's run, a real coding agent waiting out a hung
#: hookgate, a trial of thousands of claims: ten seconds to a minute each), longest first,
#: run before everything else and spread test by test, so that the workers share them and
#: none is left alone with one at the end of the run. (xdist's own scheduler sent the first
#: quarter of the collection to one worker: every one of these to the same one.) The slowest
#: tests of a run (`--durations`) say which files belong here.
LONG_FIRST = (
    "tests/limits/test_claims_exact.py",
    "tests/policies/test_shadow_property.py",
    "tests/test_benches.py",
    "tests/coding_agents/test_gemini_cli.py",
    "tests/server/test_revocation.py",
    "tests/policies/test_replay.py",
    "tests/coding_agents/test_codex_cli.py",
    "tests/coding_agents/test_copilot_cli.py",
    "tests/docs/test_channel_pages.py",
    "tests/cli/test_cli_first_hour.py",
    "tests/demo/test_demo.py",
    "tests/policies/test_mode_reload.py",
    "tests/policies/test_shadow_mcp_rules.py",
    "tests/server/test_audit_decisions.py",
    "tests/docs/test_postgresql_guide.py",
    "tests/runs/test_redis_streams.py",
    "tests/docs/test_policies_guide.py",
    "tests/docs/test_framework_pages.py",
    "tests/policies/test_reload_instances.py",
    "tests/server/test_instances.py",
)
_RANK = {name: rank for rank, name in enumerate(LONG_FIRST)}

#: A fixture shared by more than one test of a file.
_WIDE_FIXTURE = re.compile(r"""scope\s*=\s*["'](module|class|package)["']""")


@functools.cache
def _declares_wide_fixture(path: Path) -> bool:
    try:
        return bool(_WIDE_FIXTURE.search(path.read_text(encoding="utf-8")))
    except OSError:
        return False


def kept_whole(test_file: str) -> bool:
    """Whether the tests of ``test_file`` (a path from the root) go to one worker: the file,
    or a conftest.py in a folder above it, declares a module-, class- or package-scoped
    fixture."""
    path = ROOT / test_file
    conftests = [folder / "conftest.py" for folder in path.parents
                 if folder == ROOT / "tests" or ROOT / "tests" in folder.parents]
    return any(_declares_wide_fixture(p) for p in (path, *conftests))


def unit_of(nodeid: str) -> str:
    """The unit of work a test is scheduled in: its file if the file is kept whole, else
    the test alone."""
    test_file = nodeid.split("::")[0]
    return test_file if kept_whole(test_file) else nodeid


def order_key(nodeid: str) -> tuple[int, int]:
    """Long files first (in ``LONG_FIRST``'s order), then files kept whole (set-up shared by
    their tests), then the rest, in collection order (the sort is stable)."""
    test_file = nodeid.split("::")[0]
    if test_file in _RANK:
        return (0, _RANK[test_file])
    return (1, 0) if kept_whole(test_file) else (2, 0)


def is_long(unit: str) -> bool:
    return unit.split("::")[0] in _RANK


def make_scheduler(config: Any, log: Any) -> Any:
    """xdist's scope scheduler with ``unit_of`` as its scope, keeping the collection's order
    (xdist would otherwise put the units with most tests first), and with at most half of
    the workers on long tests at a time: four long tests at once on two cores (bench runs,
    real coding agents, claim trials beside each other) slowed one another past their own
    time limits, while the short tests wait; the other half takes the short ones."""
    from xdist.scheduler import LoadScopeScheduling

    class TestByTest(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

        def _assign_work_unit(self, node: Any) -> None:
            slots = max(1, len(self.nodes) // 2)
            busy = sum(1 for work in self.assigned_work.values()
                       if any(is_long(unit) and not all(done.values())
                              for unit, done in work.items()))
            if busy >= slots:
                short = next((unit for unit in self.workqueue if not is_long(unit)), None)
                if short is not None:
                    self.workqueue.move_to_end(short, last=False)
            super()._assign_work_unit(node)

    config.option.loadscopereorder = False
    return TestByTest(config, log)
