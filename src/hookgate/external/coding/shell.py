"""What a Bash command line runs: every simple command in it, as words with their quoting
removed, found through ``;``, ``&&``, ``||``, pipes, subshells, ``$(...)``, backticks,
process substitution and here-documents.

Only lexical: nothing is expanded. A word built from an expansion (``$X``, ``$(...)``,
a glob or brace in the command name) is marked unknown, and what cannot be read with
certainty (unbalanced quotes, ``case``, a substitution inside ``${...}``) raises
ShellSyntaxError so that callers fail closed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["MAX_COMMAND", "ShellSyntaxError", "SimpleCommand", "Word", "parse"]

#: Longer command lines are not read (the rule then applies: fail closed).
MAX_COMMAND = 64 * 1024
_MAX_DEPTH = 16
_OPERATORS = ("&&", "||", ";;", "|&", ";", "&", "|", "(", ")", "\n")
_REDIRECTS = ("&>>", "<<<", "<<-", "<<", ">>", "&>", ">&", "<&", "<>", ">|", ">", "<")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SPECIAL = set("@*#?$!-0123456789")
_BRACE = re.compile(r"\{[^{}]*(,|\.\.)[^{}]*\}")


class ShellSyntaxError(ValueError):
    """The command line cannot be read with certainty (a rule over it fails closed)."""


@dataclass(frozen=True, slots=True)
class Word:
    """One word with quoting removed. ``known`` is False when part of it comes from an
    expansion; ``tilde`` when it starts with an unquoted ``~``; ``glob`` when it has
    unquoted ``*``, ``?`` or ``[``."""

    text: str
    known: bool = True
    tilde: bool = False
    glob: bool = False


@dataclass(slots=True)
class SimpleCommand:
    """Words and redirection targets of one simple command, and what feeds its stdin."""

    words: list[Word] = field(default_factory=list)
    targets: list[Word] = field(default_factory=list)
    #: Text given on stdin by a here-document or here-string (None when there is none).
    fed: str | None = None
    #: True when stdin comes from a pipe or a file (its text is not in the command line).
    piped: bool = False


def parse(line: str) -> list[SimpleCommand]:
    """Every simple command in ``line``, in order; ShellSyntaxError when unreadable."""
    if len(line) > MAX_COMMAND:
        raise ShellSyntaxError(f"the command is longer than {MAX_COMMAND} characters")
    if "\0" in line:
        raise ShellSyntaxError("the command contains a NUL character")
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        raise ShellSyntaxError("the command is not valid text (a lone surrogate)") from None
    lexer = _Lexer(line, 0)
    found = lexer.commands(until=None)
    return found


class _Lexer:
    def __init__(self, text: str, depth: int) -> None:
        if depth > _MAX_DEPTH:
            raise ShellSyntaxError("commands are nested too deeply")
        self.s = text
        self.i = 0
        self.depth = depth
        self.out: list[SimpleCommand] = []
        self.heredocs: list[tuple[str, bool, SimpleCommand]] = []

    # -- structure -------------------------------------------------------------------------

    def commands(self, until: str | None) -> list[SimpleCommand]:
        current = SimpleCommand()
        piped_next = False
        while True:
            self._blanks()
            if self.i >= len(self.s):
                if until is not None:
                    raise ShellSyntaxError(f"missing closing {until!r}")
                break
            c = self.s[self.i]
            if until is not None and self.s.startswith(until, self.i):
                self.i += len(until)
                break
            if c == "#" and not current.words:
                while self.i < len(self.s) and self.s[self.i] != "\n":
                    self.i += 1
                continue
            op = next((o for o in _OPERATORS if self.s.startswith(o, self.i)), None)
            if op is not None:
                self.i += len(op)
                if op == ";;":
                    raise ShellSyntaxError("'case' is not read")
                self._close(current, piped_next)
                piped_next = op in ("|", "|&")
                current = SimpleCommand()
                if op == "\n":
                    self._heredoc_bodies()
                continue
            redirect = self._redirect_ahead(current)
            if redirect is not None:
                self.i += len(redirect)
                self._blanks()
                if self.s.startswith("(", self.i) or self.i >= len(self.s):
                    raise ShellSyntaxError(f"redirection {redirect!r} has no target")
                raw_start = self.i
                target = self._word()
                if redirect in ("<<", "<<-"):
                    # A quoted delimiter keeps the body literal; otherwise it is expanded.
                    quoted = any(q in self.s[raw_start:self.i] for q in "'\"\\")
                    self.heredocs.append((target.text, quoted, current))
                    current.fed = ""
                elif redirect == "<<<":
                    current.fed = target.text if target.known else None
                    current.piped = not target.known
                else:
                    if redirect in ("<", "<>"):
                        current.piped = True
                    if not (redirect.endswith("&") and target.text.isdigit()):
                        current.targets.append(target)
                continue
            if c in "<>" and self.s.startswith("(", self.i + 1):
                self.i += 2  # process substitution: its commands run too
                self.out.extend(_Lexer.sub(self, ")"))
                current.words.append(Word(f"{c}(...)", known=False))
                continue
            word = self._word()
            if word.known and word.text.isdigit() and self.s[self.i:self.i + 1] in ("<", ">"):
                continue  # a file descriptor number in front of a redirection (2>file)
            if word.text == "case" and word.known and not current.words:
                raise ShellSyntaxError("'case' is not read")
            current.words.append(word)
        self._close(current, piped_next)
        if self.heredocs and until is None:
            raise ShellSyntaxError("a here-document has no end")
        return self.out

    def _close(self, command: SimpleCommand, piped: bool) -> None:
        if piped:
            command.piped = True
        if command.words or command.targets:
            self.out.append(command)

    @staticmethod
    def sub(outer: _Lexer, until: str) -> list[SimpleCommand]:
        inner = _Lexer(outer.s, outer.depth + 1)
        inner.i = outer.i
        found = inner.commands(until=until)
        outer.i = inner.i
        return found

    def _redirect_ahead(self, current: SimpleCommand) -> str | None:
        for r in _REDIRECTS:
            if self.s.startswith(r, self.i):
                if r[0] in "<>" and self.s.startswith("(", self.i + 1):
                    return None
                return r
        return None

    def _heredoc_bodies(self) -> None:
        for delimiter, quoted, command in self.heredocs:
            lines: list[str] = []
            while True:
                if self.i >= len(self.s):
                    raise ShellSyntaxError(f"here-document {delimiter!r} has no end")
                end = self.s.find("\n", self.i)
                end = len(self.s) if end < 0 else end
                line = self.s[self.i:end]
                self.i = min(end + 1, len(self.s))
                if line.strip("\t") == delimiter:
                    break
                lines.append(line)
            body = "\n".join(lines)
            if not quoted and ("$(" in body or "`" in body or "${" in body):
                raise ShellSyntaxError("a here-document runs a substitution")
            command.fed = body
        self.heredocs = []

    def _blanks(self) -> None:
        while self.i < len(self.s):
            c = self.s[self.i]
            if c in " \t":
                self.i += 1
            elif self.s.startswith("\\\n", self.i):
                self.i += 2
            else:
                break

    # -- words -----------------------------------------------------------------------------

    def _word(self) -> Word:
        parts: list[str] = []
        known = True
        glob = False
        tilde = self.s.startswith("~", self.i)
        unquoted: list[str] = []
        start = self.i
        while self.i < len(self.s):
            c = self.s[self.i]
            if c in " \t\n;&|()<>":
                    break
            if c == "\\":
                if self.s.startswith("\\\n", self.i):
                    self.i += 2
                    continue
                if self.i + 1 >= len(self.s):
                    raise ShellSyntaxError("the command ends with a lone backslash")
                parts.append(self.s[self.i + 1])
                self.i += 2
            elif c == "'":
                end = self.s.find("'", self.i + 1)
                if end < 0:
                    raise ShellSyntaxError("a single quote is not closed")
                parts.append(self.s[self.i + 1:end])
                self.i = end + 1
            elif c == '"':
                text, ok = self._double_quoted()
                parts.append(text)
                known = known and ok
            elif c == "`":
                self._backticks()
                known = False
            elif c == "$":
                text, ok = self._dollar()
                parts.append(text)
                known = known and ok
            else:
                if c in "*?[":
                    glob = True
                parts.append(c)
                unquoted.append(c)
                self.i += 1
        if self.i == start:
            raise ShellSyntaxError(f"unexpected {self.s[self.i]!r}")
        text = "".join(parts)
        if _BRACE.search("".join(unquoted)):
            known = False  # brace expansion makes other words out of this one
        return Word(text, known=known, tilde=tilde, glob=glob)

    def _double_quoted(self) -> tuple[str, bool]:
        self.i += 1
        parts: list[str] = []
        known = True
        while True:
            if self.i >= len(self.s):
                raise ShellSyntaxError("a double quote is not closed")
            c = self.s[self.i]
            if c == '"':
                self.i += 1
                return "".join(parts), known
            if c == "\\" and self.i + 1 < len(self.s) and self.s[self.i + 1] in '$`"\\\n':
                if self.s[self.i + 1] != "\n":
                    parts.append(self.s[self.i + 1])
                self.i += 2
            elif c == "`":
                self._backticks()
                known = False
            elif c == "$":
                text, ok = self._dollar(in_quotes=True)
                parts.append(text)
                known = known and ok
            else:
                parts.append(c)
                self.i += 1

    def _backticks(self) -> None:
        self.i += 1
        inner: list[str] = []
        while True:
            if self.i >= len(self.s):
                raise ShellSyntaxError("a backtick is not closed")
            c = self.s[self.i]
            if c == "`":
                self.i += 1
                break
            if c == "\\" and self.i + 1 < len(self.s) and self.s[self.i + 1] in "$`\\":
                inner.append(self.s[self.i + 1])
                self.i += 2
            else:
                inner.append(c)
                self.i += 1
        sub = _Lexer("".join(inner), self.depth + 1)
        self.out.extend(sub.commands(until=None))

    def _dollar(self, in_quotes: bool = False) -> tuple[str, bool]:
        s, i = self.s, self.i
        if s.startswith("$((", i):
            end = s.find("))", i + 3)
            if end < 0:
                raise ShellSyntaxError("an arithmetic expansion is not closed")
            body = s[i + 3:end]
            if "$(" in body or "`" in body:
                raise ShellSyntaxError("an arithmetic expansion runs a substitution")
            self.i = end + 2
            return "$((...))", False
        if s.startswith("$(", i):
            self.i = i + 2
            self.out.extend(_Lexer.sub(self, ")"))
            return "$(...)", False
        if s.startswith("${", i):
            end = s.find("}", i + 2)
            if end < 0:
                raise ShellSyntaxError("a ${...} expansion is not closed")
            body = s[i + 2:end]
            if "$(" in body or "`" in body or "{" in body:
                raise ShellSyntaxError("a ${...} expansion runs a substitution or nests")
            self.i = end + 1
            return "${...}", False
        if not in_quotes and s.startswith("$'", i):
            end = i + 2
            while end < len(s) and s[end] != "'":
                end += 2 if s[end] == "\\" else 1
            if end >= len(s):
                raise ShellSyntaxError("a $'...' quote is not closed")
            self.i = end + 1
            return _ansi_c(s[i + 2:end]), True
        if not in_quotes and s.startswith('$"', i):
            self.i = i + 1
            return self._double_quoted()
        name = _NAME.match(s, i + 1)
        if name is not None:
            self.i = name.end()
            return "$" + name.group(), False
        if i + 1 < len(s) and s[i + 1] in _SPECIAL:
            self.i = i + 2
            return s[i:i + 2], False
        self.i = i + 1
        return "$", True


_ANSI = re.compile(r"\\(x[0-9A-Fa-f]{1,2}|u[0-9A-Fa-f]{1,4}|U[0-9A-Fa-f]{1,8}|[0-7]{1,3}|c.|.)",
                   re.DOTALL)
_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "e": "\x1b",
                   "E": "\x1b", "f": "\f", "v": "\v", "\\": "\\", "'": "'", '"': '"',
                   "?": "?"}


def _ansi_c(body: str) -> str:
    def one(m: re.Match[str]) -> str:
        e = m.group(1)
        if e[0] in "xuU":
            code = int(e[1:], 16)
        elif e[0] in "01234567":
            code = int(e, 8)
        elif e[0] == "c":
            code = ord(e[1]) & 0x1F
        else:
            return _SIMPLE_ESCAPES.get(e, "\\" + e)
        if code == 0 or code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
            raise ShellSyntaxError("a $'...' quote holds a NUL or a surrogate")
        return chr(code)
    return _ANSI.sub(one, body)
