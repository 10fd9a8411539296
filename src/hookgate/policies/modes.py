"""The modes in force: the ``mode:`` of configuration entries (gate rules, declared and
catalog hooks, policy set entries) as ``hookgate policy reload --config`` last stamped them.

The reload validates the file and writes its entries' modes atomically beside it
(``<config>.modes``). Each entry is known by its text without its mode (`entry_key`), so
the hook chain and the gate rules read their mode where they are built, through
`policies.shadow.mode_of`, the one reader. A serving process looks at the stamp when its
last look is more than a second old; it takes the stamped modes only when the stamped file
is, modes aside, the file it runs: else it keeps its modes and names the entries that
need a restart. A stamp it cannot read leaves its modes in force, and says so (logged).
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from hookgate.hooks.errors import HookBuildError
from hookgate.policies.errors import PolicyLoadError
from hookgate.policies.shadow import MODES, Mode, mode_of
from hookgate.policies.source import fingerprint
from hookgate.policies.stamp import write_atomically

log = logging.getLogger("hookgate.policies.modes")
#: How old the last look at the stamp may be when a mode is read, in seconds.
RECHECK_S = 1.0

State = Literal["as started", "in force", "needs restart", "reload failed"]


def modes_stamp_path(config: Path) -> Path:
    """``hookgate.yaml`` → ``hookgate.yaml.modes``."""
    return config.with_name(config.name + ".modes")


def _plain(value: object) -> object:
    dump = getattr(value, "model_dump", None)
    return dump(mode="json") if callable(dump) else value


def bare(value: object) -> object:
    """``value`` without the ``mode`` of any mapping in it (a mode is ``enforce``,
    ``shadow`` or unset): what must be equal for two files to differ only in modes."""
    value = _plain(value)
    if isinstance(value, Mapping):
        return {str(k): bare(v) for k, v in value.items()
                if not (k == "mode" and (v is None or v in MODES))}
    if isinstance(value, list | tuple):
        return [bare(v) for v in value]
    return value


def _digest(value: object) -> str:
    text = json.dumps(bare(value), sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def entry_key(entry: object) -> str:
    """How a configuration entry (a mapping or a model) is known: its text without mode."""
    if type(entry) is str:
        return _text_key(entry)
    return _digest(entry)


@functools.lru_cache(maxsize=1024)
def _text_key(entry: str) -> str:
    # A catalog name (``audit_log``): text never changes, and every registry build reads
    # the mode of each of its entries (`live_mode`).
    return _digest(entry)


@dataclass(frozen=True, slots=True)
class ModeCatalogue:
    """Every entry of a configuration that may carry a mode, and its other settings."""

    #: Entry path (``agents[scout].model_config_json.guarded_calls.rules[0]``) → its key.
    entries: dict[str, str] = field(default_factory=dict)
    #: Entry key → its mode (``enforce`` when it declares none).
    modes: dict[str, Mode] = field(default_factory=dict)
    #: Top-level section → digest of its settings without modes.
    sections: dict[str, str] = field(default_factory=dict)

    @property
    def version(self) -> str:
        text = json.dumps(self.modes, sort_keys=True)
        return "modes-" + hashlib.sha256(text.encode()).hexdigest()[:12]

    def as_json(self) -> str:
        return json.dumps({"version": self.version, "entries": self.entries,
                           "modes": self.modes, "sections": self.sections}, sort_keys=True)

    def beyond_modes(self, other: ModeCatalogue) -> list[str]:
        """What differs between the two files beyond modes: the entries, else sections."""
        changed = sorted(p for p in {*self.entries, *other.entries}
                         if self.entries.get(p) != other.entries.get(p))
        if changed:
            return changed
        return sorted(s for s in {*self.sections, *other.sections}
                      if self.sections.get(s) != other.sections.get(s))


def _entries(where: str, value: object) -> Iterator[tuple[str, Mapping[str, Any]]]:
    value = _plain(value)
    if isinstance(value, Mapping):
        for key, inner in value.items():
            yield from _entries(f"{where}.{key}", inner)
    elif isinstance(value, list | tuple):
        for i, inner in enumerate(value):
            inner = _plain(inner)
            if isinstance(inner, Mapping):
                yield f"{where}[{i}]", inner
            yield from _entries(f"{where}[{i}]", inner)


def catalogue(roots: Mapping[str, object], sections: Mapping[str, object]) -> ModeCatalogue:
    """The entries under ``roots`` (each an entry list's ancestor, named by its path) and
    the digests of ``sections``; HookBuildError for a bad mode, or for two entries that
    differ only in their mode (a reload could not tell which is which)."""
    found = ModeCatalogue(sections={name: _digest(v) for name, v in sections.items()})
    first: dict[str, str] = {}
    for root, value in roots.items():
        for path, entry in _entries(root, value):
            key = entry_key(entry)
            mode = mode_of(entry.get("mode"), path)
            if found.modes.get(key, mode) != mode:
                raise HookBuildError(f"{path}: the same entry as {first[key]} but for its "
                                     "mode; make them differ (a name or reason) to give "
                                     "them different modes")
            found.entries[path] = key
            found.modes[key] = mode
            first.setdefault(key, path)
    return found


def read_modes_stamp(config: Path) -> ModeCatalogue | None:
    """The stamped catalogue; None without a stamp; PolicyLoadError if it cannot be read."""
    target = modes_stamp_path(config)
    try:
        data = json.loads(target.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, RecursionError) as exc:  # deep JSON: RecursionError
        raise PolicyLoadError([f"{target}: cannot be read: {exc}"]) from exc
    try:
        found = ModeCatalogue({str(k): str(v) for k, v in data["entries"].items()},
                              {str(k): mode_of(v, f"{target}: {k}")
                               for k, v in data["modes"].items()},
                              {str(k): str(v) for k, v in data["sections"].items()})
    except (KeyError, TypeError, AttributeError, HookBuildError) as exc:
        raise PolicyLoadError([f"{target}: not a modes stamp ({exc})"]) from exc
    if data.get("version") != found.version:
        raise PolicyLoadError([f"{target}: its version does not match its modes"])
    return found


def write_modes_stamp(config: Path, found: ModeCatalogue) -> Path:
    """Stamp ``found`` for ``config`` by an atomic rename (a reader sees old or new)."""
    return write_atomically(modes_stamp_path(config), found.as_json() + "\n",
                            prefix=".modes-")


class ModesInForce:
    """A serving process's modes: its file's own until a stamp of the same file (modes
    aside) is taken."""

    def __init__(self, config: Path, own: ModeCatalogue, *,
                 recheck_s: float = RECHECK_S) -> None:
        self.config = config
        self.own = own
        self.recheck_s = recheck_s
        #: The stamped modes taken; None: the file's own, as the process started.
        self.modes: dict[str, Mode] | None = None
        self.version = own.version
        self.state: State = "as started"
        self.error: str | None = None
        self._lock = threading.Lock()
        self._seen = self._fingerprint()  # a stamp already there is what the file says
        self._looked = time.monotonic()

    def _fingerprint(self) -> str:
        return fingerprint(modes_stamp_path(self.config))

    def mode(self, key: str) -> Mode | None:
        """The stamped mode of the entry known as ``key``; None: its own."""
        self.current()
        return None if self.modes is None else self.modes.get(key)

    def current(self) -> str:
        """The version of the modes in force, after a look at the stamp when the last is
        too old (a cache of anything built with modes keys on it)."""
        now = time.monotonic()
        if now - self._looked >= self.recheck_s:
            self._looked = now
            seen = self._fingerprint()
            if seen != self._seen:
                with self._lock:
                    if seen != self._seen:
                        self._seen = seen
                        self._look()
        return self.version

    def status(self) -> dict[str, str | None]:
        """``{config, version, state, error}`` (a look is taken first if due)."""
        self.current()
        return {"config": str(self.config), "version": self.version, "state": self.state,
                "error": self.error}

    def _look(self) -> None:
        try:
            stamped = read_modes_stamp(self.config)
        except PolicyLoadError as exc:
            self.state, self.error = "reload failed", " | ".join(exc.problems)
            log.error("%s: modes reload failed; %s stays in force: %s", self.config,
                      self.version, self.error)
            return
        if stamped is None:
            return
        changed = self.own.beyond_modes(stamped)
        if changed:
            self.state = "needs restart"
            self.error = (f"changed beyond their mode: {', '.join(changed)}; these need a "
                          "restart")
            log.error("%s: the stamped file differs from the one served beyond modes, so "
                      "its modes are not taken and %s stays in force; these need a "
                      "restart: %s", self.config, self.version, ", ".join(changed))
            return
        log.warning("%s: modes reloaded: %s → %s", self.config, self.version, stamped.version)
        self.modes, self.version = dict(stamped.modes), stamped.version
        self.state, self.error = "in force", None


_IN_FORCE: ModesInForce | None = None


def watch_modes(config: Path, own: ModeCatalogue) -> ModesInForce:
    """Serve the modes stamped for ``config`` from now on (``own``: the file as loaded)."""
    global _IN_FORCE
    _IN_FORCE = ModesInForce(config, own)
    return _IN_FORCE


def modes_in_force() -> ModesInForce | None:
    """This process's modes in force, if it serves a configuration file."""
    return _IN_FORCE


def modes_version() -> str | None:
    """The version of this process's modes in force (None: not a serving process)."""
    live = _IN_FORCE
    return None if live is None else live.current()


def live_mode(entry: object) -> Mode | None:
    """The stamped mode of ``entry`` in this process; None: the mode it declares."""
    live = _IN_FORCE
    return None if live is None else live.mode(entry_key(entry))
