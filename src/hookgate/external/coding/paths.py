"""Where a path a Claude Code call names really points, resolved lexically: ``~`` expanded,
relative paths joined to the hook input's ``cwd``, ``.`` and ``..`` collapsed.

No file system is read (hookgate is not on the developer's machine), so symlinks are not
followed; a path that cannot be resolved (no ``cwd``, an unknown home, NUL, a lone
surrogate) resolves to None and the rule that asked fails closed.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

__all__ = ["PathFacts", "is_under", "resolve"]

_HOME_MARK = "/.claude/projects/"


@dataclass(frozen=True, slots=True)
class PathFacts:
    """What relative and ``~`` paths of one call resolve against."""

    cwd: str | None
    home: str | None

    @classmethod
    def of(cls, cwd: object, transcript_path: object) -> PathFacts:
        # Claude Code keeps transcripts under ~/.claude/projects/: that names the home.
        home = None
        if isinstance(transcript_path, str) and _HOME_MARK in transcript_path:
            home = transcript_path.split(_HOME_MARK, 1)[0] or None
        return cls(resolve(cwd, PathFacts(None, None)) if isinstance(cwd, str) else None,
                   resolve(home, PathFacts(None, None)) if home else None)


def resolve(path: object, facts: PathFacts, *, tilde: bool = True) -> str | None:
    """``path`` as an absolute, normalised path, or None when that cannot be known."""
    if not isinstance(path, str) or not path or "\0" in path:
        return None
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return None
    if tilde and path.startswith("~"):
        head, sep, tail = path.partition("/")
        if head != "~" or facts.home is None:
            return None  # ~user, or no known home
        path = facts.home + sep + tail
    if not path.startswith("/"):
        if facts.cwd is None:
            return None
        path = facts.cwd + "/" + path
    resolved = posixpath.normpath(path)
    return "/" + resolved.lstrip("/")


def is_under(path: str, directory: str) -> bool:
    """Whether ``path`` is ``directory`` or inside it (both resolved)."""
    return directory == "/" or path == directory or path.startswith(directory + "/")
