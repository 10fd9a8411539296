"""The values an expression reads and builds: JSON objects seen as attributes
(``args.amount``), and how large a value is, counted the same way for every limit."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any


class MappingView:
    """A JSON object's keys as attributes (``args.amount``), and nothing else: no dict
    methods stand in for a tool argument called ``items`` or ``get``."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Any]) -> None:
        self._data = data

    def __getattr__(self, key: str) -> Any:
        try:
            return view_of(self._data[key])
        except KeyError:
            raise AttributeError(f"no key {key!r}") from None

    def __getitem__(self, key: str) -> Any:
        return view_of(self._data[key])

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __len__(self) -> int:
        return len(self._data)

    def __eq__(self, other: object) -> bool:
        return self._data == (other._data if isinstance(other, MappingView) else other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(self._data)


def view_of(value: Any) -> Any:
    """``value`` with every JSON object in it seen as a `MappingView`."""
    if isinstance(value, Mapping):
        return MappingView(value)
    if isinstance(value, list):
        return [view_of(v) for v in value]
    return value


#: Characters of text that count as one unit of size.
TEXT_CHARS_PER_UNIT = 16


def size_of(value: Any, cap: int) -> int:
    """How large ``value`` is: one unit per element through every level of nesting (an
    element held twice counts twice: that is what comparing or printing it reads) and one
    per `TEXT_CHARS_PER_UNIT` characters of text. Counting stops once past ``cap``, so it
    never costs more than ``cap`` steps."""
    total = 0
    pending: list[Iterator[Any]] = [iter((value,))]
    while pending:
        item = next(pending[-1], _DONE)
        if item is _DONE:
            pending.pop()
            continue
        total += 1
        if isinstance(item, str | bytes):
            total += len(item) // TEXT_CHARS_PER_UNIT
        elif isinstance(item, MappingView):
            pending.append(_pairs(item._data))
        elif isinstance(item, Mapping):
            pending.append(_pairs(item))
        elif isinstance(item, list | tuple | set | frozenset):
            pending.append(iter(item))
        if total > cap:
            return total
    return total


_DONE = object()


def _pairs(mapping: Mapping[Any, Any]) -> Iterator[Any]:
    for key, value in mapping.items():
        yield key
        yield value
