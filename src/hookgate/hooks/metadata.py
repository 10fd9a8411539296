"""`HookContext.metadata`: the request facts plus read-only views of the typed fields.

SPEC §1 documents the keys hooks read (``org_id``, ``run_id``, ``approved_call`` …). Facts
come from the engine when the context is made; the rest are computed from the context's
typed fields on each read, so no component talks to another by writing a string key.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hookgate.hooks.model import HookContext


def _approval(attr: str) -> Callable[[HookContext], Any]:
    def read(ctx: HookContext) -> Any:
        return None if ctx.approval is None else getattr(ctx.approval, attr)
    return read


def _approved_digest(ctx: HookContext) -> Any:
    binding = None if ctx.approval is None else ctx.approval.binding
    return None if binding is None else binding.args_sha256


def _requires_confirmation(ctx: HookContext) -> Any:
    if ctx.asked_by:
        return True
    return ctx.metadata.facts.get("requires_confirmation")  # type: ignore[attr-defined]


#: Each documented key computed from the typed fields, and how (None: the key is absent).
COMPUTED: dict[str, Callable[[HookContext], Any]] = {
    "requires_confirmation": _requires_confirmation,
    "approved_call": _approval("binding"),
    "approved_args_sha256": _approved_digest,
    "approved_by_rule": _approval("rule"),
    "call_decision": _approval("decision"),
    "decided_at": _approval("decided_at"),
    "call_started": lambda ctx: ctx.call_started,
    "hook_context": lambda ctx: list(ctx.added_context) or None,
    "stop_run": lambda ctx: ctx.stop_run,
    "confirmation_asked_by": lambda ctx: [a.to_dict() for a in ctx.asked_by] or None,
    "tool_error": lambda ctx: ctx.tool_error,
    "output_withheld": lambda ctx: True if ctx.output_withheld else None,
    "policy_decision": lambda ctx: ctx.policy_decision,
    "shadow_decisions": lambda ctx: list(ctx.shadow_decisions) or None,
}


#: Computed keys a fact may not carry (``requires_confirmation`` is a fact a hook may add to).
_NOT_FACTS = frozenset(COMPUTED) - {"requires_confirmation"}


class MetadataView(Mapping[str, Any]):
    """A read-only mapping over a context's request facts and typed fields."""

    __slots__ = ("_ref", "facts")

    def __init__(self, ctx: HookContext, facts: dict[str, Any]) -> None:
        # A weak reference: the context holds its view, and a strong one back would make the
        # pair a reference cycle, left for the garbage collector with everything the context
        # reaches (the run's driver, registry and state) on every call.
        self._ref = weakref.ref(ctx)
        if not _NOT_FACTS.isdisjoint(facts):
            facts = {k: v for k, v in facts.items() if k not in _NOT_FACTS}
        #: The request facts the engine set when it made the context (never a computed key).
        self.facts = facts

    @property
    def _ctx(self) -> HookContext:
        ctx = self._ref()
        if ctx is None:
            raise ReferenceError("the hook context this metadata belongs to no longer exists: "
                                 "read HookContext.metadata while the context does")
        return ctx

    def __getitem__(self, key: str) -> Any:
        compute = COMPUTED.get(key)
        if compute is None:
            return self.facts[key]
        value = compute(self._ctx)
        if value is None:
            raise KeyError(key)
        return value

    def __iter__(self) -> Iterator[str]:
        yield from (k for k in self.facts if k not in COMPUTED)
        ctx = self._ctx
        yield from (k for k, compute in COMPUTED.items() if compute(ctx) is not None)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        compute = COMPUTED.get(key)
        return key in self.facts if compute is None else compute(self._ctx) is not None

    def __setitem__(self, key: str, value: Any) -> None:
        raise TypeError(
            f"HookContext.metadata is read-only (tried to set {key!r}): it shows the request "
            "facts and the context's typed fields (approval, added_context, stop_run, "
            "asked_by, …); set those instead")

    def __delitem__(self, key: str) -> None:
        raise TypeError(f"HookContext.metadata is read-only (tried to delete {key!r})")

    def __repr__(self) -> str:
        return f"MetadataView({dict(self)!r})"
