"""The one canonical JSON form (RFC 8785, JCS) of a value: what every digest hookgate pins
(approved arguments, the execution ledger, the audit chain) is computed over.

Imports nothing of hookgate, so every layer can use it. Values JSON cannot say exactly (NaN,
infinities, lone surrogates, integers past 2**53, non-text keys) are refused, never guessed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

import orjson
import rfc8785

__all__ = ["NOT_JSON", "NotCanonicalJSON", "canonical_bytes", "canonical_json",
           "canonical_sha256", "json_copy", "same_json"]


class NotCanonicalJSON(ValueError):
    """A value with no RFC 8785 form; the message says which part and why."""


def canonical_bytes(value: Any) -> bytes:
    """The RFC 8785 (UTF-8) bytes of ``value``. Tuples are arrays; a finite Decimal, a
    datetime or any other object stands as its ``str()`` (as a model's Python dump
    says it); keys that are numbers, booleans or None as JSON writes them."""
    if _same_as_sorted_json(value):
        # For text, safe integers, booleans and null under ASCII keys, RFC 8785 is exactly
        # sorted, compact JSON with text as it is (decision 0009; both escape the same
        # characters the same way: the two-character escapes, other controls as lowercase
        # \u00xx). orjson writes it as UTF-8 directly: an eighth of the standard library's
        # encoder's time for an audit row's form, a tenth for a small value (decision 0031).
        try:
            return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
        except orjson.JSONEncodeError:
            pass  # a lone surrogate: rfc8785 below says so
    try:
        return rfc8785.dumps(_plain(value))
    except rfc8785.CanonicalizationError as exc:
        raise NotCanonicalJSON(f"the value has no canonical JSON form: {exc}") from None
    except RecursionError:
        raise NotCanonicalJSON("the value nests too deeply for canonical JSON") from None
    except UnicodeEncodeError:  # rfc8785 orders keys by UTF-16 units: a lone surrogate key
        raise NotCanonicalJSON("a key holds a lone surrogate, which JSON text cannot carry"
                               ) from None


def canonical_json(value: Any) -> str:
    """`canonical_bytes` as text."""
    return canonical_bytes(value).decode("utf-8")


def canonical_sha256(value: Any) -> str:
    """The sha256 (hex) of `canonical_bytes`."""
    return hashlib.sha256(canonical_bytes(value)).hexdigest()


_SAFE_INT = 2**53 - 1
#: How deep the fast path looks before leaving a value to rfc8785.
_FAST_DEPTH = 32


def _same_as_sorted_json(value: Any, depth: int = 0) -> bool:
    """Whether ``value``'s RFC 8785 form is its sorted, compact JSON: built only of exact
    str, bool, None, integers within ±(2**53 - 1), lists, tuples and dicts with ASCII keys
    (ordered the same by code point and by UTF-16 unit). Floats, other types and anything
    deeper than `_FAST_DEPTH` go the general way. (Plain loops: the digest of every call
    and audit row runs through here, and generators in ``all()`` cost twice as much.)"""
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return True
    if kind is int:
        return bool(-_SAFE_INT <= value <= _SAFE_INT)
    if depth >= _FAST_DEPTH:
        return False
    if kind is dict:
        for k in value:
            if type(k) is not str or not k.isascii():
                return False
        return _members_plain(value.values(), depth)
    if kind is list or kind is tuple:
        return _members_plain(value, depth)
    return False


def _members_plain(members: Any, depth: int) -> bool:
    for v in members:
        kind = type(v)
        if kind is str or kind is bool or v is None:
            continue
        if not _same_as_sorted_json(v, depth + 1):
            return False
    return True


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, str | int | float | bool):
        return value  # rfc8785 refuses the non-finite, unsafe or unencodable ones
    if isinstance(value, Mapping):
        return {_key(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, Decimal) and not value.is_finite():
        raise NotCanonicalJSON(f"{value} is not a finite number")
    return str(value)


def _key(key: Any) -> str:
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, int | float | bool):
        try:
            return json.dumps(key, allow_nan=False)  # as JSON writes such keys
        except ValueError:
            raise NotCanonicalJSON(f"the key {key!r} is not a finite number") from None
    raise NotCanonicalJSON(f"the key {key!r} is not text")


#: What `json_copy` answers for a value that is not JSON-shaped.
NOT_JSON: Any = object()


def json_copy(value: Any) -> Any:
    """A deep copy of a JSON-shaped value (dicts with text keys, lists, text, numbers,
    booleans, None), to compare it with later (`same_json`); NOT_JSON for anything else."""
    kind = type(value)
    if kind is dict:
        out: dict[str, Any] = {}
        for k, v in value.items():
            if type(k) is not str:
                return NOT_JSON
            out[k] = c = json_copy(v)
            if c is NOT_JSON:
                return NOT_JSON
        return out
    if kind is list:
        items = [json_copy(v) for v in value]
        return NOT_JSON if any(c is NOT_JSON for c in items) else items
    if value is None or kind is str or kind is int or kind is float or kind is bool:
        return value
    return NOT_JSON


def same_json(value: Any, copy: Any) -> bool:
    """Whether ``value`` is still what `json_copy` copied: the same types and values all
    the way down (``1`` is not ``1.0`` nor ``True``; a NaN is never the same)."""
    kind = type(value)
    if kind is not type(copy):
        return False
    if kind is dict:
        return len(value) == len(copy) and all(
            k in copy and same_json(v, copy[k]) for k, v in value.items())
    if kind is list:
        return len(value) == len(copy) and all(
            same_json(v, c) for v, c in zip(value, copy, strict=True))
    return bool(value == copy)
