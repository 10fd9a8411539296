"""What every CLI command that runs agents gives them, as the server does: the
configuration's database (migrated, its orgs, users and agents written as `serve` writes
them) behind the hooks that keep records.

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
    from hookgate.runtime.declarations import write_declarations
    from hookgate.runtime.deployment import deployment_from_config
    from hookgate.storage.database import Database

    show_database(cfg.database)
    db = Database(cfg.database)
    try:
        await db.upgrade()
        # The declared orgs, users and agents, as `serve` writes them: the hooks that read
        # the callers' facts (cedar_policy) find the same principals on a new database.
        await write_declarations(db, deployment_from_config(cfg))
        yield HookServices(database=db)
    finally:
        await db.dispose()
