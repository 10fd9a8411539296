"""The policy set in force for one path, reloaded only when a change is complete.

A change is taken when the files read have exactly the version ``hookgate policy reload``
stamped beside them (policies/stamp.py): a file caught mid-write, even a prefix that parses
as a smaller set, has no stamped version and is never loaded. A decision looks at the files'
and the stamp's fingerprint when its last look is more than ``recheck_s`` old (1 s), so a
reload is in force within about a second in every process serving those files
(docs/decisions/0006). A stamped set that does not load leaves the previous one in force;
the failure is logged, counted (policies/metrics.py) and shown by ``status()`` (``hookgate
policy status``, ``GET /api/policies/status``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from hookgate.policies import metrics
from hookgate.policies.decision import PolicyDecision, decide, unevaluated
from hookgate.policies.errors import PolicyLoadError
from hookgate.policies.facts import CallFacts
from hookgate.policies.policy_set import Default, LoadedPolicies, policies_of
from hookgate.policies.schema import cedar_schema, context_type
from hookgate.policies.source import PolicyFile, fingerprint, read_policy_files, version_of
from hookgate.policies.stamp import read_stamp, stamp_path
from hookgate.tools.tool import Tool

log = logging.getLogger("hookgate.policies")
#: How old the last look at the files may be when a decision is made, in seconds.
RECHECK_S = 1.0
#: How many declared tools' schemas one set keeps validated.
DECLARED_CACHE = 256

#: ``in force``: the files are the live set; ``not reloaded``: they changed, and nobody ran
#: ``hookgate policy reload`` for what they hold now (a write may be under way);
#: ``reload failed``: the stamped files do not load; ``unreadable``: they cannot be read.
State = Literal["in force", "not reloaded", "reload failed", "unreadable"]


@dataclass(frozen=True, slots=True)
class PolicyStatus:
    """Which set is live for a path, and what the last look at its files found."""

    path: str
    default: str
    version: str
    loaded_at: datetime
    state: State
    files_version: str | None
    stamped_version: str | None
    error: str | None

    def as_dict(self) -> dict[str, object]:
        return {"path": self.path, "default": self.default, "version": self.version,
                "loaded_at": self.loaded_at.isoformat(), "state": self.state,
                "files_version": self.files_version, "stamped_version": self.stamped_version,
                "error": self.error}


class LivePolicySet:
    """The loaded set for ``path`` and the tools it is validated for."""

    def __init__(self, path: Path, default: Default, tools: Iterable[Tool], *,
                 declared_tools: bool = False, recheck_s: float = RECHECK_S,
                 previous: LivePolicySet | None = None) -> None:
        self.path = path
        self.default = default
        self.tools = {t.name: t for t in tools}
        self.declared_tools = declared_tools
        self.recheck_s = recheck_s
        self._lock = threading.Lock()
        self._seen = self._fingerprint()
        self._looked = time.monotonic()
        self._declared: OrderedDict[tuple[str, str, str], LoadedPolicies | PolicyLoadError] = \
            OrderedDict()
        files = read_policy_files(path)
        version, stamped = version_of(files), read_stamp(path)
        if previous is not None and version not in (previous.loaded.version, stamped):
            # Opened again for more tools while a change is incomplete: the set in force
            # stays, validated for them too; the files are looked at on the next decision.
            files, self._seen, self._looked = list(previous.files), "", float("-inf")
        elif stamped is not None and stamped != version:
            raise PolicyLoadError([
                f"{path}: the files hold {version}, not {stamped}, the set the last `hookgate "
                "policy reload` stamped in " + str(stamp_path(path)) + " (a change may be "
                "under way): finish it and run `hookgate policy reload`"])
        #: Raises PolicyLoadError: a set that never loaded has no previous one to keep.
        self.loaded: LoadedPolicies = self._load(files)
        #: The texts of the set in force.
        self.files: list[PolicyFile] = files
        self.loaded_at = datetime.now(UTC)
        self.state: State = "in force"
        self.files_version: str | None = version
        self.stamped_version = stamped
        #: The last look's failure, while the previous set stays in force.
        self.reload_error: PolicyLoadError | None = None

    def _fingerprint(self) -> str:
        return fingerprint(self.path, stamp_path(self.path))

    def _load(self, files: list[PolicyFile]) -> LoadedPolicies:
        return policies_of(files, cedar_schema(self.tools.values()), self.default,
                           declared_tools=self.declared_tools)

    def current(self) -> LoadedPolicies:
        """The set in force now, after a look at the files when the last is too old."""
        now = time.monotonic()
        if now - self._looked < self.recheck_s:
            return self.loaded
        self._looked = now
        seen = self._fingerprint()
        if seen != self._seen:
            with self._lock:
                if seen != self._seen:
                    self._look(seen)
        return self.loaded

    def _look(self, seen: str) -> None:
        self._seen = seen
        self.stamped_version = read_stamp(self.path)
        try:
            files = read_policy_files(self.path)
        except PolicyLoadError as exc:
            self.files_version = None
            self._failed("unreadable", exc)
            return
        self.files_version = version = version_of(files)
        if version == self.loaded.version:
            self._settled("in force")
            return
        if version != self.stamped_version:
            # Not complete until a person says so: never a prefix of a write under way.
            self._settled("not reloaded")
            metrics.load_counted(str(self.path), "not_stamped")
            return
        try:
            loaded = self._load(files)
        except PolicyLoadError as exc:
            self._failed("reload failed", exc)
            return
        log.warning("policy set %s reloaded: %s → %s", self.path, self.loaded.version,
                    loaded.version)
        self.loaded, self.files, self.loaded_at = loaded, files, datetime.now(UTC)
        self._settled("in force")
        metrics.load_counted(str(self.path), "loaded")

    def _failed(self, state: State, exc: PolicyLoadError) -> None:
        if self.reload_error is None:
            metrics.failing_changed(str(self.path), 1)
        self.state, self.reload_error = state, exc
        metrics.load_counted(str(self.path), "failed")
        log.error("policy set %s did not load; %s stays in force:\n%s", self.path,
                  self.loaded.version, exc)

    def _settled(self, state: State) -> None:
        if self.reload_error is not None:
            metrics.failing_changed(str(self.path), -1)
        self.state, self.reload_error = state, None

    def status(self) -> PolicyStatus:
        """The live set and what the last look found (a look is taken first if due)."""
        self.current()
        error = None if self.reload_error is None else " | ".join(self.reload_error.problems)
        if self.state == "not reloaded":
            error = (f"the files hold {self.files_version}, which no `hookgate policy "
                     f"reload` stamped (stamped: {self.stamped_version or 'none'}); "
                     f"{self.loaded.version} stays in force")
        return PolicyStatus(str(self.path), self.default, self.loaded.version, self.loaded_at,
                            self.state, self.files_version, self.stamped_version, error)

    def for_call(self, tool: Tool | None) -> LoadedPolicies:
        """The set for a call of ``tool``: the live set for one of its tools, or the live set
        validated for a tool the agent's runtime declared with the call; PolicyLoadError when
        the policies do not validate for that declared tool."""
        loaded = self.current()
        if tool is None or self.tools.get(tool.name) is not None:
            return loaded
        # Keyed by the Cedar type the schema gives (bounded and plain, whatever was sent).
        digest = hashlib.sha256(json.dumps(context_type(tool), sort_keys=True)
                                .encode()).hexdigest()
        key = (loaded.version, tool.name, digest)
        with self._lock:
            found = self._declared.get(key)
            if found is None:
                try:
                    found = loaded.with_declared_tool(tool)
                except PolicyLoadError as exc:
                    found = exc
                self._declared[key] = found
                while len(self._declared) > DECLARED_CACHE:
                    self._declared.popitem(last=False)
            else:
                self._declared.move_to_end(key)
        if isinstance(found, PolicyLoadError):
            raise found
        return found

    def decide(self, facts: CallFacts, tool: Tool | None = None) -> PolicyDecision:
        """The decision about ``facts``; ``tool``: a tool the call declares (see for_call)."""
        try:
            loaded = self.for_call(tool)
        except PolicyLoadError as exc:
            return unevaluated(self.loaded, PolicyDecision(
                "deny", (), (f"the policies do not validate for the declared tool "
                             f"'{facts.tool_name}'",), self.loaded.version,
                tuple(exc.problems)))
        return decide(loaded, facts)

    def covers(self, tools: Iterable[Tool], declared_tools: bool = False) -> bool:
        return (all(self.tools.get(t.name) is t for t in tools)
                and (self.declared_tools or not declared_tools))


_OPEN: dict[tuple[Path, str], LivePolicySet] = {}
_OPEN_LOCK = threading.Lock()


def open_policy_set(path: str | Path, default: Default, tools: Iterable[Tool], *,
                    declared_tools: bool = False) -> LivePolicySet:
    """The process's live set for ``path`` (shared by every registry that uses it), its
    schema covering ``tools`` and every tool asked for before; PolicyLoadError if it does
    not load. ``declared_tools``: it also decides about tools declared with each call."""
    key = (Path(path).resolve(), default)
    wanted = list(tools)
    with _OPEN_LOCK:
        found = _OPEN.get(key)
        if found is not None and found.covers(wanted, declared_tools):
            return found
        known = list(found.tools.values()) if found is not None else []
        names = {t.name for t in wanted}
        live = LivePolicySet(key[0], default, [*(t for t in known if t.name not in names),
                                               *wanted],
                             declared_tools=declared_tools or bool(found and
                                                                   found.declared_tools),
                             previous=found)
        _OPEN[key] = live
        return live


def open_sets() -> list[LivePolicySet]:
    """Every live set this process has opened."""
    with _OPEN_LOCK:
        return list(_OPEN.values())
