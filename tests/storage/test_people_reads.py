"""The one-statement reads of who is asking (a token's user at every request and moment of
use, one person's record at every ask) answer what the ORM reads of the same rows answer:
a revoked digest, a disabled user, an expired token are refused; the records match."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select

from hookgate.storage.database import Database
from hookgate.storage.orgs import sync_orgs
from hookgate.storage.people import people, read_people
from hookgate.storage.tables import RevokedToken, User
from hookgate.storage.types import utcnow
from hookgate.storage.users import token_digest, user_for_token

pytestmark = pytest.mark.both_databases

NOW = utcnow()
#: id -> (disabled, service, token expires in, revoked)
PEOPLE: dict[str, tuple[bool, bool, timedelta | None, bool]] = {
    "ann": (False, False, None, False),
    "bob": (True, False, None, False),           # disabled
    "cy": (False, False, timedelta(hours=-1), False),   # expired an hour ago
    "dee": (False, False, timedelta(days=1), False),    # expires tomorrow
    "eve": (False, False, None, True),           # revoked, the digest still on her row
    "svc": (False, True, None, False),           # a service identity
}


async def _seed(db: Database) -> None:
    await sync_orgs(db, [("acme", "Acme", False)])
    async with db.transaction() as s:
        for uid, (disabled, service, expires, revoked) in PEOPLE.items():
            s.add(User(id=uid, org_id="acme", name=uid.title(), admin=uid == "ann",
                       token_sha256=token_digest(f"tok-{uid}"), disabled=disabled,
                       service=service,
                       token_expires_at=None if expires is None else NOW + expires))
            if revoked:
                s.add(RevokedToken(token_sha256=token_digest(f"tok-{uid}"), user_id=uid))


async def test_a_token_signs_in_only_while_its_user_may(db: Database) -> None:
    await _seed(db)
    signed_in = {uid: await user_for_token(db, f"tok-{uid}") for uid in PEOPLE}
    assert {uid for uid, user in signed_in.items() if user is not None} == {"ann", "dee",
                                                                            "svc"}
    assert await user_for_token(db, "tok-nobody") is None
    assert await user_for_token(db, "") is None
    async with db.session() as s:
        rows = {u.id: u for u in (await s.execute(select(User))).scalars()}
    for uid in ("ann", "dee", "svc"):
        user, row = signed_in[uid], rows[uid]
        assert user is not None
        assert (user.id, user.org_id, user.admin, user.name, user.service) == (
            row.id, row.org_id, row.admin, row.name, row.service)
        assert user.token_expires_at == row.token_expires_at
    dee = signed_in["dee"]
    assert dee is not None and dee.token_expires_at is not None
    assert dee.token_expires_at.utcoffset() == timedelta(0)


async def test_one_persons_record_is_the_record_the_orm_reads(db: Database) -> None:
    await _seed(db)
    async with db.session() as s:
        everyone = await read_people(s, list(PEOPLE))
    for uid in PEOPLE:
        assert await people(db, [uid]) == {uid: everyone[uid]}
        assert await people(db, [uid, uid, ""]) == {uid: everyone[uid]}
    assert await people(db, ["nobody"]) == {}
    assert await people(db, ["ann", "svc"]) == {"ann": everyone["ann"], "svc": everyone["svc"]}
