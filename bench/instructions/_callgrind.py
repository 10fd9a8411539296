"""What the instruction-count scripts share: a process under callgrind with instrumentation
off until asked, switched on and off around the measured work, and its count read back."""

from __future__ import annotations

import glob
import statistics
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx

#: The command prefix: callgrind, counting nothing until `control` switches it on.
CALLGRIND = ["valgrind", "--tool=callgrind", "--instr-atstart=no"]


def command(out: str, *argv: str) -> list[str]:
    """``argv`` under callgrind, its counts written to ``out`` (and ``out.N`` dumps)."""
    return [*CALLGRIND, f"--callgrind-out-file={out}", *argv]


def control(pid: int, *step: str) -> None:
    """``callgrind_control`` on process ``pid``: ``-z`` (zero), ``-i on|off``, ``-d`` (dump)."""
    subprocess.run(["callgrind_control", *step, str(pid)], check=True, capture_output=True)


def total(out: str) -> int:
    """The instructions of a callgrind run (its dumps' largest total)."""
    found = 0
    for path in glob.glob(out + "*"):
        with open(path, errors="replace") as dump:
            for line in dump:
                if line.startswith(("summary:", "totals:")):
                    found = max(found, int(line.split()[1]))
    if found <= 0:
        raise SystemExit(f"callgrind wrote no instruction count to {out}*")
    return found


def wait_for(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    """Until the server under callgrind answers ``url`` (its start is slow there)."""
    deadline = time.monotonic() + 600
    while True:
        try:
            httpx.get(url + "/", timeout=5)
            return
        except httpx.TransportError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(log.read_text()[-3000:]) from None
            time.sleep(0.5)


def by_tree(counts: Mapping[str, Mapping[str, Sequence[float]]]) -> dict[str, Any]:
    """The counts per tree and path as printed (``trees``: each path's counts and median in
    millions), with each later tree's medians over the first's (``ratios_to_first``)."""
    out: dict[str, Any] = {
        "trees": {tree: {path: {"per_call": values,
                                "median_millions": round(statistics.median(values) / 1e6, 3)}
                         for path, values in by_path.items()}
                  for tree, by_path in counts.items()},
    }
    if len(counts) > 1:
        first, *others = counts
        out["ratios_to_first"] = {
            other: {path: round(statistics.median(counts[other][path])
                                / statistics.median(counts[first][path]), 3)
                    for path in counts[first]} for other in others}
    return out
