"""What a guard refuses to ask about: a call's arguments must be a JSON object with text keys
whose values JSON carries exactly (no NaN or infinities, no lone surrogates, no sets, bytes
or other objects). Checked before anything is sent, by the HTTP clients and the in-process
guard alike.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = ["MAX_NESTING", "ArgumentsNotJSON", "checked_arguments"]

#: The deepest nesting of arrays and objects the arguments may carry.
MAX_NESTING = 63


class ArgumentsNotJSON(ValueError):
    """The arguments are not a JSON object JSON carries exactly; the message says where."""


def checked_arguments(arguments: Any) -> dict[str, Any]:
    """``arguments`` as a plain dict, once every key and value is checked (without
    recursion); ArgumentsNotJSON naming the first thing JSON cannot carry."""
    if not isinstance(arguments, Mapping):
        raise ArgumentsNotJSON(f"the arguments are a {type(arguments).__name__}, not a JSON "
                               "object")
    stack: list[tuple[Any, str, int]] = [(arguments, "arguments", 1)]
    while stack:
        value, where, level = stack.pop()
        if value is None or isinstance(value, bool | int):
            continue
        if isinstance(value, float):
            if math.isnan(value):
                raise ArgumentsNotJSON(f"{where} is NaN, which JSON cannot carry")
            if math.isinf(value):
                raise ArgumentsNotJSON(f"{where} is {'-' if value < 0 else ''}infinity, "
                                       "which JSON cannot carry")
            continue
        if isinstance(value, str):
            if not _encodable(value):
                raise ArgumentsNotJSON(f"{where} holds a lone surrogate, which JSON cannot "
                                       "carry")
            continue
        if level > MAX_NESTING:
            raise ArgumentsNotJSON(f"the arguments nest deeper than {MAX_NESTING} levels")
        if isinstance(value, list | tuple):
            stack.extend((item, f"{where}[{i}]", level + 1) for i, item in enumerate(value))
        elif isinstance(value, dict) or (level == 1 and isinstance(value, Mapping)):
            for key, item in value.items():
                if not isinstance(key, str):
                    raise ArgumentsNotJSON(f"{where} has the key {key!r} "
                                           f"({type(key).__name__}), not a string: JSON "
                                           "object keys are text")
                if not _encodable(key):
                    raise ArgumentsNotJSON(f"{where} has a key with a lone surrogate, which "
                                           "JSON cannot carry")
                stack.append((item, f"{where}.{key}", level + 1))
        else:
            raise ArgumentsNotJSON(f"{where} is a {type(value).__name__}, which is not JSON")
    return dict(arguments)


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
