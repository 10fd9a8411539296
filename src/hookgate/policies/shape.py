"""Bounds on a policy's shape, checked on the text before the Cedar engine sees it.

The engine's parser and evaluator recurse over an expression: a few hundred nested brackets
or a few thousand chained operators overflow its stack and kill the process (no error to
catch). So hookgate refuses, with the line, a policy nesting brackets deeper than
MAX_NESTING or chaining more than MAX_OPERATORS operators and keywords; with the file size
bound (source.py) this also bounds how long one evaluation can take (Cedar has no loops).
"""

from __future__ import annotations

import re

#: The deepest nesting of ``(``, ``[`` and ``{`` in one policy.
MAX_NESTING = 64
#: The most operators and keywords (``&&``, ``+``, ``.``, ``if``, ``like`` …) in one policy.
MAX_OPERATORS = 1000

_OPERATOR = re.compile(r"&&|\|\||==|!=|<=|>=|[-+*<>!.]|\b(?:if|then|else|in|has|like|is)\b")


def shape_problems(name: str, text: str) -> list[str]:
    """``name:LINE: …`` for each policy of ``text`` beyond the bounds (once per policy)."""
    problems: list[str] = []
    depth = deepest = operators = 0
    line, start_line, pending, i, n = 1, 1, True, 0, len(text)
    code: list[str] = []  # the current policy's text outside strings and comments

    def check() -> None:
        nonlocal operators, code
        operators += len(_OPERATOR.findall("".join(code)))
        code = []
        if deepest > MAX_NESTING or operators > MAX_OPERATORS:
            what = (f"nests brackets more than {MAX_NESTING} deep" if deepest > MAX_NESTING
                    else f"has more than {MAX_OPERATORS} operators and keywords")
            problems.append(f"{name}:{start_line}: the policy starting here {what}, more "
                            "than the Cedar engine can take safely; split it into simpler "
                            "policies")

    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
        if c == "/" and text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        if c.isspace():
            i += 1
            continue
        if pending:
            start_line, pending = line, False
        if c == '"':
            i += 1
            while i < n and text[i] != '"':
                line += text[i] == "\n"
                i += 2 if text[i] == "\\" else 1
            code.append(" s ")
            i += 1
            continue
        if c in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif c in ")]}":
            depth = max(0, depth - 1)
        code.append(c)
        if c == ";":
            check()
            depth = deepest = operators = 0
            pending = True
        elif len(code) > 4096:
            operators += len(_OPERATOR.findall("".join(code)))
            code = []
        i += 1
    if not pending:
        check()
    return problems
