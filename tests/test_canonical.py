"""The canonical JSON (RFC 8785) of every value is the rfc8785 package's, whichever way
``canonical_bytes`` takes: the standard library's C encoder for plain values, rfc8785 for
the rest. Checked over generated values that reach each edge: control characters, U+2028,
text outside the BMP, lone surrogates, integers at ±(2**53 - 1) and past them, floats,
non-ASCII keys (ordered differently by code point and by UTF-16 unit), deep nesting."""

from __future__ import annotations

from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from hookgate.canonical import NotCanonicalJSON, _plain, canonical_bytes

EDGE_TEXT = st.sampled_from(["", "\x00", "\x1f", "\x7f", '"', "\\", "\b\f\n\r\t", "\u2028",
                             "é", "\ue000", "\U0001f600", "\ud800", "a\udfffb"])
TEXT = st.one_of(st.text(max_size=8), EDGE_TEXT)
SAFE = 2**53 - 1
INTS = st.one_of(st.integers(-1000, 1000), st.sampled_from([SAFE, -SAFE, SAFE + 1,
                                                            -SAFE - 1, 2**64]))
FLOATS = st.floats(allow_nan=False, allow_infinity=False)
SCALARS = st.one_of(st.none(), st.booleans(), INTS, FLOATS, TEXT)
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.tuples(inner, inner),
    st.dictionaries(TEXT, inner, max_size=4)), max_leaves=20)


def expected(value: Any) -> bytes | type[NotCanonicalJSON]:
    try:
        return rfc8785.dumps(_plain(value))
    except (rfc8785.CanonicalizationError, NotCanonicalJSON, UnicodeEncodeError):
        return NotCanonicalJSON


def got(value: Any) -> bytes | type[NotCanonicalJSON]:
    try:
        return canonical_bytes(value)
    except NotCanonicalJSON:
        return NotCanonicalJSON


@settings(max_examples=600, deadline=None)
@given(VALUES)
def test_every_value_has_exactly_the_rfc8785_packages_bytes_or_is_refused_as_it_is(
        value: Any) -> None:
    assert got(value) == expected(value)


@pytest.mark.parametrize("value", [
    {"\ue000": 1, "\U0001f600": 2},  # code point order differs from UTF-16 order
    {"b": [1, {"a": "\u2028\x01"}], "a": (True, None)},
    [SAFE, -SAFE], 1.5, {"x": 1e21},
])
def test_edges_of_the_fast_path_give_rfc8785s_bytes(value: Any) -> None:
    assert canonical_bytes(value) == rfc8785.dumps(_plain(value))


@pytest.mark.parametrize("value", [SAFE + 1, {"k": "\ud800"}, {"\ud800": 1},
                                   [float("nan")]])
def test_what_rfc8785_refuses_is_refused_on_every_path(value: Any) -> None:
    with pytest.raises(NotCanonicalJSON):
        canonical_bytes(value)


def test_nesting_past_the_fast_paths_depth_still_gives_rfc8785s_bytes() -> None:
    value: Any = "leaf"
    for _ in range(40):
        value = {"k": [value]}
    assert canonical_bytes(value) == rfc8785.dumps(value)
