"""Service (agent) identities in the file: ``kind: service`` on a user entry (the ``users:``
shape otherwise unchanged) loads, reaches the database's user record, and every place where
a person must decide refuses one with a one-line error naming the key."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from hookgate.runtime.deployment import deployment_from_config
from hookgate.storage import people
from hookgate.storage.database import Database
from hookgate.storage.orgs import sync_orgs
from hookgate.storage.users import sync_declared_users
from tests.config.test_config import MINIMAL, load, load_error

WITH_BOT = MINIMAL.replace("users: [{id: alice, org: acme}]",
                           "users: [{id: alice, org: acme}, "
                           "{id: buyer-bot, org: acme, kind: service, token: t-bot}]")


def test_a_service_user_loads_and_people_stay_people(tmp_path: Path) -> None:
    config = load(tmp_path, WITH_BOT)
    kinds = {u.id: u.kind for u in config.users}
    assert kinds == {"alice": "person", "buyer-bot": "service"}


@pytest.mark.both_databases
def test_the_kind_reaches_the_user_record(tmp_path: Path, database_url: str) -> None:
    deployment = deployment_from_config(load(tmp_path, WITH_BOT))

    async def records() -> dict[str, bool]:
        db = Database(database_url)
        try:
            await sync_orgs(db, [(o.id, o.name, o.read_only) for o in deployment.orgs])
            await sync_declared_users(db, deployment.users)
            found = await people.people(db, ["alice", "buyer-bot"])
            return {k: v.service for k, v in found.items()}
        finally:
            await db.dispose()

    assert asyncio.run(records()) == {"alice": False, "buyer-bot": True}


@pytest.mark.parametrize(("text", "key", "said"), [
    (WITH_BOT.replace("kind: service", "kind: robot"), "users[1].kind", "'person' or 'service'"),
    (WITH_BOT.replace("kind: service", "kind: service, admin: true"), "users[1]",
     "cannot be an admin"),
    (WITH_BOT.replace("owner: alice", "owner: buyer-bot"), "agents[0].owner",
     "service identity"),
    (WITH_BOT.replace("owner: alice", "owner: alice\n    escalate_after: 10m\n"
                                       "    escalate_to: [buyer-bot]"),
     "agents[0].escalate_to[0]", "never decides"),
])
def test_a_service_where_a_person_must_decide_is_refused(tmp_path: Path, text: str, key: str,
                                                         said: str) -> None:
    error = load_error(tmp_path, text)
    assert error.key == key and said in error.problem, (error.key, error.problem)
    assert "\n" not in error.problem
