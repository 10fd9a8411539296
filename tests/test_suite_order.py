"""How the suite is spread over the workers (tests/scheduling.py): the files run first exist,
and a file whose tests share a wider fixture stays whole while the others go test by test."""

from __future__ import annotations

from pathlib import Path

from tests.scheduling import LONG_FIRST, kept_whole, order_key, unit_of

ROOT = Path(__file__).resolve().parents[1]


def test_every_file_run_first_exists_once() -> None:
    # A renamed file would silently drop back among the others.
    assert len(set(LONG_FIRST)) == len(LONG_FIRST)
    missing = [name for name in LONG_FIRST if not (ROOT / name).is_file()]
    assert missing == []


def test_a_file_with_a_module_fixture_is_one_unit() -> None:
    # The file declares one itself.
    nodeid = "tests/server/test_instances.py::test_x[postgresql]"
    assert kept_whole("tests/server/test_instances.py")
    assert unit_of(nodeid) == "tests/server/test_instances.py"


def test_a_conftest_above_with_a_module_fixture_keeps_its_files_whole() -> None:
    # tests/integrations/conftest.py serves a module-scoped server to its files.
    assert "scope=\"module\"" in (ROOT / "tests/integrations/conftest.py").read_text()
    name = next(p for p in sorted((ROOT / "tests/integrations").rglob("test_*.py"))
                if "scope=" not in p.read_text())  # e.g. adk/test_adk.py
    assert kept_whole(str(name.relative_to(ROOT)))


def test_other_files_go_test_by_test() -> None:
    assert not kept_whole("tests/test_benches.py")
    nodeid = "tests/test_benches.py::test_the_bench_runs[hooks.py]"
    assert unit_of(nodeid) == nodeid


def test_long_files_come_first_then_whole_files_then_the_rest() -> None:
    ids = ["tests/test_suite_order.py::a", "tests/server/test_instances.py::b",
           f"{LONG_FIRST[1]}::c", f"{LONG_FIRST[0]}::d"]
    assert sorted(ids, key=order_key) == [ids[3], ids[2], ids[1], ids[0]]
