"""`readonly_guard`: while an org is read-only, no tool that writes runs.

The flag is read from the database on every write call — never cached — so a change made
through the API or the CLI holds from the very next call, in every process, and again right
before a write runs after a person approved it. A flag that cannot be read blocks the write
(the hook fails closed).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from hookgate.catalog.builtin.params import reject_unknown_params, require_database
from hookgate.hooks.model import HookContext, HookResult, PreToolUseHook
from hookgate.storage.orgs import org_read_only

READ_ONLY_MESSAGE = "Org is in read-only mode — write blocked."
#: Early: a write that cannot happen need not wait for anything else (a person included).
READONLY_PRIORITY = 10
_ALLOW = HookResult()

#: The org's flag now: True, False, or None for an org the database does not know.
ReadOnlyFlag = Callable[[str], Awaitable[bool | None]]


class OrgFlagUnavailable(Exception):
    """The org's read-only flag could not be read, so the write cannot be shown safe."""


class ReadonlyGuard(PreToolUseHook):
    """Blocks tools declared ``writes=True`` while the caller's org is read-only.

    Reads pass without a look at the flag. A call with no org has no org to be read-only
    and passes; an org the database does not know is blocked, since it cannot be shown
    writable.
    """

    #: It keeps nothing per call and its from_declaration reads only its params and the
    #: database: one instance serves every call (catalog.build.shared_between_calls).
    shared_between_calls = True

    name = "readonly_guard"
    priority = READONLY_PRIORITY
    fail_mode = "closed"
    #: The flag can be switched while a person decides: read it again after the approval.
    recheck_after_approval = True

    #: What `hookgate check` shows in its matcher column.
    matcher = "writes=True"

    def __init__(self, read_only: ReadOnlyFlag) -> None:
        self.read_only = read_only

    @classmethod
    def from_declaration(cls, params: dict[str, Any], env: Any) -> ReadonlyGuard:
        reject_unknown_params("readonly_guard", params, ())
        db = require_database("readonly_guard", env, "the orgs' read-only flags")
        return cls(partial(org_read_only, db))

    def should_trigger(self, ctx: HookContext) -> bool:
        return ctx.metadata.get("writes") is True

    async def execute(self, ctx: HookContext) -> HookResult:
        org = ctx.metadata.get("org_id")
        if org is None:
            return _ALLOW
        try:
            flag = await self.read_only(org)
        except Exception as exc:
            raise OrgFlagUnavailable(
                f"cannot read whether org '{org}' is read-only ({type(exc).__name__}: {exc})"
                " — write blocked") from exc
        if flag is None:
            return HookResult(allow=False, error=(
                f"Org '{org}' is not in the database, so it cannot be shown to be writable "
                "— write blocked."))
        if flag:
            return HookResult(allow=False, error=READ_ONLY_MESSAGE)
        return _ALLOW
