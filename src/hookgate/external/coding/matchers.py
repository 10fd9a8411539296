"""The normalising matchers of Claude Code gate rules: ``command`` / ``command_not_in`` over
the programs a Bash command runs, and ``path_under`` / ``path_outside`` over the resolved
paths a call names. Whatever cannot be read for certain counts as a match (fail closed).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hookgate.external.coding.commands import CommandPattern, Invocation, invocations
from hookgate.external.coding.paths import PathFacts, is_under, resolve
from hookgate.external.coding.shell import ShellSyntaxError, Word
from hookgate.hooks.errors import HookBuildError

__all__ = ["CommandMatch", "PathMatch", "call_paths"]

#: The arguments of Claude Code's tools that name a file or directory.
PATH_ARGUMENTS = ("file_path", "notebook_path", "path")
_CWD = "{cwd}"


@dataclass(frozen=True, slots=True)
class CommandMatch:
    """``command`` (any program matches a pattern) or ``command_not_in`` (some program
    matches none: an allow-list) over a call's ``command`` argument."""

    patterns: tuple[CommandPattern, ...]
    allow_list: bool

    @classmethod
    def parse(cls, declared: object, *, allow_list: bool) -> CommandMatch:
        key = "command_not_in" if allow_list else "command"
        if isinstance(declared, str) or (isinstance(declared, list) and declared
                                         and all(isinstance(w, str) for w in declared)):
            entries: list[object] = [declared]
        elif isinstance(declared, list) and declared:
            entries = list(declared)
        else:
            raise HookBuildError(f"'{key}' must be a command (\"git push\" or [git, push]) "
                                 "or a list of them")
        patterns = []
        for entry in entries:
            try:
                words = tuple(shlex.split(entry)) if isinstance(entry, str) else entry
                if not isinstance(words, tuple | list) or not words or not all(
                        isinstance(w, str) and w for w in words):
                    raise ValueError(f"{entry!r} is not a list of words")
                patterns.append(CommandPattern.of(tuple(words)))
            except (ValueError, ShellSyntaxError) as exc:
                raise HookBuildError(f"'{key}': {exc}") from None
        return cls(tuple(patterns), allow_list)

    def applies(self, args: Mapping[str, Any]) -> bool:
        if "command" not in args:
            return False
        line = args["command"]
        if not isinstance(line, str):
            return True
        try:
            found = invocations(line)
        except ShellSyntaxError:
            return True
        if self.allow_list:
            return any(not any(p.matches(call) is True for p in self.patterns)
                       for call in found)
        return any(p.matches(call) is not False for call in found for p in self.patterns)


@dataclass(frozen=True, slots=True)
class PathMatch:
    """``path_under`` (some path is inside a directory) or ``path_outside`` (some path is
    outside all of them). Directories are absolute, ``~/...`` or ``{cwd}/...``."""

    directories: tuple[str, ...]
    outside: bool

    @classmethod
    def parse(cls, declared: object, *, outside: bool) -> PathMatch:
        key = "path_outside" if outside else "path_under"
        entries = [declared] if isinstance(declared, str) else declared
        if not isinstance(entries, list) or not entries:
            raise HookBuildError(f"'{key}' must be a directory or a list of them")
        for entry in entries:
            if not isinstance(entry, str) or not entry.startswith(("/", "~", _CWD)) or (
                    entry.startswith("~") and not entry.startswith(("~/",)) and entry != "~"):
                raise HookBuildError(f"'{key}': {entry!r} must start with '/', '~/' or "
                                     f"'{_CWD}'")
        return cls(tuple(entries), outside)

    def applies(self, args: Mapping[str, Any], facts: PathFacts) -> bool:
        paths = call_paths(args, facts)
        if not paths:
            return False
        dirs = [self._directory(d, facts) for d in self.directories]
        if None in dirs or None in paths:
            return True
        known = [d for d in dirs if d is not None]
        for path in paths:
            assert path is not None
            inside = any(is_under(path, d) for d in known)
            if inside != self.outside:
                return True
        return False

    @staticmethod
    def _directory(declared: str, facts: PathFacts) -> str | None:
        if declared.startswith(_CWD):
            if facts.cwd is None:
                return None
            declared = facts.cwd + declared[len(_CWD):]
        return resolve(declared, facts)


def call_paths(args: Mapping[str, Any], facts: PathFacts) -> list[str | None]:
    """The resolved paths a call names (None for one that cannot be resolved)."""
    found: list[str | None] = []
    for key in PATH_ARGUMENTS:
        if key in args:
            found.append(resolve(args[key], facts))
    if "command" in args:
        line = args["command"]
        try:
            calls = invocations(line) if isinstance(line, str) else None
        except ShellSyntaxError:
            calls = None
        if calls is None:
            return [*found, None]
        found.extend(_command_paths(calls, facts))
    return found


def _command_paths(calls: list[Invocation], facts: PathFacts) -> list[str | None]:
    # Every `cd` adds a directory relative words may be resolved against (subshells and
    # `&&` make the one in force unknowable), so each relative word is tried against all.
    cwds: list[str | None] = [facts.cwd]
    found: list[str | None] = []
    for call in calls:
        words = [_path_word(w) for w in call.targets]
        resolved: list[str | None] = []
        for word in words:
            if word is None:
                continue
            if not word.known:
                resolved.append(None)
                continue
            resolved.extend(resolve(word.text, PathFacts(cwd, facts.home), tilde=word.tilde)
                            for cwd in cwds)
        found.extend(resolved)
        if call.name in (None, "cd", "pushd", "popd"):
            cwds.extend(resolved or [None if call.args else facts.home])
    return found


def _path_word(word: Word) -> Word | None:
    if not word.known or not word.text.startswith("-"):
        return word
    name, eq, value = word.text.partition("=")
    if eq and name.startswith("--") and value:
        return Word(value, tilde=value.startswith("~"))
    return None
