"""What every CLI command that runs agents gives them, as the server does: the
configuration's database (migrated, its orgs written) behind the hooks that keep records.

`hookgate run`, `eval` and `workflow run` all take their services from here, so an agent
that builds under one command builds under the others.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from hookgate.cli.config_source import show_database

if TYPE_CHECKING:
    from hookgate.config import HookgateConfig
    from hookgate.hooks.services import HookServices


@asynccontextmanager
async def agent_services(cfg: HookgateConfig) -> AsyncIterator[HookServices]:
    """Open the configuration's database for the hooks; closed again on the way out.

    There is no approval service: a call that needs a person is blocked (fail closed).
    """
    # Imported here so that a command's --help does not load the storage layer.
    from hookgate.hooks.services import HookServices
    from hookgate.storage.database import Database
    from hookgate.storage.orgs import sync_orgs

    show_database(cfg.database)
    db = Database(cfg.database)
    try:
        await db.upgrade()
        await sync_orgs(db, [(o.id, o.name or o.id, o.read_only) for o in cfg.orgs])
        yield HookServices(database=db)
    finally:
        await db.dispose()
