"""Where policies come from: one ``.cedar`` file or a folder of them, read as text, with a
cheap fingerprint (names, sizes, modification times) that says when they changed."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from hookgate.policies.errors import PolicyLoadError

SUFFIX = ".cedar"


@dataclass(frozen=True, slots=True)
class PolicyFile:
    """One file's text, named as its errors name it (from the folder given, inclusive)."""

    name: str
    text: str

    def policy_lines(self) -> list[int]:
        """The 1-based line on which each policy of the file starts, in order.

        Policies end with ``;``, which appears nowhere else outside comments and strings,
        so finding the starts needs only those two skipped (the engine parses the text).
        """
        text, starts, i, n = self.text, [], 0, len(self.text)
        pending = True
        while i < n:
            c = text[i]
            if c == "/" and text.startswith("//", i):
                end = text.find("\n", i)
                i = n if end < 0 else end
                continue
            if c.isspace():
                i += 1
                continue
            if pending:
                starts.append(text.count("\n", 0, i) + 1)
                pending = False
            if c == '"':
                i += 1
                while i < n and text[i] != '"':
                    i += 2 if text[i] == "\\" else 1
            elif c == ";":
                pending = True
            i += 1
        return starts


def policy_files(path: Path) -> list[Path]:
    """The file itself, or the folder's ``*.cedar`` files (any depth), in name order."""
    if path.is_dir():
        return sorted(p for p in path.rglob(f"*{SUFFIX}") if p.is_file())
    return [path]


def fingerprint(path: Path) -> str:
    """Changes whenever a policy file is added, removed, renamed or written."""
    parts: list[str] = []
    try:
        if not path.is_dir():
            st = path.stat()
            return f"{st.st_size}\0{st.st_mtime_ns}"
        for folder, dirs, names in os.walk(path):
            dirs.sort()
            for name in sorted(names):
                if name.endswith(SUFFIX):
                    st = os.stat(os.path.join(folder, name))
                    parts.append(f"{folder}/{name}\0{st.st_size}\0{st.st_mtime_ns}")
    except OSError as exc:
        return f"unreadable:{exc}"
    return "\n".join(parts)


def read_policy_files(path: Path) -> list[PolicyFile]:
    """Every policy file's text; PolicyLoadError when none can be found or read."""
    if not path.exists():
        raise PolicyLoadError([f"{path}: no such policy file or folder"])
    files = policy_files(path)
    if not files:
        raise PolicyLoadError([f"{path}: the folder holds no {SUFFIX} files"])
    out = []
    base = path.parent
    for file in files:
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise PolicyLoadError([f"{file}: cannot be read: {exc}"]) from exc
        out.append(PolicyFile(os.path.relpath(file, base), text))
    return out


def version_of(files: list[PolicyFile]) -> str:
    """The policy set's version: a digest of every file's name and text."""
    digest = hashlib.sha256()
    for f in files:
        digest.update(f.name.encode() + b"\0" + f.text.encode() + b"\0")
    return "cedar-" + digest.hexdigest()[:12]
