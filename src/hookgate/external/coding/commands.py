"""The programs a Bash command line runs, normalised, and the ``command`` patterns of gate
rules that match them.

Each simple command is unwrapped (``sudo``, ``env X=1``, ``command``, ``exec``, ``nohup``,
``timeout``, ``xargs``, ``find -exec``, ``bash -c '...'``, ``eval``) down to the program it
runs; its name is the basename (``/usr/bin/git`` is ``git``), git's global options
(``-C dir``, ``-c k=v``, ``--git-dir``) are skipped, and options are normalised (``-fr``,
``-r -f`` and ``--recursive --force`` are the same ``-f -r`` for ``rm``).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from hookgate.external.coding.shell import ShellSyntaxError, SimpleCommand, Word, parse

__all__ = ["CommandPattern", "Invocation", "invocations"]

_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish", "busybox"})
_SHELL_VALUED = frozenset({"-o", "+o", "-O", "+O", "--rcfile", "--init-file"})
_KEYWORDS = frozenset({"!", "{", "}", "if", "then", "else", "elif", "fi", "do", "done",
                       "while", "until", "time", "coproc"})
#: Wrappers that run the rest of their words as a command, with options taking a value.
_WRAPPERS: dict[str, frozenset[str]] = {
    "sudo": frozenset({"-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-U", "-T",
                       "--user", "--group", "--host", "--prompt", "--chdir", "--role",
                       "--type", "--other-user", "--command-timeout", "--close-from"}),
    "doas": frozenset({"-u", "-C"}),
    "env": frozenset({"-u", "--unset", "-C", "--chdir", "-P"}),
    "command": frozenset(), "builtin": frozenset(), "exec": frozenset({"-a"}),
    "nohup": frozenset(), "setsid": frozenset(), "unbuffer": frozenset(),
    "nice": frozenset({"-n", "--adjustment"}),
    "ionice": frozenset({"-c", "-n", "-p", "-P", "-u", "--class", "--classdata"}),
    "stdbuf": frozenset({"-i", "-o", "-e", "--input", "--output", "--error"}),
    "time": frozenset({"-f", "-o", "--format", "--output"}),
    "xargs": frozenset({"-I", "-i", "-n", "-P", "-d", "-E", "-e", "-L", "-l", "-s", "-a",
                        "--arg-file", "--delimiter", "--max-args", "--max-procs",
                        "--max-lines", "--max-chars", "--replace", "--eof"}),
    "watch": frozenset({"-n", "--interval", "-d", "--differences"}),
    "strace": frozenset({"-e", "-o", "-p", "-s", "-u"}),
}
#: Wrappers whose first positional word is theirs, not the command's.
_FIRST_IS_OWN = {"timeout": frozenset({"-s", "--signal", "-k", "--kill-after"}),
                 "flock": frozenset({"-w", "--timeout", "-E", "--conflict-exit-code"}),
                 "chrt": frozenset()}
_GIT_VALUED = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace",
                         "--config-env", "--super-prefix", "--exec-path", "--attr-source"})
#: Long and alternative options of common commands, as the short option they mean.
_ALIASES: dict[str, dict[str, str]] = {
    "rm": {"--recursive": "-r", "-R": "-r", "--force": "-f", "--dir": "-d"},
    "cp": {"--recursive": "-r", "-R": "-r", "--force": "-f", "-a": "-r", "--archive": "-r"},
    "mv": {"--force": "-f"},
    "chmod": {"--recursive": "-R"}, "chown": {"--recursive": "-R"},
    "chgrp": {"--recursive": "-R"},
    "git push": {"--force": "-f", "--delete": "-d", "--mirror": "-f"},
    "git clean": {"--force": "-f"},
    "git branch": {"--delete": "-d", "-D": "-d", "--force": "-f"},
    "git checkout": {"--force": "-f"},
}


@dataclass(frozen=True, slots=True)
class Invocation:
    """One program a command line runs: its name (None when it is not known before the
    command runs, e.g. ``$CMD``) and its words after the name."""

    name: str | None
    args: tuple[Word, ...]
    #: Words that are file names to it: arguments and redirection targets.
    targets: tuple[Word, ...] = ()

    @property
    def certain(self) -> bool:
        return self.name is not None and all(w.known for w in self.args)


def invocations(line: str) -> list[Invocation]:
    """Every program ``line`` runs; ShellSyntaxError when that cannot be known."""
    found: list[Invocation] = []
    for command in parse(line):
        found.extend(_unwrap(command, list(command.words), 0))
    return found


def _unwrap(command: SimpleCommand, words: list[Word], depth: int) -> list[Invocation]:
    if depth > 16:
        raise ShellSyntaxError("commands are wrapped too deeply")
    while words and ((words[0].known and words[0].text in _KEYWORDS)
                     or _is_assignment(words[0])):
        words = words[1:]
    if not words:
        return []
    head = words[0]
    if head.known and head.text in ("for", "select", "function"):
        return []  # `for x in ...`: its words are data; its body is separate commands
    targets = tuple(command.targets)
    if not head.known or head.glob:
        return [Invocation(None, tuple(words[1:]), targets + tuple(words[1:]))]
    name = posixpath.basename(head.text.rstrip("/")) or head.text
    rest = words[1:]
    if name in _WRAPPERS or name in _FIRST_IS_OWN:
        inner = _after_wrapper(name, rest)
        if inner is None:
            return [Invocation(name, tuple(rest), targets + tuple(rest))]
        if name == "xargs" and not inner:
            inner = [Word("echo")]
        return _unwrap(command, inner, depth + 1)
    if name == "eval":
        return _script(_joined(rest, "eval"), depth)
    if name in _SHELLS:
        script = _shell_script(command, rest)
        if script is not None:
            return _script(script, depth)
    if name == "find":
        return [Invocation(name, tuple(rest), targets + tuple(rest)),
                *_find_exec(command, rest, depth)]
    if name == "git":
        rest = _skip_options(rest, _GIT_VALUED)
    return [Invocation(name, tuple(rest), targets + tuple(rest))]


def _script(text: str, depth: int) -> list[Invocation]:
    found: list[Invocation] = []
    for command in parse(text):
        found.extend(_unwrap(command, list(command.words), depth + 1))
    return found


def _joined(words: list[Word], what: str) -> str:
    if not all(w.known for w in words):
        raise ShellSyntaxError(f"{what} runs words that are only known when it runs")
    return " ".join(w.text for w in words)


def _shell_script(command: SimpleCommand, rest: list[Word]) -> str | None:
    """The script a shell runs: its -c argument, its here-document, or None for a file."""
    skip = False
    for index, word in enumerate(rest):
        if not word.known:
            raise ShellSyntaxError("a shell is given words that are only known when it runs")
        text = word.text
        if skip:
            skip = False
            continue
        if text == "--" or not text.startswith(("-", "+")):
            return None if text != "--" or index + 1 < len(rest) else _fed(command)
        if text in _SHELL_VALUED:
            skip = True
            continue
        if not text.startswith("--") and "c" in text[1:]:
            script = next((w for w in rest[index + 1:] if not w.text.startswith("-")), None)
            if script is None:
                raise ShellSyntaxError("a shell's -c has no command")
            return _joined([script], "a shell's -c")
    return _fed(command)


def _fed(command: SimpleCommand) -> str:
    if command.fed is None or command.piped:
        raise ShellSyntaxError("a shell reads its commands from a pipe or a file")
    return command.fed


def _find_exec(command: SimpleCommand, rest: list[Word], depth: int) -> list[Invocation]:
    found: list[Invocation] = []
    for index, word in enumerate(rest):
        if word.text in ("-exec", "-execdir", "-ok", "-okdir"):
            body: list[Word] = []
            for w in rest[index + 1:]:
                if w.text in (";", "+"):
                    break
                body.append(w)
            found.extend(_unwrap(command, body, depth + 1))
    return found


def _after_wrapper(name: str, rest: list[Word]) -> list[Word] | None:
    """The command a wrapper runs (None when it runs none, e.g. ``command -v git``)."""
    valued = _WRAPPERS.get(name) or _FIRST_IS_OWN.get(name) or frozenset()
    index = 0
    while index < len(rest):
        word = rest[index]
        text = word.text
        if not word.known:
            return rest[index:]  # unknown: treated as the command (its name is unknown)
        if name == "command" and text in ("-v", "-V"):
            return None
        if name == "env" and (_is_assignment(word) or text in ("-i", "-0", "--ignore-environment")):
            index += 1
            continue
        if name == "env" and text.startswith(("-S", "--split-string")):
            split = text[2:] if text.startswith("-S") else text.partition("=")[2]
            if not split and index + 1 < len(rest):
                split = _joined([rest[index + 1]], "env -S")
                index += 1
            return [*_words(split), *rest[index + 1:]]
        if text == "--":
            index += 1
            break
        if text.startswith("-") and len(text) > 1:
            index += 2 if text in valued else 1
            continue
        break
    rest = rest[index:]
    if name in _FIRST_IS_OWN:
        rest = rest[1:]
    return rest or None if name != "xargs" else rest


def _words(text: str) -> list[Word]:
    [command] = parse(text) or [SimpleCommand()]
    return command.words


def _skip_options(words: list[Word], valued: frozenset[str]) -> list[Word]:
    index = 0
    while index < len(words) and words[index].known and words[index].text.startswith("-"):
        text = words[index].text
        index += 2 if text in valued else 1
        if text == "--":
            break
    return words[index:]


def _is_assignment(word: Word) -> bool:
    name, eq, _ = word.text.partition("=")
    return bool(eq) and name.isidentifier()


@dataclass(frozen=True, slots=True)
class CommandPattern:
    """A declared ``command: [git, push]``: the program, the leading positional words it
    must have (``push``) and the options it must carry (``-rf`` = ``-r`` and ``-f``)."""

    source: tuple[str, ...]
    name: str
    positional: tuple[str, ...]
    options: frozenset[str]

    @classmethod
    def of(cls, words: tuple[str, ...]) -> CommandPattern:
        unwrapped = _unwrap(SimpleCommand(), [Word(w) for w in words], 0)
        name = unwrapped[0].name if len(unwrapped) == 1 else None
        if name is None:
            raise ValueError(f"{list(words)} names no one command")
        options, positional = _shape(name, unwrapped[0].args)
        return cls(words, name, tuple(w.text for w in positional), options)

    def matches(self, call: Invocation) -> bool | None:
        """True or False, or None when it cannot be known (an unknown word)."""
        if call.name is None:
            return None
        if call.name != self.name:
            return False
        options, positional = _shape(call.name, call.args)
        exact = (self.options <= options and tuple(
            w.text for w in positional[:len(self.positional)]) == self.positional)
        return True if exact else (None if not call.certain else False)


def _shape(name: str, args: tuple[Word, ...]) -> tuple[frozenset[str], list[Word]]:
    options: set[str] = set()
    positional: list[Word] = []
    ended = False
    for word in args:
        text = word.text
        if ended or not word.known or not text.startswith("-") or text == "-":
            positional.append(word)
            continue
        if text == "--":
            ended = True
            continue
        if text.startswith("--"):
            options.add(text.partition("=")[0])
        else:
            options.update(f"-{c}" for c in text[1:])
    aliases = {**_ALIASES.get(name, {})}
    if positional and positional[0].known:
        aliases.update(_ALIASES.get(f"{name} {positional[0].text}", {}))
    return frozenset(aliases.get(o, o) for o in options), positional
