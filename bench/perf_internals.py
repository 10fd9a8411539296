"""The tests that pin performance internals (the `perf` marker: statement, connection,
commit and read counts, GC settings, query plans), which the default test run leaves out.

Runs ``python -m pytest -m perf -p no:cacheprovider tests/`` in a subprocess and prints a
JSON summary: passed, failed, skipped and error counts, the failed tests' ids, and the
seconds the run took. Exits non-zero when a test failed or none ran.

    python bench/perf_internals.py [pytest arguments, e.g. tests/storage -x]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def summary(junit_xml: Path) -> dict[str, Any]:
    """Counts from pytest's JUnit XML report."""
    counts = {"passed": 0, "failed": 0, "skipped": 0, "errors": 0}
    failed: list[str] = []
    for case in ET.parse(junit_xml).getroot().iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        if case.find("failure") is not None:
            counts["failed"] += 1
            failed.append(name)
        elif case.find("error") is not None:
            counts["errors"] += 1
            failed.append(name)
        elif case.find("skipped") is not None:
            counts["skipped"] += 1
        else:
            counts["passed"] += 1
    return {**counts, "failed_tests": failed}


def main(argv: list[str]) -> int:
    targets = argv or ["tests/"]
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "perf.xml"
        command = [sys.executable, "-m", "pytest", "-m", "perf", "-p", "no:cacheprovider",
                   "-q", f"--junitxml={report}", *targets]
        # This tree's sources and its tests package first, whatever is installed.
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (str(ROOT / "src"), str(ROOT), os.environ.get("PYTHONPATH")) if p)}
        started = time.monotonic()
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
        seconds = round(time.monotonic() - started, 1)
        if not report.exists():  # pytest stopped before collecting: say why
            print(done.stdout[-4000:], done.stderr[-4000:], file=sys.stderr)
            print(json.dumps({"benchmark": "perf_internals", "passed": 0, "failed": 0,
                              "skipped": 0, "errors": 1, "failed_tests": [],
                              "returncode": done.returncode, "seconds": seconds}))
            return 1
        out = {"benchmark": "perf_internals", **summary(report),
               "returncode": done.returncode, "seconds": seconds}
    if out["failed"] or out["errors"]:
        print(done.stdout[-8000:], file=sys.stderr)
    print(json.dumps(out))
    return 0 if out["passed"] and not (out["failed"] or out["errors"]) else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
