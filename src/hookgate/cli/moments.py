"""A moment given on the command line (``--since``, ``--until``): a duration back from now
(``30m``, ``1h``, ``2d``) or an ISO-8601 time, UTC unless it names a zone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hookgate.cli.app import fail
from hookgate.durations import seconds_of


def moment(option: str, value: str) -> datetime:
    """``value`` of ``option`` as an aware time; a one-line error (exit 2) otherwise."""
    try:
        return datetime.now(UTC) - timedelta(seconds=float(seconds_of(value)))
    except ValueError:
        pass
    try:
        at = datetime.fromisoformat(value)
    except ValueError:
        fail(f"{option} takes a duration such as 30m, 1h or 2d, or an ISO-8601 time, not "
             f"{value!r}", 2)
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at
