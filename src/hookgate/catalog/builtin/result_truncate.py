"""`result_truncate`: keeps a huge tool output from flooding the model's context.

An observation longer than ``max_chars`` is cut, and a marker says how much there was. The
limit counts everything the model is shown, the marker included, so it holds exactly.
"""

from __future__ import annotations

import unicodedata
from typing import Any

from hookgate.hooks.errors import HookBuildError
from hookgate.hooks.model import HookContext, HookResult, PostToolUseHook
from hookgate.tools.guarded import render_observation

DEFAULT_MAX_CHARS = 8000
#: Below this there is no room for the marker and a useful piece of the output.
MIN_MAX_CHARS = 200
_PARAMS = ("max_chars", "keep_tail")


class ResultTruncate(PostToolUseHook):
    """Cuts observations over ``max_chars`` characters, keeping the start (and the last
    ``keep_tail`` characters when asked), with a marker stating the original size.

    Characters are Python ``str`` characters (code points). A cut never splits what a
    reader sees as one character: a surrogate pair, a base and its combining marks, an emoji
    sequence (joiners, skin tones, variation selectors, tags), a flag, or CR LF. Non-string
    results are first rendered the way the model would see them (JSON).
    """

    #: It keeps nothing per call and its from_declaration reads only its params and the
    #: database: one instance serves every call (catalog.build.shared_between_calls).
    shared_between_calls = True

    name = "result_truncate"
    #: Late in the chain: hooks that scrub or rewrite results run first, and the size limit
    #: applies to what they leave.
    priority = 900
    fail_mode = "closed"

    def __init__(self, max_chars: int = DEFAULT_MAX_CHARS, keep_tail: int = 0) -> None:
        self.max_chars = _whole_number("max_chars", max_chars, minimum=MIN_MAX_CHARS)
        self.keep_tail = _whole_number("keep_tail", keep_tail, minimum=0)
        if self.keep_tail > self.max_chars // 2:
            raise ValueError(
                f"keep_tail ({self.keep_tail}) may be at most half of max_chars "
                f"({self.max_chars}), so the start of the output is kept too"
            )

    @classmethod
    def from_declaration(cls, params: dict[str, Any], env: Any) -> ResultTruncate:
        unknown = sorted(set(params) - set(_PARAMS))
        if unknown:
            raise HookBuildError(
                f"unknown params {', '.join(map(repr, unknown))} "
                f"(result_truncate takes {', '.join(_PARAMS)})"
            )
        try:
            return cls(**params)
        except ValueError as exc:
            raise HookBuildError(str(exc)) from None

    async def execute(self, ctx: HookContext) -> HookResult:
        text = render_observation(ctx.tool_result)
        cut = truncate(text, self.max_chars, self.keep_tail)
        if cut is None:
            return HookResult()
        return HookResult(
            modified_result=cut,
            side_effects=[f"observation cut from {len(text):,} to {len(cut):,} characters"],
        )


def truncate(text: str, max_chars: int, keep_tail: int = 0) -> str | None:
    """``text`` cut to at most ``max_chars`` characters with a marker, or None if it fits."""
    total = len(text)
    if total <= max_chars:
        return None
    # Size the marker for the largest numbers it can show; the real ones are no longer, so
    # the result stays within the limit after the cut points move to character boundaries.
    widest = _marker(total, max_chars, max_chars if keep_tail else 0)
    head_end = _boundary_at_or_before(text, max(0, max_chars - keep_tail - len(widest)))
    tail_start = total
    if keep_tail:
        tail_start = _boundary_at_or_after(text, total - keep_tail)
    marker = _marker(total, head_end, total - tail_start)
    return text[:head_end] + marker + text[tail_start:]


def _marker(total: int, head: int, tail: int) -> str:
    if tail:
        return (
            f"\n… [truncated: {total:,} characters in all; showing the first {head:,} "
            f"and the last {tail:,}] …\n"
        )
    return f"\n… [truncated: {total:,} characters in all; showing the first {head:,}]"


def _boundary_at_or_before(text: str, i: int) -> int:
    while 0 < i < len(text) and not _is_boundary(text, i):
        i -= 1
    return i


def _boundary_at_or_after(text: str, i: int) -> int:
    while 0 < i < len(text) and not _is_boundary(text, i):
        i += 1
    return i


def _is_boundary(text: str, i: int) -> bool:
    """Whether a cut between ``text[i-1]`` and ``text[i]`` keeps every character whole.

    A simplified form of Unicode's grapheme-cluster rules that covers what occurs in tool
    output; it errs towards keeping things together.
    """
    before, after = text[i - 1], text[i]
    if before == "\r" and after == "\n":
        return False
    if _is_high_surrogate(before) or before == "\u200d":
        return False
    if _joins_previous(after):
        return False
    if _is_regional_indicator(before) and _is_regional_indicator(after):
        # Flags are pairs of regional indicators; count the run to find the pairs.
        run = 0
        j = i - 1
        while j >= 0 and _is_regional_indicator(text[j]):
            run += 1
            j -= 1
        return run % 2 == 0
    return True


def _joins_previous(ch: str) -> bool:
    """True when ``ch`` belongs to the character before it and cannot start one."""
    cp = ord(ch)
    return (
        0xDC00 <= cp <= 0xDFFF  # low surrogate: the second half of a pair
        or cp == 0x200D  # zero-width joiner
        or 0xFE00 <= cp <= 0xFE0F  # variation selectors
        or 0xE0100 <= cp <= 0xE01EF
        or 0x1F3FB <= cp <= 0x1F3FF  # emoji skin tones
        or 0xE0020 <= cp <= 0xE007F  # emoji tag sequences (subdivision flags)
        or unicodedata.category(ch) in ("Mn", "Mc", "Me")  # combining marks
    )


def _is_high_surrogate(ch: str) -> bool:
    return 0xD800 <= ord(ch) <= 0xDBFF


def _is_regional_indicator(ch: str) -> bool:
    return 0x1F1E6 <= ord(ch) <= 0x1F1FF


def _whole_number(name: str, value: object, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be a whole number, got {value!r}")
    if value < minimum:
        floor = "negative" if minimum == 0 else f"below {minimum}"
        raise ValueError(f"{name} must not be {floor}, got {value}")
    return value
