"""The reload stamp: the version of the policy set a person declared complete.

``hookgate policy reload`` validates the files and writes their version (a digest of every
file's name and text) beside them, atomically, in ``<path>.version``. A running process
takes a changed set only when the files it reads have exactly the stamped version, so a
file caught mid-write (whose digest is no version anyone stamped) is never loaded.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

from hookgate.policies.errors import PolicyLoadError

_VERSION = re.compile(r"cedar-[0-9a-f]{12}")


def stamp_path(path: Path) -> Path:
    """``policies`` → ``policies.version``; ``pay.cedar`` → ``pay.cedar.version``."""
    return path.with_name(path.name + ".version")


def read_stamp(path: Path) -> str | None:
    """The stamped version, None without a stamp; a stamp that is not one version (a
    partial write, an edit by hand) reads as no version anyone stamped: ``"unreadable"``."""
    try:
        text = stamp_path(path).read_text(encoding="ascii", errors="replace").strip()
    except FileNotFoundError:
        return None
    except OSError:
        return "unreadable"
    return text if _VERSION.fullmatch(text) else "unreadable"


def write_stamp(path: Path, version: str) -> Path:
    """Stamp ``version`` for ``path`` by an atomic rename (a reader sees the old or the new)."""
    if not _VERSION.fullmatch(version):
        raise PolicyLoadError([f"{version!r} is not a policy set version"])
    return write_atomically(stamp_path(path), version + "\n", prefix=".stamp-")


def write_atomically(target: Path, text: str, *, prefix: str) -> Path:
    """Write ``text`` to ``target`` by a flushed temporary file and a rename, so a reader
    sees the old file or the new one whole (the policy set's stamp, the modes' stamp);
    PolicyLoadError naming ``target`` when it cannot be written."""
    fd, tmp = tempfile.mkstemp(prefix=prefix, dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise PolicyLoadError([f"{target}: cannot be written: {exc.strerror or exc}"]) from exc
    return target
