"""Where policies come from: one ``.cedar`` file or a folder of them, read as text, with a
cheap fingerprint (names, sizes, modification times) that says when they changed.

A file that is too large, not UTF-8, or one of too many is refused with an error naming it
(and the line of the first byte that is not UTF-8).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from hookgate.policies.errors import PolicyLoadError

SUFFIX = ".cedar"
#: The largest policy file read, in bytes: a policy set is code a person reviews.
MAX_FILE_BYTES = 1 << 20
#: The most policy files one set may hold.
MAX_FILES = 1000


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


def fingerprint(path: Path, *also: Path) -> str:
    """Changes whenever a policy file (or one of ``also``) is added, removed, renamed or
    written."""
    parts: list[str] = []
    for extra in also:
        try:
            st = extra.stat()
            parts.append(f"{extra}\0{st.st_size}\0{st.st_mtime_ns}")
        except OSError:
            parts.append(f"{extra}\0absent")
    try:
        if not path.is_dir():
            st = path.stat()
            parts.append(f"{st.st_size}\0{st.st_mtime_ns}")
            return "\n".join(parts)
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
    if len(files) > MAX_FILES:
        raise PolicyLoadError([f"{path}: holds {len(files)} {SUFFIX} files, more than the "
                               f"{MAX_FILES} one policy set may have; split it"])
    base = path.parent
    return [PolicyFile(os.path.relpath(file, base), _read_text(file)) for file in files]


def _read_text(file: Path) -> str:
    try:
        with file.open("rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise PolicyLoadError([f"{file}: cannot be read: {exc.strerror or exc}"]) from exc
    if len(data) > MAX_FILE_BYTES:
        raise PolicyLoadError([f"{file}: is larger than {MAX_FILE_BYTES} bytes, the most a "
                               "policy file may hold; split it into several files"])
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise PolicyLoadError([f"{file}:{line}: is not UTF-8 text (byte 0x{data[exc.start]:02x} "
                               f"at offset {exc.start}); save the file as UTF-8"]) from None


def version_of(files: list[PolicyFile]) -> str:
    """The policy set's version: a digest of every file's name and text."""
    digest = hashlib.sha256()
    for f in files:
        digest.update(f.name.encode() + b"\0" + f.text.encode() + b"\0")
    return "cedar-" + digest.hexdigest()[:12]
