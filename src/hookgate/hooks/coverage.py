"""Which call an approval covers: the one comparison of an approval's `CallBinding` with a
call, made by every path (the gate, the persistent approvals, the guarded path's check
before the tool runs, the approvals of agents that run elsewhere), and the one exception.

An approval covers exactly its own call: same org, agent, run (an external agent's
session), call id, tool name (exact: no case folding, trimming or Unicode normalisation)
and argument digest, and, on a path whose calls run somewhere (Claude Code's working
directory), the same place (`Places`). The only exception is
`RetryReuse.IDENTICAL_CALL_AFTER_GIVE_UP`, which never crosses places.

A client whose calls carry no id (the hooks of GitHub Copilot CLI, Gemini CLI, Cursor's
shell and MCP layer) is given one that hookgate derives from the session, working folder,
tool, canonical arguments and occurrence (hookgate.coding_agents.call_ids): its identical
retry of a call still pending has the same id, so the plain comparison covers it and that
path passes no `RetryReuse`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from hookgate.hooks.approval import CallBinding

__all__ = ["Coverage", "Places", "RetryReuse", "coverage"]


class RetryReuse(enum.Enum):
    """The one case in which an approval covers a call with another call id.

    ``IDENTICAL_CALL_AFTER_GIVE_UP``: the approval's own call was answered that its wait ran
    out and told to make the identical call again (Claude Code in interactive mode, which
    has no ``defer`` and sends the retry under a new ``tool_use_id``); the retry is that
    call: same org, agent, session, tool and argument digest, asked from the same working
    directory as the call that gave up. Only a path whose client retries that way passes it,
    and only for a request whose call gave up there (hookgate.external.approvals); the
    approval is still used by one execution.
    """

    IDENTICAL_CALL_AFTER_GIVE_UP = "identical_call_after_give_up"


@dataclass(frozen=True, slots=True)
class Places:
    """Where a call runs, for a path whose calls run somewhere (Claude Code's ``cwd``):
    where the approved call's id was first asked from, and where this call is asked from
    (None: not known). A call id first asked from one place is another call when asked
    from another, and an approval given there never covers it."""

    approved: str | None
    asked: str | None


#: The fields compared, in the order a refusal names them, with their words.
_FIELDS = (("org_id", "org"), ("agent_id", "agent"), ("run_id", "run or session"),
           ("tool_call_id", "call id"), ("tool_name", "tool"),
           ("args_sha256", "arguments"))


@dataclass(frozen=True, slots=True)
class Coverage:
    """Whether an approval covers a call. ``differ``: the binding's fields (by name) in which
    the call is not the approved one; ``reason``: why it is not covered (None when it is);
    ``retried``: covered only as the identical retry of a call that gave up."""

    covered: bool
    differ: tuple[str, ...] = ()
    reason: str | None = None
    retried: bool = False


def coverage(approved: object, call: CallBinding, *,
             retry: RetryReuse | None = None, places: Places | None = None) -> Coverage:
    """Whether the approval bound to ``approved`` covers ``call``.

    ``retry`` is passed only by a path that found ``approved`` as the request of a call that
    gave up (see `RetryReuse`); with it, a call that differs from the approved one in its
    call id alone is covered. ``places``: the path's calls run somewhere (see `Places`);
    a call asked from another place than the approved one is never covered (``differ``
    names ``place``). Anything that is not a `CallBinding` made of plain strings (a hook's
    forgery, a subclass that compares equal to anything) covers nothing.
    """
    if type(approved) is not CallBinding or not _plain(approved):
        return Coverage(False, tuple(name for name, _ in _FIELDS),
                        "the approval recorded for it is not one hookgate made")
    differ = tuple(name for name, _ in _FIELDS
                   if getattr(approved, name) != getattr(call, name))
    if places is not None and places.approved != places.asked:
        return Coverage(False, (*differ, "place"),
                        f"call id '{approved.tool_call_id}' was asked from "
                        f"{places.approved or 'another place'}; asked from "
                        f"{places.asked} it is another call")
    if not differ:
        return Coverage(True)
    if differ == ("tool_call_id",) and retry is RetryReuse.IDENTICAL_CALL_AFTER_GIVE_UP:
        return Coverage(True, differ, retried=True)
    words = ", ".join(word for name, word in _FIELDS if name in differ)
    return Coverage(False, differ, f"the approval was given for another call (its {words} "
                                   "differ)")


def _plain(binding: CallBinding) -> bool:
    return all(type(getattr(binding, name)) is str for name, _ in _FIELDS
               if not (name == "org_id" and binding.org_id is None))
