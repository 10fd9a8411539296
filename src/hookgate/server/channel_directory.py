"""The configured chat channels of a server, as the approval gate and callbacks see them."""

from __future__ import annotations

from hookgate.channels.base import Channel
from hookgate.server.deployment import ChannelSpec
from hookgate.storage.database import Database


class ConfiguredChannels:
    """Channels by id, in configuration order; disabled ones are not handed out."""

    def __init__(self, specs: list[ChannelSpec]) -> None:
        self.specs = {s.id: s for s in specs}
        self._order = [s.id for s in specs]
        self._channels: dict[str, Channel] = {}
        for spec in specs:
            self._channels[spec.id] = _create(spec)

    def get(self, channel_id: str) -> Channel | None:
        spec = self.specs.get(channel_id)
        if spec is None or not spec.enabled:
            return None
        return self._channels.get(channel_id)

    def first_active(self, org_id: str | None) -> Channel | None:
        for cid in self._order:
            spec = self.specs[cid]
            if spec.enabled and spec.org == org_id:
                return self._channels.get(cid)
        return None

    async def sync(self, db: Database) -> None:
        """Record the channels in the database (secrets encrypted at rest)."""
        if not self.specs:
            return
        from hookgate.server.channel_records import store_channels

        await store_channels(db, list(self.specs.values()))

    async def aclose(self) -> None:
        for ch in self._channels.values():
            await ch.aclose()


def _create(spec: ChannelSpec) -> Channel:
    from hookgate.channels.registry import create_channel

    return create_channel(spec.id, spec.type, spec.org, spec.config)
