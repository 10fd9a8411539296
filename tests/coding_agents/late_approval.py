"""The model of "a call approved after the hook's timeout runs once on the identical retry",
for every coding agent's test: it makes the call, reads "approval … pending", waits until the
test approved, then makes the identical call twice more (the retry runs; the third is a call
of its own and does not run on the used approval)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from tests.fakes.responses import Call, Say, Turn


class LateApproval:
    """The script (``results`` counts the tool results in a request) and its two moments."""

    def __init__(self, call: Call, results: Callable[[dict[str, Any]], int]) -> None:
        self.call = call
        self.results = results
        self.pending_read = threading.Event()
        self.approved = threading.Event()

    def __call__(self, body: dict[str, Any]) -> Turn:
        n = self.results(body)
        if n == 1:
            # The model read "approval ... pending": it repeats the call once approved.
            self.pending_read.set()
            assert self.approved.wait(60), "the test never approved"
        return self.call if n < 3 else Say("done")

    def approve(self, click: Callable[[str], None]) -> None:
        """Approve on the card once the model read that the call is pending."""
        assert self.pending_read.wait(60), "the first call was never answered"
        click("approve")
        self.approved.set()
