"""What the instruction-count scripts share: a process under callgrind with instrumentation
off until asked, switched on and off around the measured work, and its count read back."""

from __future__ import annotations

import glob
import subprocess
import time
from pathlib import Path

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
