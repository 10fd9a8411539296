"""What may be shown of sensitive values: `Withheld` text that may quote what a tool returned
or raised, and a call's argument values as a given viewer may see them (`shown_args`,
`shown_changes`: the one owner every surface calls; secret-keyed values masked).

The raw text is reachable only through `Withheld.admin_text`, which the org admins' trace
view uses; spans, metrics, logs, events, audit rows and API responses get ``str()``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

MASK = "••••"

#: Substrings of a key (any case) whose value is never shown (cards, traces, spans).
DEFAULT_SECRET_PATTERNS: tuple[str, ...] = (
    "password",
    "secret",
    "token",
    "key",
    "authorization",
    "cookie",
)

#: Digit runs as long as card or account numbers (13-19 digits, spaces or dashes between).
_LONG_NUMBER = re.compile(r"(?<![\w.])\d(?:[ -]?\d){12,18}(?![\w.])")
_CREDENTIAL = re.compile(r"(?i)\b(bearer|basic)\s+[\w.~+/=-]+")

#: The longest raw text kept for admins; the rest is cut (and says so).
ADMIN_TEXT_LIMIT = 4000


def mask_text(text: str, patterns: Iterable[str] = DEFAULT_SECRET_PATTERNS) -> str:
    """``text`` with secrets masked: the value after a secret-looking key (``key=…``,
    ``"key": "…"``), bearer/basic credentials, and long numbers (all but the last 4)."""
    text = _CREDENTIAL.sub(lambda m: f"{m.group(1)} {MASK}", text)
    pats = "|".join(re.escape(p.lower()) for p in patterns if p)
    if pats:
        pair = re.compile(
            r"(?i)([\"']?[\w.-]*(?:" + pats + r")[\w.-]*[\"']?\s*[:=]\s*)"
            r"(\"[^\"]*\"|'[^']*'|[^\s,;&}\]]+)")
        text = pair.sub(lambda m: m.group(1) + MASK, text)
    return _LONG_NUMBER.sub(lambda m: MASK + re.sub(r"\D", "", m.group(0))[-4:], text)


def secret_patterns(extra: Iterable[str] = ()) -> tuple[str, ...]:
    """The default patterns plus ``extra`` (lower-cased); extra patterns never replace them."""
    patterns = list(DEFAULT_SECRET_PATTERNS)
    for pattern in extra:
        lowered = pattern.lower()
        if lowered and lowered not in patterns:
            patterns.append(lowered)
    return tuple(patterns)


def is_secret_key(key: object, patterns: Iterable[str] = DEFAULT_SECRET_PATTERNS) -> bool:
    lowered = str(key).lower()
    return any(pattern.lower() in lowered for pattern in patterns)


def mask_secrets(value: Any, patterns: Iterable[str] = DEFAULT_SECRET_PATTERNS) -> Any:
    """A copy of ``value`` where every value under a secret-looking key is ``MASK``."""
    pats = tuple(patterns)
    if isinstance(value, Mapping):
        return {
            k: MASK if is_secret_key(k, pats) else mask_secrets(v, pats)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [mask_secrets(item, pats) for item in value]
    return value


def is_secret_path(path: str, patterns: Iterable[str] = DEFAULT_SECRET_PATTERNS) -> bool:
    """Whether a value's path (``auth.password``, ``items[0].api_key``) passes a
    secret-looking key."""
    pats = tuple(patterns)
    return any(is_secret_key(part, pats)
               for part in path.replace("[", ".").replace("]", "").split(".") if part)


def shown_args(args: Any, *, raw: bool = False,
               patterns: Iterable[str] = DEFAULT_SECRET_PATTERNS) -> Any:
    """A call's arguments as a viewer may see them: exact for one who may read them raw
    (``raw``), else with every value under a secret-looking key (at any depth) ``MASK``.

    The one rule for argument values: edit diffs, decision events, the model's notes,
    cards, spans, audit rows, the CLI and the API all show arguments through here (or
    `shown_changes`); who may read them raw is the caller's to say (server/trace_view.py).
    """
    return args if raw else mask_secrets(args, patterns)


def shown_changes(found: Iterable[Mapping[str, Any]], *, raw: bool = False,
                  patterns: Iterable[str] = DEFAULT_SECRET_PATTERNS) -> list[dict[str, Any]]:
    """An approver's changes (``path``, ``before``, ``after``; approvals/edits.py) as a viewer
    may see them: for one who may not read them raw, both values of a change under a
    secret-looking key are ``MASK`` (a side that is absent stays ``None``), and any other
    value is masked like the arguments (a nested ``{"password": …}``)."""
    pats = tuple(patterns)
    out = []
    for change in found:
        if raw:
            out.append(dict(change))
        elif is_secret_path(str(change.get("path", "")), pats):
            out.append({**change, **{side: MASK for side in ("before", "after")
                                     if change.get(side) is not None}})
        else:
            out.append({**change, "before": mask_secrets(change.get("before"), pats),
                        "after": mask_secrets(change.get("after"), pats)})
    return out


@dataclass(frozen=True, slots=True)
class Withheld:
    """Raw text that must not leave through observability, with what may be shown of it.

    ``shown`` is the fixed (or masked) text every sink gets: ``str()``, ``repr()`` and
    `to_json` all answer it. The raw text is a private field, never printed.
    """

    shown: str
    _raw: str = field(repr=False, compare=False)

    @classmethod
    def of(cls, raw: str, shown: str | None = None) -> Withheld:
        """``raw`` behind ``shown`` (default: ``raw`` with its secrets masked)."""
        if len(raw) > ADMIN_TEXT_LIMIT:
            raw = raw[:ADMIN_TEXT_LIMIT] + "… [cut]"
        return cls(mask_text(raw) if shown is None else shown, raw)

    def __str__(self) -> str:
        return self.shown

    def __repr__(self) -> str:
        return f"Withheld({self.shown!r})"

    def __format__(self, spec: str) -> str:
        return format(self.shown, spec)

    def to_json(self) -> str:
        return self.shown

    def admin_text(self) -> str:
        """The one door to the raw text, for the org admins' trace view only.

        The admins' view is kept in the run's event log, so even here secret-looking values
        (card numbers, ``key=…``, bearer credentials) are masked.
        """
        return mask_text(self._raw)


def shown(value: object) -> str:
    """What any sink may show of ``value``: a `Withheld`'s fixed text, anything else as is."""
    return value.shown if isinstance(value, Withheld) else str(value)
