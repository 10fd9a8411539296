"""Channel secrets at rest: encrypted with HOOKGATE_SECRETS_KEY, rotatable, never plain.

A server with channels and no key does not start; ``hookgate secrets rotate`` re-encrypts
the stored configs under the first key of the list, all or nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from sqlalchemy import select

from hookgate.runtime.channel_records import (
    SECRETS_KEY_ENV,
    ChannelSecretsUnreadable,
    SecretsKey,
    SecretsKeyError,
    load_channels,
)
from hookgate.runtime.deployment import ChannelSpec
from hookgate.runtime.runtime import Runtime
from hookgate.storage.database import Database
from hookgate.storage.tables import ChannelRow
from tests.channels.cli import hookgate
from tests.channels.world import world
from tests.live_server import live_server

SECRETS = {"app_id": "cli_secret_app", "app_secret": "app-secret-do-not-store",
           "chat_id": "oc_1", "verification_token": "vtok-do-not-store",
           "encrypt_key": "ekey-do-not-store", "base_url": "http://127.0.0.1:9"}
PLAIN = [b"app-secret-do-not-store", b"vtok-do-not-store", b"ekey-do-not-store"]


def feishu_spec() -> ChannelSpec:
    return ChannelSpec("ops-feishu", "feishu", "acme", dict(SECRETS))


def serve_once(database_url: str) -> None:
    """Start a server with the Feishu channel (which stores it), then stop it."""
    deployment, _ = world(database_url, [feishu_spec()])
    with live_server(deployment):
        pass


def database_files(folder: Path) -> bytes:
    """Every byte of the SQLite database (main file, WAL and shared memory)."""
    return b"".join(p.read_bytes() for p in folder.glob("hookgate.db*"))


async def stored(database_url: str) -> list[ChannelRow]:
    db = Database(database_url)
    try:
        async with db.session() as s:
            return list((await s.execute(select(ChannelRow))).scalars())
    finally:
        await db.dispose()


async def decrypted(database_url: str, *keys: str) -> list[ChannelSpec]:
    db = Database(database_url)
    try:
        return await load_channels(db, SecretsKey(list(keys)))
    finally:
        await db.dispose()


@pytest.mark.both_databases
async def test_a_channels_secrets_are_stored_encrypted_and_decrypt_with_the_key(
        database_url: str, secrets_key: str, tmp_path: Path) -> None:
    serve_once(database_url)

    [row] = await stored(database_url)
    assert (row.id, row.type, row.org_id, row.enabled) == ("ops-feishu", "feishu", "acme", True)
    for secret in PLAIN:
        assert secret.decode() not in row.config_encrypted
    if database_url.startswith("sqlite"):  # not in any page of the file either
        raw = database_files(tmp_path)
        assert not [s for s in PLAIN if s in raw]

    [channel] = await decrypted(database_url, secrets_key)
    assert channel.config == SECRETS
    with pytest.raises(ChannelSecretsUnreadable, match="'ops-feishu'"):
        await decrypted(database_url, SecretsKey.generate())


async def test_rotation_re_encrypts_under_the_new_key_so_the_old_one_can_go(
        database_url: str, secrets_key: str) -> None:
    serve_once(database_url)
    old, new = secrets_key, SecretsKey.generate()

    done = hookgate("secrets", "rotate", "--database", database_url,
                    env={SECRETS_KEY_ENV: f"{new},{old}"})

    assert done.returncode == 0, done.stderr
    assert "re-encrypted 1 channel config(s) with the first of 2 key(s)" in done.stdout
    assert (await decrypted(database_url, new))[0].config == SECRETS
    with pytest.raises(ChannelSecretsUnreadable):
        await decrypted(database_url, old)


async def test_rotation_with_keys_that_cannot_read_a_row_changes_nothing(
        database_url: str, secrets_key: str) -> None:
    serve_once(database_url)
    before = [row.config_encrypted for row in await stored(database_url)]

    done = hookgate("secrets", "rotate", "--database", database_url,
                    env={SECRETS_KEY_ENV: SecretsKey.generate()})

    assert done.returncode == 1
    assert "channel 'ops-feishu': its stored config cannot be decrypted" in done.stderr
    assert "nothing was changed" in done.stderr
    assert [row.config_encrypted for row in await stored(database_url)] == before


def test_generate_key_prints_one_usable_key_and_nothing_else() -> None:
    done = hookgate("secrets", "generate-key")

    assert done.returncode == 0, done.stderr
    Fernet(done.stdout.strip().encode())
    assert done.stdout.count("\n") == 1


def test_a_server_with_channels_and_no_secrets_key_refuses_to_start(
        database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SECRETS_KEY_ENV, raising=False)
    deployment, _ = world(database_url, [feishu_spec()])

    with pytest.raises(SecretsKeyError) as refused:
        Runtime(deployment)

    assert f"channels are configured but {SECRETS_KEY_ENV} is not set" in str(refused.value)
    assert "hookgate secrets generate-key" in str(refused.value)


def test_a_malformed_secrets_key_is_refused_without_being_echoed(
        database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    good = SecretsKey.generate()
    monkeypatch.setenv(SECRETS_KEY_ENV, f"{good}, almost-a-key-but-not-quite")
    deployment, _ = world(database_url, [feishu_spec()])

    with pytest.raises(SecretsKeyError) as refused:
        Runtime(deployment)

    assert "key 2 of 2 is not a Fernet key" in str(refused.value)
    assert "almost-a-key" not in str(refused.value)


def test_a_server_without_channels_needs_no_key(
        database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SECRETS_KEY_ENV, raising=False)
    deployment, _ = world(database_url, [])
    with live_server(deployment) as srv:
        assert srv.runtime.channels.secrets is None
