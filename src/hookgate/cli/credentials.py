"""The CLI's sign-in sessions, one per server, in a file only its user can read:
``$XDG_CONFIG_HOME/hookgate/credentials.json`` (``~/.config/...`` by default), mode 0600."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


class CredentialsError(OSError):
    """The credentials file cannot be read or written safely."""


def credentials_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "hookgate" / "credentials.json"


def _read(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {"servers": {}}
    mode = path.stat().st_mode & 0o777
    if mode & 0o077:
        raise CredentialsError(f"{path} can be read by others (mode {mode:o}): remove it and "
                               "run `hookgate login` again")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CredentialsError(f"{path} is not readable JSON: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("servers"), dict):
        raise CredentialsError(f"{path} is not a hookgate credentials file")
    return data


def _write(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    temp = path.with_suffix(".tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, json.dumps(data, indent=2, sort_keys=True).encode("utf-8"))
    finally:
        os.close(fd)
    os.replace(temp, path)


def saved_session(server: str) -> str | None:
    """The session the CLI signed in to ``server`` with, if any."""
    entry = _read(credentials_path())["servers"].get(server)
    session = entry.get("session") if isinstance(entry, dict) else None
    return session if isinstance(session, str) and session else None


def save_session(server: str, session: str, user_id: str, org_id: str) -> Path:
    path = credentials_path()
    data = _read(path)
    data["servers"][server] = {"session": session, "user_id": user_id, "org_id": org_id}
    _write(path, data)
    return path


def forget_session(server: str) -> bool:
    """Remove ``server``'s session from the file; False when there was none."""
    path = credentials_path()
    data = _read(path)
    if data["servers"].pop(server, None) is None:
        return False
    _write(path, data)
    return True
