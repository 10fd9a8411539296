"""Channels without the gate: the ``channel_notify`` tool and the run-completion summary.

``channel_notify`` is a Tool like any other, so every call passes the agent's hooks. An
agent lists it by name; outside a server it is the unbound placeholder below, and a server
swaps in one that posts through its configured channels.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from hookgate.channels.base import Channel, ChannelError
from hookgate.tools.tool import Tool, tool

CHANNEL_NOTIFY = "channel_notify"
#: Longer texts are cut: a chat message is not a document (WeCom takes about 2 KB).
MAX_NOTIFY_CHARS = 2000
MAX_ANSWER_CHARS = 1000
CUT_MARKER = " …[cut]"

ChannelFinder = Callable[[], Channel | None]


class NoChannel(ChannelError):
    """channel_notify has no channel to post to."""


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - len(CUT_MARKER)] + CUT_MARKER


def channel_notify_tool(find_channel: ChannelFinder, *, unavailable: str) -> Tool:
    """A ``channel_notify`` tool posting to the channel ``find_channel`` returns at call time;
    ``unavailable`` is the error when it returns None."""

    async def channel_notify(text: str) -> str:
        """Post a short message to the team's chat channel (Feishu/Lark, Slack or WeCom)."""
        if not text.strip():
            raise ValueError("text is empty; say what the team should know")
        channel = find_channel()
        if channel is None:
            raise NoChannel(unavailable)
        await channel.notify(_cut(text, MAX_NOTIFY_CHARS))
        return f"posted to channel '{channel.id}'"

    return tool(name=CHANNEL_NOTIFY, connector="channel")(channel_notify)


#: What an agent gets for ``channel_notify`` when no server binds it (``hookgate run``).
UNBOUND_CHANNEL_NOTIFY = channel_notify_tool(
    lambda: None,
    unavailable="channel_notify posts through the channels of a hookgate server "
                "('hookgate serve'); this run has none",
)


def is_unbound(candidate: Tool) -> bool:
    """Whether ``candidate`` is the placeholder a server replaces."""
    return candidate is UNBOUND_CHANNEL_NOTIFY


def completion_summary(
    *,
    agent_name: str,
    agent_id: str,
    status: str,
    seconds: float | None,
    tools_used: Sequence[tuple[str, int]],
    answer: str | None,
    error: str | None,
    run_id: str,
    run_url: str | None,
) -> str:
    """The message posted when a run ends: agent, outcome, duration, tools, answer, link."""
    lines = [f"Run {status.replace('_', ' ')}: {agent_name} ({agent_id})"]
    if seconds is not None:
        lines.append(f"Duration: {_duration(seconds)}")
    used = ", ".join(f"{name} ×{count}" for name, count in tools_used)
    lines.append(f"Tools used: {used or 'none'}")
    if answer:
        lines.append(f"Answer: {_cut(answer, MAX_ANSWER_CHARS)}")
    if error:
        lines.append(f"Error: {_cut(error, MAX_ANSWER_CHARS)}")
    lines.append(f"Run: {run_url or run_id}")
    return "\n".join(lines)


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"
