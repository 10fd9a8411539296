"""Which argument values of a call came only from untrusted content: a value (a string or an
integer, in any argument, inside lists and objects too) that appears in an untrusted result
the session has seen and in neither the user's request nor a trusted result.

A value matches a text exactly, or after both are normalised (Unicode NFKC, URL-decoding,
case folding, whitespace and invisible characters removed, quotes and punctuation stripped
from the value's ends), or split: short values of two arguments that appear joined. A value
shorter than `MIN_TRACED` characters (normalised) matches only as a whole token (an id such
as ``13``, not the 13 in 2013). An address inside a longer text — an email address, a URL or
domain, an account number — is traced on its own (``contained``): a message that carries an
injected link.

A value is **listed** when, in every untrusted result that holds it, it is a whole field of
a structured result (JSON, or YAML that is a list or a mapping: an item of a channel list,
a file's id) and inside no longer field (not named in the text of a message or a page); it
is also **directed** when every one of those results came from a read the user directed
(`directed_by`: one of the read's argument values is named in the user's request).
"""

from __future__ import annotations

import functools
import json
import re
import unicodedata
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import unquote_plus

import yaml

from hookgate.hooks.facts import Fact

#: The fewest characters (normalised) a value needs to be traced.
MIN_TRACED = 4
#: The most argument values traced per call (the rest are not).
MAX_VALUES = 64
#: The longest result read for its structure (a longer one counts as prose).
MAX_STRUCTURED_CHARS = 200_000
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_INVISIBLE = re.compile(r"[\s\u00ad\u200b-\u200f\u2028-\u202f\u2060-\u2064\ufeff]+")
_PAD = "\"'`<>()[]{}.,;:!?*|~"

Match = Literal["exact", "normalised", "split", "token", "contained"]
#: Addresses inside a text: email addresses; URLs (with a scheme, or ``www.``, or a domain
#: followed by a path: a bare ``report.pdf`` is a file name); account numbers (IBAN-shaped).
_ADDRESS = re.compile(
    r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+"
    r"|https?://[^\s\"'<>)\]]+"
    r"|www\.(?:[a-z0-9-]+\.)+[a-z]{2,}(?:/[^\s\"'<>)\]]*)?"
    r"|(?:[a-z0-9-]+\.)+[a-z]{2,}/[^\s\"'<>)\]]*"
    r"|\b[a-z]{2}\d{2}[a-z0-9]{10,30}\b", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class ArgumentOrigin:
    """An argument value found only in untrusted content: where it is in the arguments
    (``argument``: the top-level name; ``path``: e.g. ``recipients[0]``), which untrusted
    results it appears in (their tools) and how it matched."""

    argument: str
    path: str
    sources: tuple[str, ...]
    match: Match
    #: The value is a whole field of the structured results it is in (an item of a list,
    #: an id), not named in their text.
    listed: bool = False
    #: Listed, and every result it is in came from a read the user directed (`directed_by`).
    directed: bool = False

    def as_fact(self) -> dict[str, Any]:
        return {"argument": self.argument, "path": self.path, "sources": list(self.sources),
                "match": self.match, "listed": self.listed, "directed": self.directed}


@dataclass(frozen=True, slots=True)
class Provenance:
    """A call's provenance: the argument values that came only from untrusted content."""

    origins: tuple[ArgumentOrigin, ...] = ()
    #: How many untrusted results the session had seen when the call was asked.
    untrusted_results: int = 0

    @property
    def untrusted_args(self) -> tuple[str, ...]:
        """The names of the arguments holding a value that came only from untrusted
        content, sorted."""
        return tuple(sorted({o.argument for o in self.origins}))

    def as_fact(self) -> dict[str, Any]:
        """The documented shape hooks, rules and policies read (no argument values)."""
        return {"untrusted": bool(self.origins), "untrusted_args": list(self.untrusted_args),
                "origins": [o.as_fact() for o in self.origins],
                "untrusted_results": self.untrusted_results}


def normal(text: str) -> str:
    """``text`` in the form values and texts are compared in."""
    folded = unicodedata.normalize("NFKC", text)
    for _ in range(3):  # double (or triple) URL-encoding
        decoded = unquote_plus(folded)
        if decoded == folded:
            break
        folded = decoded
    return _INVISIBLE.sub("", folded.casefold())


@functools.lru_cache(maxsize=4096)
def _normal_text(text: str) -> str:
    return normal(text)


@functools.lru_cache(maxsize=4096)
def _folded_text(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def _token_in(token: str, text: str) -> bool:
    return re.search(rf"(?<![0-9a-z]){re.escape(token)}(?![0-9a-z])", text) is not None


def _value_form(value: str) -> str:
    return normal(value).strip(_PAD)


def _leaves(value: Any, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, int):
        yield path, str(value)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _leaves(item, f"{path}.{key}")
    elif isinstance(value, Sequence | set | frozenset) and not isinstance(value, bytes):
        for i, item in enumerate(value):
            yield from _leaves(item, f"{path}[{i}]")


@dataclass(frozen=True, slots=True)
class _Texts:
    raw: tuple[str, ...]
    normalised: tuple[str, ...]

    @classmethod
    def of(cls, texts: Iterable[str]) -> _Texts:
        raw = tuple(texts)
        return cls(raw, tuple(_normal_text(t) for t in raw))

    def has(self, exact: str, form: str) -> bool:
        return any(exact in t for t in self.raw) or any(form in t for t in self.normalised)

    def has_token(self, token: str) -> bool:
        return any(_token_in(token, _folded_text(t)) for t in self.raw)


def trace(args: Mapping[str, Any], facts: Sequence[Fact],
          request: str | None = None) -> Provenance:
    """The provenance of ``args`` given the session's ``facts`` (``request``: the user's
    message when the caller holds it rather than the store)."""
    untrusted = [f for f in facts if not f.trusted]
    if not untrusted:
        return Provenance()
    known = _Texts.of([*(f.text for f in facts if f.trusted),
                       *((request,) if request else ())])
    sources = [(f.source, f.text, _normal_text(f.text)) for f in untrusted]
    values: list[tuple[str, str, str, str]] = []  # argument, path, raw, form
    for name, value in args.items():
        for path, raw in _leaves(value, str(name)):
            values.append((str(name), path, raw.strip(), _value_form(raw)))
            if len(values) >= MAX_VALUES:
                break
    origins: list[ArgumentOrigin] = []
    for name, path, raw, form in values:
        if len(form) < MIN_TRACED:
            continue
        found = _found(raw, form, sources)
        if found is not None and not known.has(raw, form):
            listed = found[1] == "exact" and _listed(raw, sources, token=False)
            directed = listed and all(f.directed for f in untrusted if raw in f.text)
            origins.append(ArgumentOrigin(name, path, *found, listed=listed,
                                          directed=directed))
    flagged = {o.path for o in origins}
    for name, path, raw, form in values:
        if 1 < len(form) < MIN_TRACED and form.isalnum() and path not in flagged:
            hit = tuple(dict.fromkeys(s for s, text, _ in sources
                                      if _token_in(form, _folded_text(text))))
            if hit and not known.has_token(form):
                flagged.add(path)
                listed = _listed(form, sources, token=True)
                directed = listed and all(f.directed for f in untrusted
                                          if _token_in(form, _folded_text(f.text)))
                origins.append(ArgumentOrigin(name, path, hit, "token", listed=listed,
                                              directed=directed))
            continue
        for address in dict.fromkeys(m.group(0) for m in _ADDRESS.finditer(raw)):
            inner = _value_form(address)
            if inner == form or len(inner) < MIN_TRACED:
                continue
            found = _found(address, inner, sources)
            if found is not None and not known.has(address, inner):
                # Also when the whole text came from untrusted content: a rule may count
                # only the addresses inside a text the model writes.
                flagged.add(path)
                origins.append(ArgumentOrigin(name, path, found[0], "contained"))
                break
    short = [v for v in values if 0 < len(v[3]) < MIN_TRACED and v[1] not in flagged]
    for first in short:
        for second in values:
            if second is first or (second[1] in flagged and first[1] in flagged):
                continue
            joined = first[3] + second[3]
            pieces = _found(joined, joined, sources)
            if pieces is None or known.has(joined, joined):
                continue
            for name, path, _, _ in (first, second):
                if path not in flagged:
                    flagged.add(path)
                    origins.append(ArgumentOrigin(name, path, pieces[0], "split"))
    return Provenance(tuple(origins), len(untrusted))


def directed_by(args: Mapping[str, Any], request: str | None) -> bool:
    """Whether the user directed a read with ``args``: one of its argument values is named
    whole in the user's ``request`` (case folded, not as part of a longer word) and says
    which object: at least `MIN_TRACED` characters and not one plain word — "the file
    'notes.txt'", "the 'Introductory meeting' event", "my calendar on 2024-05-15", not
    "meeting" (anyone can write a message that a search for one word finds). None: no
    request."""
    if not request:
        return False
    said = _folded_text(request)
    for count, (_, raw) in enumerate(_leaves(args, "")):
        if count >= MAX_VALUES:
            break
        value = _folded_text(raw.strip())
        if (value in said and not value.isalpha() and len(_value_form(raw)) >= MIN_TRACED
                and _token_in(value, said)):
            return True
    return False


def _found(raw: str, form: str, sources: Sequence[tuple[str, str, str]]
           ) -> tuple[tuple[str, ...], Match] | None:
    exact = tuple(dict.fromkeys(s for s, text, _ in sources if raw and raw in text))
    if exact:
        return exact, "exact"
    normalised = tuple(dict.fromkeys(s for s, _, text in sources if form in text))
    return (normalised, "normalised") if normalised else None


def _listed(value: str, sources: Sequence[tuple[str, str, str]], *, token: bool) -> bool:
    """Whether ``value`` is, in every untrusted result that holds it, a whole field of a
    structured result and inside none of its longer fields."""
    holding = [text for _, text, _ in sources
               if (_token_in(value, _folded_text(text)) if token else value in text)]
    if not holding:
        return False
    for text in holding:
        fields = _fields(text)
        if fields is None:
            return False
        whole = value.casefold() if token else value
        if not any((f.casefold() if token else f) == whole for f in fields):
            return False
        for field in fields:
            inside = _token_in(value, field.casefold()) if token else value in field
            if inside and (field.casefold() if token else field) != whole:
                return False
    return True


@functools.lru_cache(maxsize=1024)
def _fields(text: str) -> tuple[str, ...] | None:
    """The scalar fields of a structured result (JSON, or YAML that is a list or mapping),
    stripped; None for prose or a result too long to read."""
    if len(text) > MAX_STRUCTURED_CHARS:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        try:
            data = yaml.load(text, Loader=_YAML_LOADER)  # a safe loader
        except yaml.YAMLError:
            return None
    if not isinstance(data, dict | list):
        return None
    found: list[str] = []
    pending: list[Any] = [data]
    while pending:
        item = pending.pop()
        if isinstance(item, Mapping):
            pending.extend(item.values())
            found.extend(str(k).strip() for k in item if isinstance(k, str | int))
        elif isinstance(item, list):
            pending.extend(item)
        elif item is not None:  # a string, a number, a date: as the text shows it
            found.append(str(item).strip())
    return tuple(found)
