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

import rfc8785

__all__ = ["NotCanonicalJSON", "canonical_bytes", "canonical_json", "canonical_sha256"]


class NotCanonicalJSON(ValueError):
    """A value with no RFC 8785 form; the message says which part and why."""


def canonical_bytes(value: Any) -> bytes:
    """The RFC 8785 (UTF-8) bytes of ``value``. Tuples are arrays; a finite Decimal, a
    datetime or any other object stands as its ``str()`` (as a model's Python dump
    says it); keys that are numbers, booleans or None as JSON writes them."""
    try:
        return rfc8785.dumps(_plain(value))
    except rfc8785.CanonicalizationError as exc:
        raise NotCanonicalJSON(f"the value has no canonical JSON form: {exc}") from None
    except RecursionError:
        raise NotCanonicalJSON("the value nests too deeply for canonical JSON") from None


def canonical_json(value: Any) -> str:
    """`canonical_bytes` as text."""
    return canonical_bytes(value).decode("utf-8")


def canonical_sha256(value: Any) -> str:
    """The sha256 (hex) of `canonical_bytes`."""
    return hashlib.sha256(canonical_bytes(value)).hexdigest()


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
