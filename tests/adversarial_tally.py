"""The adversarial suite's tally, as a plugin the root conftest loads, so that the summary
line prints also under pytest-xdist (whose controller loads only the initial conftests)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest


@dataclass
class Tally:
    tried: list[str] = field(default_factory=list)
    through: list[str] = field(default_factory=list)

    def record(self, attempt: str, got_through: bool) -> None:
        self.tried.append(attempt)
        if got_through:
            self.through.append(attempt)


TALLY = Tally()


def pytest_sessionfinish(session: pytest.Session) -> None:
    # Under pytest-xdist each worker keeps its own tally and hands it to the controller.
    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        output["adversarial"] = {"tried": TALLY.tried, "through": TALLY.through}


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    data = getattr(node, "workeroutput", {}).get("adversarial")
    if data:
        TALLY.tried.extend(data["tried"])
        TALLY.through.extend(data["through"])


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if TALLY.tried:
        terminalreporter.write_line(
            f"adversarial: {len(TALLY.tried)} attempts tried, {len(TALLY.through)} got through"
            + (f" ({', '.join(TALLY.through)})" if TALLY.through else ""))


