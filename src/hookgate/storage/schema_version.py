"""Is the schema already at the bundled migrations' head? Answered without Alembic.

Importing Alembic costs about a tenth of a second, which every server start and CLI command
that opens a database would pay just to learn there is nothing to do. The revision graph is
read from the migration files' ``revision`` / ``down_revision`` assignments (with ``ast``,
nothing is imported); anything unusual (a merge, a computed value) answers "unknown", and
the caller runs Alembic, which stays the authority on what to apply.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine


@cache
def bundled_heads(versions: Path) -> frozenset[str] | None:
    """The head revisions of the migration files in ``versions``, or None when a file does
    not assign both names a plain string (or None, for the first's ``down_revision``)."""
    revisions: set[str] = set()
    parents: set[str] = set()
    for path in sorted(versions.glob("*.py")):
        found: dict[str, object] = {}
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if (isinstance(node, ast.Assign) and len(node.targets) == 1
                    and isinstance(node.targets[0], ast.Name)
                    and node.targets[0].id in ("revision", "down_revision")
                    and isinstance(node.value, ast.Constant)):
                found[node.targets[0].id] = node.value.value
        revision, parent = found.get("revision"), found.get("down_revision", ...)
        if not isinstance(revision, str) or not (parent is None or isinstance(parent, str)):
            return None
        revisions.add(revision)
        if parent is not None:
            parents.add(parent)
    heads = revisions - parents
    return frozenset(heads) if heads else None


@cache
def bundled_revisions(versions: Path) -> frozenset[str]:
    """Every revision the migration files in ``versions`` name (none that cannot be read)."""
    found: set[str] = set()
    for path in sorted(versions.glob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if (isinstance(node, ast.Assign) and len(node.targets) == 1
                    and isinstance(node.targets[0], ast.Name)
                    and node.targets[0].id == "revision"
                    and isinstance(node.value, ast.Constant)
                    and isinstance(node.value.value, str)):
                found.add(node.value.value)
    return frozenset(found)


async def at_head(engine: AsyncEngine, versions: Path) -> bool:
    """True when the database records exactly the bundled heads; False when it is behind,
    ahead, empty or cannot tell."""
    heads = bundled_heads(versions)
    if heads is None:
        return False
    try:
        async with engine.connect() as conn:
            rows = (await conn.execute(text("SELECT version_num FROM alembic_version"))).all()
    except SQLAlchemyError:  # no table yet: a new database
        return False
    return frozenset(r[0] for r in rows) == heads
