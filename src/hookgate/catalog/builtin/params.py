"""What the database-backed built-in hooks check when they are built from a declaration:
known params only, and a database to keep their records in (else the build fails closed)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from hookgate.hooks.errors import HookBuildError
from hookgate.storage.database import Database


def reject_unknown_params(hook: str, params: Mapping[str, Any], known: Iterable[str]) -> None:
    allowed = tuple(known)
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        takes = f"takes {', '.join(allowed)}" if allowed else "takes no params"
        raise HookBuildError(f"unknown params {', '.join(map(repr, unknown))} ({hook} {takes})")


def require_database(hook: str, env: Any, keeps: str) -> Database:
    """The database in ``env.services``; HookBuildError when there is none."""
    services = getattr(env, "services", None)
    db = getattr(services, "database", None)
    if not isinstance(db, Database):
        raise HookBuildError(
            f"{hook} keeps {keeps} in the database, and none is configured here: build the "
            "registry with HookServices(database=Database(url)) (the server and `hookgate "
            "run` pass the configuration's database)")
    return db
