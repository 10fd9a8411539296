"""The policy set in force for one path, reloaded when its files change.

A decision looks at the files' fingerprint (names, sizes, modification times) when the last
look is more than ``recheck_s`` old (1 s): a change is in force within about a second, in
every process that reads those files, so each instance serving the same policy folder moves
to the new set by itself (docs/decisions/0006), and each decision records the version it was
made under. A set that fails to load leaves the previous one in force and is logged as an
error once per change.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from pathlib import Path

from hookgate.policies.decision import PolicyDecision, decide
from hookgate.policies.errors import PolicyLoadError
from hookgate.policies.facts import CallFacts
from hookgate.policies.policy_set import Default, LoadedPolicies, load_policies
from hookgate.policies.schema import cedar_schema
from hookgate.policies.source import fingerprint
from hookgate.tools.tool import Tool

log = logging.getLogger("hookgate.policies")
#: How old the last look at the files may be when a decision is made, in seconds.
RECHECK_S = 1.0


class LivePolicySet:
    """The loaded set for ``path`` and the tools it is validated for."""

    def __init__(self, path: Path, default: Default, tools: Iterable[Tool], *,
                 recheck_s: float = RECHECK_S) -> None:
        self.path = path
        self.default = default
        self.tools = {t.name: t for t in tools}
        self.recheck_s = recheck_s
        self._lock = threading.Lock()
        self._seen = fingerprint(path)
        self._looked = time.monotonic()
        #: Raises PolicyLoadError: a set that never loaded has no previous one to keep.
        self.loaded: LoadedPolicies = self._load()
        #: The last reload's failure, while the previous set stays in force.
        self.reload_error: PolicyLoadError | None = None

    def _load(self) -> LoadedPolicies:
        return load_policies(self.path, cedar_schema(self.tools.values()), self.default)

    def current(self) -> LoadedPolicies:
        """The set in force now, reloaded first when the files changed."""
        now = time.monotonic()
        if now - self._looked < self.recheck_s:
            return self.loaded
        self._looked = now
        seen = fingerprint(self.path)
        if seen != self._seen:
            with self._lock:
                if seen != self._seen:
                    self._reload(seen)
        return self.loaded

    def _reload(self, seen: str) -> None:
        self._seen = seen
        try:
            loaded = self._load()
        except PolicyLoadError as exc:
            self.reload_error = exc
            log.error("policy set %s did not load; %s stays in force:\n%s",
                      self.path, self.loaded.version, exc)
            return
        self.reload_error = None
        if loaded.version != self.loaded.version:
            log.warning("policy set %s reloaded: %s → %s", self.path, self.loaded.version,
                        loaded.version)
        self.loaded = loaded

    def decide(self, facts: CallFacts) -> PolicyDecision:
        return decide(self.current(), facts)

    def covers(self, tools: Iterable[Tool]) -> bool:
        return all(self.tools.get(t.name) is t for t in tools)


_OPEN: dict[tuple[Path, str], LivePolicySet] = {}
_OPEN_LOCK = threading.Lock()


def open_policy_set(path: str | Path, default: Default, tools: Iterable[Tool]) -> LivePolicySet:
    """The process's live set for ``path`` (shared by every registry that uses it), its
    schema covering ``tools`` and every tool asked for before; PolicyLoadError if it does
    not load."""
    key = (Path(path).resolve(), default)
    wanted = list(tools)
    with _OPEN_LOCK:
        found = _OPEN.get(key)
        if found is not None and found.covers(wanted):
            return found
        known = list(found.tools.values()) if found is not None else []
        names = {t.name for t in wanted}
        live = LivePolicySet(key[0], default, [*(t for t in known if t.name not in names),
                                               *wanted])
        _OPEN[key] = live
        return live
