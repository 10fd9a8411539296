"""``hookgate secrets``: the key that encrypts channel configs at rest (HOOKGATE_SECRETS_KEY).

Rotation: generate a new key, set ``HOOKGATE_SECRETS_KEY=<new>,<old>`` everywhere, restart
the servers, run ``hookgate secrets rotate``, then drop ``<old>`` from the list.
"""

from __future__ import annotations

import asyncio

import typer

from hookgate.cli.app import app, console, fail
from hookgate.cli.config_source import ConfigOption, ExampleOption
from hookgate.cli.db_cmd import DatabaseOption, database_url

secrets_app = typer.Typer(
    help="The key that encrypts channel secrets at rest (HOOKGATE_SECRETS_KEY).",
    no_args_is_help=True,
)
app.add_typer(secrets_app, name="secrets")


@secrets_app.command("generate-key")
def generate_key() -> None:
    """Print a new key (and nothing else), e.g. export HOOKGATE_SECRETS_KEY=$(hookgate
    secrets generate-key)."""
    from hookgate.runtime.channel_records import SecretsKey

    print(SecretsKey.generate())


@secrets_app.command("rotate")
def rotate(config: ConfigOption = None, example: ExampleOption = None,
           database: DatabaseOption = None) -> None:
    """Re-encrypt every stored channel config with the first key of HOOKGATE_SECRETS_KEY.

    Each config must decrypt with one of the listed keys; if one does not, nothing is
    changed and the channel is named.
    """
    from hookgate.runtime.channel_records import (
        ChannelSecretsUnreadable,
        SecretsKey,
        SecretsKeyError,
        rotate_channel_secrets,
    )
    from hookgate.storage.database import Database
    from hookgate.storage.failures import DATABASE_FAILURES

    url = database_url(config, example, database)
    try:
        key = SecretsKey.from_environment()
    except SecretsKeyError as exc:
        fail(str(exc))

    async def run() -> tuple[int, int]:
        from hookgate.storage.oidc_sessions import reseal_refresh_tokens

        db = Database(url)
        try:
            channels = await rotate_channel_secrets(db, key)
            # The sign-in sessions' refresh tokens are sealed with the same keys.
            sessions = await reseal_refresh_tokens(db, lambda sealed: key.reseal(
                sealed, channel_id="oidc-session"))
            return channels, sessions
        finally:
            await db.dispose()

    try:
        count, sessions = asyncio.run(run())
    except ChannelSecretsUnreadable as exc:
        fail(f"{exc}; nothing was changed")
    except DATABASE_FAILURES as exc:
        fail(f"cannot re-encrypt the channels table of {url.split('://')[0]}: "
             f"{type(exc).__name__}: {exc} (is the database migrated? 'hookgate db upgrade')")
    console.print(f"re-encrypted {count} channel config(s) with the first of {key.count} key(s)")
    if sessions:
        console.print(f"re-encrypted {sessions} sign-in session refresh token(s)")
