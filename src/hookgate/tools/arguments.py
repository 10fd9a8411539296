"""The model-arguments boundary: what a model asks for is admitted here, or refused.

Arguments must be I-JSON (RFC 7493) that every store and every display can hold exactly:
finite numbers, integers a JavaScript client reads without rounding, no lone surrogates,
bounded depth and size. A refused call keeps its id and name but carries a stand-in
argument object that every tool refuses with the reason, so the model reads why.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from hookgate.tools.calls import ToolCall
from hookgate.tools.errors import ToolArgumentsError

MAX_DEPTH = 32
MAX_ARGUMENT_BYTES = 256 * 1024
MAX_SAFE_INTEGER = 2**53 - 1
#: Ids up to this length are kept; longer ones (or ones that cannot be stored) are hashed,
#: leaving room under the 128-character columns for the suffix that keeps them unique.
MAX_CALL_ID = 64
#: The width of the tool_call_id columns: ids the engines build (``step_<id>``) are
#: hashed only past it.
CALL_ID_COLUMN = 128
MAX_TOOL_NAME = 256
#: The key of the stand-in arguments of a refused call (see `admit_call`).
REFUSED_KEY = "__hookgate_refused__"
#: 16 digits or more: an integer that may be past MAX_SAFE_INTEGER (the walk decides).
_LONG_NUMBER = re.compile(r"\d{16,}")


class ArgumentsRefused(ToolArgumentsError):
    """Arguments that cannot cross the boundary; the message says why, for the model."""


def parse_arguments(text: str) -> Any:
    """Strictly parse a model's JSON argument string (no NaN, Infinity or overflowing
    numbers such as ``1e400``, bounded size and depth, no lone surrogates)."""
    if len(text) > MAX_ARGUMENT_BYTES:
        raise ArgumentsRefused(f"the arguments are over {MAX_ARGUMENT_BYTES} characters")
    try:
        value = json.loads(text, parse_constant=_no_constant, parse_float=_finite_float)
    except RecursionError:  # the parser's own guard, far past MAX_DEPTH
        raise ArgumentsRefused(f"the arguments nest deeper than {MAX_DEPTH} levels") from None
    except json.JSONDecodeError as exc:
        raise ArgumentsRefused(f"the arguments are not valid JSON: {exc}") from None
    check_arguments(value)
    return value


def screened(value: Any, *, objects: bool = False) -> bool:
    """True when ``value`` certainly passes `check_arguments`, found at C speed (one
    ``json.dumps``); False means "walk it" (most arguments never need the walk).

    ``objects`` lets through values a model's Python dump holds (Decimal, datetime, ...),
    as their text, but never a non-finite Decimal.
    """
    if plain_scalars(value):
        return True
    try:
        text = (_OBJECTS_ENCODER if objects else _ENCODER).encode(value)
        text.encode("utf-8")
    except (ValueError, TypeError, RecursionError):  # UnicodeEncodeError is a ValueError
        return False
    return (len(text) <= MAX_ARGUMENT_BYTES
            and text.count("{") + text.count("[") < MAX_DEPTH  # so no deeper than that
            and "\\u0000" not in text and _LONG_NUMBER.search(text) is None)


def plain_scalars(value: Any) -> bool:
    """True when ``value`` is a small mapping of admissible scalars (ASCII text, finite
    floats, safe integers, booleans, None): most tool calls, checked without encoding."""
    if type(value) is not dict or len(value) > 32:
        return False
    for key, item in value.items():
        if type(key) is not str or not (key.isascii() and key.isprintable()):
            return False
        kind = type(item)
        if kind is str:
            if not (item.isascii() and "\x00" not in item) or len(item) > 4096:
                return False
        elif kind is int:
            if not -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER:
                return False
        elif kind is float:
            if not math.isfinite(item):
                return False
        elif item is not None and kind is not bool:
            return False
    return True


def _as_text(value: Any) -> str:
    if isinstance(value, Decimal) and not value.is_finite():
        raise ValueError("non-finite Decimal")
    return str(value)


# Built once: json.dumps with non-default options builds an encoder on every call.
_ENCODER = json.JSONEncoder(allow_nan=False, ensure_ascii=False)
_OBJECTS_ENCODER = json.JSONEncoder(allow_nan=False, ensure_ascii=False, default=_as_text)


def check_arguments(value: Any) -> None:
    """Raise ArgumentsRefused unless ``value`` is JSON data every store can hold exactly."""
    if screened(value):
        return
    stack: list[tuple[Any, int, str]] = [(value, 1, "arguments")]
    budget = MAX_ARGUMENT_BYTES
    while stack:
        item, depth, where = stack.pop()
        if depth > MAX_DEPTH:
            raise ArgumentsRefused(f"the arguments nest deeper than {MAX_DEPTH} levels")
        budget -= 1
        if isinstance(item, bool) or item is None:
            continue
        if isinstance(item, str):
            budget -= len(item)
            _check_text(item, where)
        elif isinstance(item, int):
            if abs(item) > MAX_SAFE_INTEGER:
                raise ArgumentsRefused(
                    f"{where}: the integer {item} is outside ±{MAX_SAFE_INTEGER} and would "
                    "not be shown or stored exactly; send it as a string")
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise ArgumentsRefused(f"{where}: {item!r} is not a finite number; only "
                                       "finite numbers are accepted")
        elif isinstance(item, Mapping):
            for key, sub in item.items():
                if isinstance(key, int | float | bool) or key is None:
                    key = json.dumps(key)  # JSON writes such keys as their text
                if not isinstance(key, str):
                    raise ArgumentsRefused(f"{where}: the key {key!r} is not a string")
                budget -= len(key)
                _check_text(key, f"{where}.{_short(key)}")
                stack.append((sub, depth + 1, f"{where}.{_short(key)}"))
        elif isinstance(item, list | tuple):
            stack.extend((sub, depth + 1, f"{where}[{i}]") for i, sub in enumerate(item))
        else:
            raise ArgumentsRefused(f"{where}: a {type(item).__name__} is not JSON data")
        if budget < 0:
            raise ArgumentsRefused(f"the arguments are over {MAX_ARGUMENT_BYTES} characters")


def first_non_finite(value: Any) -> str | None:
    """The first NaN or infinity (float or Decimal) anywhere in ``value``, as text."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return repr(item)
        if isinstance(item, Decimal) and not item.is_finite():
            return str(item)
        if isinstance(item, Mapping):
            stack.extend(item.values())
        elif isinstance(item, list | tuple | set | frozenset):
            stack.extend(item)
    return None


def refused_arguments(reason: str) -> dict[str, Any]:
    """The stand-in for arguments refused at the boundary: storable, and refused by
    `refusal_of` (so by every tool's validation) with ``reason``."""
    return {REFUSED_KEY: reason}


def refusal_of(args: Any) -> str | None:
    """The reason when ``args`` is the stand-in of refused arguments."""
    if isinstance(args, Mapping) and REFUSED_KEY in args:
        return str(args[REFUSED_KEY])
    return None


def admit_call(call: ToolCall, *, max_id: int = MAX_CALL_ID) -> ToolCall:
    """The call as it may enter a run: an id and a name that fit the columns and every
    encoding, and arguments that pass `check_arguments` (else the refusal stand-in).

    Deterministic and idempotent, so a resumed run admits a call to the same id.
    """
    args = call.args
    if refusal_of(args) is None:
        try:
            check_arguments(args)
        except ArgumentsRefused as exc:
            args = refused_arguments(str(exc))
    return ToolCall(_admitted_id(call.id, max_id), _admitted_name(call.name), args)


def _admitted_id(call_id: Any, max_id: int) -> str:
    text = call_id if isinstance(call_id, str) else str(call_id)
    if len(text) <= max_id and _storable(text):
        return text
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:40]
    return f"call_{digest}"


def _admitted_name(name: Any) -> str:
    # A name that cannot be stored cannot be a tool's name either: it stays unknown, but in
    # a form the audit log and the trace can hold.
    text = name if isinstance(name, str) else repr(name)
    if len(text) <= MAX_TOOL_NAME and _storable(text):
        return text
    shown = storable_text(text)
    return shown[:MAX_TOOL_NAME - 1] + "…" if len(shown) > MAX_TOOL_NAME else shown


def storable_text(text: str) -> str:
    """``text`` with what no store can hold (lone surrogates, NUL) escaped, for reasons and
    error messages that quote model input."""
    if _storable(text):
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8").replace("\x00", "\\x00")


def _storable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return "\x00" not in text  # PostgreSQL text cannot hold NUL


def _check_text(text: str, where: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ArgumentsRefused(
            f"{where}: the text holds a lone surrogate ({text[exc.start]!r} at position "
            f"{exc.start}), which is not valid Unicode") from None
    if "\x00" in text:
        raise ArgumentsRefused(f"{where}: the text holds a NUL character")


def _short(key: str) -> str:
    return key if len(key) <= 40 else key[:40] + "…"


def _no_constant(name: str) -> Any:
    raise ArgumentsRefused(f"{name} is not a finite number; only finite numbers are accepted")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ArgumentsRefused(f"{text} does not fit in a finite number")
    return value
