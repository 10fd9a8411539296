"""The hook registry: runs the hooks of one point in order and folds their answers.

The semantics are SPEC §1: priority order with registration order on ties, argument and
result chaining, the first block wins, and failure is closed unless a hook says "open".
The chains are hot paths (every tool call crosses two), so each chain is precomputed at
registration (and again when a hook's options are assigned later), a hook that changes
nothing costs a few attribute reads, and a timeout scope exists only for hooks that declare
one. The shortcuts never change what a hook means: whatever its class or instance says
(should_trigger, timeout, fail_mode) holds. bench/dispatch.py measures the chains against
a bare loop over the same hooks.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, NamedTuple

from hookgate.hooks.errors import DuplicateHookError, waiting_request
from hookgate.hooks.facts import FactStore, MemoryFacts
from hookgate.hooks.model import (
    Hook,
    HookContext,
    HookPoint,
    HookResult,
    PostToolUseHook,
    PreToolUseHook,
    SessionStartHook,
    _Hook,
)
from hookgate.hooks.trace import UNCHANGED, ChainResult, HookEvent, HookEventKind
from hookgate.hooks.withheld import Withheld, mask_text

#: The facts of sessions whose registry has no database (tests, evals, a library run).
PROCESS_FACTS = MemoryFacts()


def _declared_by_tool_only(_: str) -> bool:
    return False

log = logging.getLogger("hookgate.hooks")

_DEFAULT_TRIGGER = _Hook.should_trigger

#: Given a hook, the callable to run instead of its ``execute`` (hookgate.telemetry sets it
#: to time and trace every hook while telemetry is on); taken at registration, so None
#: costs the chains nothing.
instrument: Callable[[_Hook], Callable[[HookContext], Awaitable[Any]]] | None = None


class _Options(NamedTuple):
    """What makes a hook more than "always run, no timeout, fail closed".

    ``dynamic`` is the hook itself when its timeout or fail_mode is computed (a property):
    those are then read on every call, not once.
    """

    trigger: Callable[[HookContext], bool] | None
    timeout: float | None
    closed: bool
    dynamic: _Hook | None = None


#: One chain member, unpacked in the run loops: the bound ``execute``, the hook's name, and
#: its options, or None for the common plain hook. Taken when the hook is registered.
_Entry = tuple[Callable[[HookContext], Awaitable[Any]], str, _Options | None]

_PLAIN = _Options(None, None, True)
_PRE, _POST, _SESSION = HookPoint.PRE_TOOL_USE, HookPoint.POST_TOOL_USE, HookPoint.SESSION_START
_POINTS: tuple[HookPoint, ...] = tuple(HookPoint)


class _NotAHookResult(Exception):
    pass


class _Raised(NamedTuple):
    """What the fast loop hands the full loop when a hook raised (a hook may also *return*
    an exception object, which is a wrong answer, not a raise)."""

    exc: Exception


#: Marks "the first hook of this chain has not run yet" for the full loops.
_NOT_RUN = object()


def _entry(hook: _Hook) -> _Entry:
    # Read through the instance, so options set on the instance hold like the class's.
    trigger = hook.should_trigger
    default = getattr(trigger, "__func__", None) is _DEFAULT_TRIGGER
    execute = hook.execute if instrument is None else instrument(hook)
    if _computed(hook, "timeout") or _computed(hook, "fail_mode"):
        opts = _Options(None if default else trigger, None, True, hook)
        return _dynamic_execute(hook, execute), hook.name, opts
    opts = _Options(None if default else trigger, hook.timeout, hook.fail_mode != "open")
    return execute, hook.name, None if opts == _PLAIN else opts


def _entry_of(entries: dict[int, _Entry], hook: _Hook) -> _Entry:
    entry = entries[id(hook)] = _entry(hook)
    return entry


def _computed(hook: _Hook, attr: str) -> bool:
    # A property (or any descriptor) may answer differently on each call.
    if attr in vars(hook):
        return False
    return _descriptor_on(type(hook), attr)


@functools.lru_cache(maxsize=1024)
def _descriptor_on(cls: type, attr: str) -> bool:
    # Per class, not per hook: the guarded path builds a registry (and so asks this for each
    # of its hooks) on every call, and getattr_static walks the class's whole MRO.
    return hasattr(type(inspect.getattr_static(cls, attr, None)), "__get__")


def _dynamic_execute(hook: _Hook, execute: Callable[[HookContext], Awaitable[Any]]
                     ) -> Callable[[HookContext], Awaitable[Any]]:
    async def run(ctx: HookContext) -> Any:
        seconds = hook.timeout
        if seconds is None:
            return await execute(ctx)
        return await _execute_with_timeout(execute, ctx, seconds)

    return run


async def _execute_with_timeout(
    execute: Callable[[HookContext], Awaitable[Any]], ctx: HookContext, seconds: float
) -> Any:
    async with asyncio.timeout(seconds):
        return await execute(ctx)


def _check(r: Any) -> HookResult:
    # Called only when ``r`` is not exactly a HookResult (the common case skips the call).
    if isinstance(r, HookResult):
        return r
    raise _NotAHookResult(f"returned {type(r).__name__}, not a HookResult")


def _timeout_of(opts: _Options) -> float | None:
    return opts.dynamic.timeout if opts.dynamic is not None else opts.timeout


def _failure(name: str, exc: Exception, opts: _Options | None) -> tuple[str, bool]:
    """The trace message for a failed hook, and whether the failure is closed."""
    opts = opts or _PLAIN
    seconds = _timeout_of(opts)
    if isinstance(exc, TimeoutError) and seconds is not None:
        msg = f"hook '{name}' timed out after {seconds:g}s"
    elif isinstance(exc, _NotAHookResult):
        msg = f"hook '{name}' failed: {exc}"
    else:
        msg = f"hook '{name}' failed: {type(exc).__name__}: {str(exc) or type(exc).__name__}"
    closed = opts.closed if opts.dynamic is None else opts.dynamic.fail_mode != "open"
    return msg, closed


def _failure_kind(exc: Exception, opts: _Options | None) -> str:
    """How a hook failed, in words that quote nothing the hook printed or raised."""
    seconds = _timeout_of(opts or _PLAIN)
    if isinstance(exc, TimeoutError) and seconds is not None:
        return f"timed out after {seconds:g}s"
    if isinstance(exc, _NotAHookResult):
        return "returned an invalid answer"
    return f"failed ({type(exc).__name__})"


def _output_of(name: str, exc: Exception, kind: str) -> Withheld:
    """What a failed hook raised or printed (it may quote the tool's raw output), behind the
    fixed words that say how it failed."""
    said = str(exc)
    text = said if isinstance(exc, _NotAHookResult) else (
        f"{type(exc).__name__}: {said}" if said else type(exc).__name__)
    return Withheld.of(text, shown=f"hook '{name}' {kind}")


def _log_failure(name: str, point: HookPoint, ctx: HookContext, what: str, closed: bool
                 ) -> None:
    """One server log line per hook failure; ``what`` is fixed or masked text."""
    log.warning("%s hook '%s' %s on tool %s (run %s); it fails %s", point.value, name, what,
                ctx.tool_name, ctx.metadata.get("run_id"), "closed" if closed else "open")


def withheld_message(name: str, kind: str) -> str:
    """What the model reads when a PostToolUse hook failed closed: a fixed sentence."""
    return (f"Tool output withheld: the tool ran, but PostToolUse hook '{name}' {kind} and "
            "fails closed, so its output is not shown.")


#: ``start_at`` for a call the whole chain admitted before an interruption, whose tool
#: continues work of its own that was checkpointed (a delegate's child run): no hook of
#: the chain runs again, only the re-checks that run before any resumed call.
ADMITTED = "<admitted before the interruption>"


class HookRegistry:
    """An ordered set of hooks for one session; build a fresh one per session."""

    def __init__(self, hooks: Iterable[Hook] = (), *, facts: FactStore | None = None,
                 untrusted_output: Callable[[str], bool] | None = None) -> None:
        #: Where the guarded path keeps and reads the session's facts (its request, the
        #: results it has seen) for provenance: the database when the registry was built
        #: with one (catalog.build), else this process's memory.
        self.facts: FactStore = facts if facts is not None else PROCESS_FACTS
        #: Whether the agent's configuration declares a tool's output untrusted content
        #: (``hooks.untrusted_output``), beside the tool's own declaration.
        self.untrusted_output: Callable[[str], bool] = (
            untrusted_output or _declared_by_tool_only)
        self._hooks: list[_Hook] = []
        self._members: dict[HookPoint, tuple[_Hook, ...]] = dict.fromkeys(_POINTS, ())
        self._pre: tuple[_Entry, ...] = ()
        self._post: tuple[_Entry, ...] = ()
        self._session: tuple[_Entry, ...] = ()
        # The bound ``execute`` of each hook when every hook of the point is plain (always
        # triggers, no timeout, fails closed): the loop over these does nothing else.
        self._pre_fast: tuple[Callable[[HookContext], Awaitable[Any]], ...] | None = ()
        self._post_fast: tuple[Callable[[HookContext], Awaitable[Any]], ...] | None = ()
        #: A PreToolUse hook reads the call's provenance (``reads_provenance``): the guarded
        #: path traces it before the chain; else only a hook that awaits it reads the facts.
        self.reads_provenance = False
        #: While `batch` runs: the points whose chains are precomputed when it ends.
        self._deferred: set[HookPoint] | None = None
        #: Each member's chain entry (by its id; the member is held in ``_hooks``), taken
        #: with ``_instrument``: a point's chain is precomputed again without taking again
        #: the entries of the members that did not change (`extended`).
        self._entries: dict[int, _Entry] = {}
        self._instrument = instrument
        if hooks:
            with self.batch():
                for hook in hooks:
                    self.register(hook)

    # -- membership ----------------------------------------------------------------------

    def register(self, hook: Hook) -> None:
        """Add ``hook``; its point is given by its base class.

        The hook's ``execute``, ``should_trigger``, ``timeout`` and ``fail_mode`` are taken
        now, once, not looked up again on every call.
        """
        if not isinstance(hook, _Hook):
            raise TypeError(
                f"{hook!r} is not a hook: subclass PreToolUseHook, PostToolUseHook or "
                "SessionStartHook"
            )
        name = hook.name or type(hook).__name__
        if any(h.name == name for h in self._hooks):
            raise DuplicateHookError(f"a hook named '{name}' is already registered")
        hook.name = name
        self._hooks.append(hook)
        hook._watch(self)
        self._changed(hook.point)

    def unregister(self, name: str) -> None:
        """Remove the hook called ``name``; KeyError when there is none."""
        for i, h in enumerate(self._hooks):
            if h.name == name:
                del self._hooks[i]
                h._unwatch(self)
                self._entries.pop(id(h), None)
                self._changed(h.point)
                return
        raise KeyError(f"no hook named '{name}' is registered")

    def hooks(self, point: HookPoint | None = None) -> list[_Hook]:
        """The hooks at ``point`` (or all of them), in run order."""
        if point is not None:
            return list(self._members[point])
        return [h for p in _POINTS for h in self._members[p]]

    def get(self, name: str) -> _Hook | None:
        return next((h for h in self._hooks if h.name == name), None)

    def __len__(self) -> int:
        return len(self._hooks)

    def hook_changed(self, hook: _Hook) -> None:
        """An option of ``hook`` was assigned after it was registered: precompute again."""
        if any(h is hook for h in self._hooks):
            self._entries.pop(id(hook), None)
            self._changed(hook.point)

    def entries_current(self) -> bool:
        """Whether its chains were taken with the telemetry instrument in force (none was
        switched since): a registry kept for later builds is used again only then."""
        return self._instrument is instrument

    def extended(self) -> HookRegistry:
        """A new registry with this one's hooks (the same instances, in the same order,
        their chain entries as taken here), for more hooks to be registered in: only the
        points they join are precomputed again. The new registry watches every member, so
        an option assigned later on any of them holds there as in a registry built hook by
        hook. What `catalog.build` makes per call over the hooks it builds once for many
        calls (decision record 0034)."""
        new = HookRegistry(facts=self.facts, untrusted_output=self.untrusted_output)
        new._hooks = list(self._hooks)
        new._members = dict(self._members)
        new._pre, new._post, new._session = self._pre, self._post, self._session
        new._pre_fast, new._post_fast = self._pre_fast, self._post_fast
        new.reads_provenance = self.reads_provenance
        anew = self._instrument is not instrument  # telemetry was switched since
        if not anew:
            new._entries = dict(self._entries)
        with new.batch():
            if anew and new._deferred is not None:
                new._deferred.update(_POINTS)  # every chain precomputed, every entry taken
            for hook in new._hooks:
                hook._watch(new)
        return new

    def batch(self) -> _Batch:
        """``with registry.batch():`` registers several hooks with each point's chain
        precomputed once, when the block ends (also when it raises), not after every
        registration: building a registry (once per guarded call, twice for an external
        one) registers every hook."""
        return _Batch(self)

    def _flush(self) -> None:
        points, self._deferred = self._deferred, None
        if points:
            for point in _POINTS:
                if point in points:
                    self._rebuild(point)

    def _changed(self, point: HookPoint) -> None:
        if self._deferred is not None:
            self._deferred.add(point)
        else:
            self._rebuild(point)

    def _rebuild(self, point: HookPoint) -> None:
        # sorted() is stable, so equal priorities keep registration order.
        members = tuple(
            sorted((h for h in self._hooks if h.point is point), key=lambda h: h.priority)
        )
        self._members[point] = members
        if self._instrument is not instrument:  # telemetry was switched: take them anew
            self._entries.clear()
            self._instrument = instrument
        entries = self._entries
        chain = tuple(entries.get(id(h)) or _entry_of(entries, h) for h in members)
        fast: tuple[Callable[[HookContext], Awaitable[Any]], ...] | None = tuple(
            e[0] for e in chain)
        # The fast loop finds where it stopped by looking its callable up, so it serves only
        # chains of plain hooks whose callables are all distinct.
        if fast is not None and (any(e[2] is not None for e in chain)
                                 or len(set(fast)) != len(fast)):
            fast = None
        if point is _PRE:
            self._pre, self._pre_fast = chain, fast
            self.reads_provenance = any(h.reads_provenance for h in members)
        elif point is _POST:
            self._post, self._post_fast = chain, fast
        else:
            self._session = chain

    # -- running -------------------------------------------------------------------------
    #
    # The three loops share one shape: skip, call (in a timeout scope if the hook has one),
    # and move on at once when the answer is "allow, change nothing". Everything else
    # (blocks, rewrites, side effects, failures) is the slow path that builds the trace.
    # The loops are written out rather than shared because a shared step would cost a call
    # per hook on the path every tool call takes twice.

    def runs_pre_tool_use(self, ctx: HookContext) -> bool:
        """Whether any PreToolUse hook runs for ``ctx`` (one without a trigger always does;
        the approval gate only for a call that needs a person's approval)."""
        return any(opts is None or opts.trigger is None or opts.trigger(ctx)
                   for _, _, opts in self._pre)

    async def run_pre_tool_use(
        self, ctx: HookContext, *, start_at: str | None = None
    ) -> ChainResult:
        """Run the PreToolUse chain; ``ctx.tool_args`` ends as the final arguments.

        ``start_at`` resumes a chain that was interrupted (a restart while the approval
        gate waited): hooks before the named one already ran and are skipped.
        """
        fast = self._pre_fast
        if fast is not None and start_at is None:
            for execute in fast:
                try:
                    r = await execute(ctx)
                except Exception as exc:
                    return await self._run_pre(ctx, self._pre[fast.index(execute):],
                                               _Raised(exc))
                if (r.__class__ is HookResult and r.modified_args is None and r.allow
                        and not r.side_effects):
                    continue
                return await self._run_pre(ctx, self._pre[fast.index(execute):], r)
            return UNCHANGED
        chain = self._pre if start_at is None else _from(self._pre, start_at)
        return await self._run_pre(ctx, chain, _NOT_RUN)

    async def _run_pre(self, ctx: HookContext, chain: tuple[_Entry, ...],
                       first: object) -> ChainResult:
        # The full PreToolUse loop; ``first`` is what the chain's first hook already
        # answered (or raised) on the fast path, or _NOT_RUN.
        trace: _Trace | None = None
        rewritten = False
        for execute, name, opts in chain:
            try:
                if first is not _NOT_RUN:
                    r, first = first, _NOT_RUN
                    if isinstance(r, _Raised):
                        raise r.exc
                elif opts is None:
                    r = await execute(ctx)
                elif opts.trigger is not None and not opts.trigger(ctx):
                    continue
                elif opts.timeout is None:
                    r = await execute(ctx)
                else:
                    r = await _execute_with_timeout(execute, ctx, opts.timeout)
                if r.__class__ is not HookResult:
                    r = _check(r)
                if r.allow and r.modified_args is None and not r.side_effects:
                    continue
                if r.modified_args is not None and not isinstance(r.modified_args, dict):
                    raise _NotAHookResult(
                        f"modified_args must be a dict, got {type(r.modified_args).__name__}"
                    )
            except Exception as exc:
                msg, closed = _failure(name, exc, opts)
                waiting = waiting_request(exc)
                if waiting is not None:
                    # The normal path of a call a person must decide: said as such.
                    log.info("tool %s (run %s) waits for a person's decision on request %s",
                             ctx.tool_name, ctx.metadata.get("run_id"), waiting)
                else:
                    _log_failure(name, _PRE, ctx, _failure_kind(exc, opts), closed)
                trace = _Trace.add(trace, name, _PRE, "failed", msg, closed)
                if closed or waiting is not None:
                    return trace.result(
                        allow=False, error=f"Blocked: {msg}", blocked_by=name,
                        failed_closed=True, waiting=waiting,
                        modified_args=ctx.tool_args if rewritten else None,
                    )
                continue
            if r.side_effects:
                trace = _Trace.effects(trace, name, _PRE, r.side_effects)
            if not r.allow:
                error = r.error or f"Blocked by hook '{name}'."
                trace = _Trace.add(trace, name, _PRE, "blocked", error)
                return trace.result(
                    allow=False, error=error, blocked_by=name,
                    modified_args=ctx.tool_args if rewritten else None,
                )
            if r.modified_args is not None:
                ctx.tool_args = r.modified_args
                rewritten = True
                trace = _Trace.add(trace, name, _PRE, "rewrote_args", "arguments rewritten")
        if trace is None:
            return UNCHANGED
        return trace.result(modified_args=ctx.tool_args if rewritten else None)

    async def recheck_pre_tool_use(self, ctx: HookContext) -> ChainResult:
        """Run once more the PreToolUse hooks that declare ``recheck_after_approval``.

        The guarded path calls this after a person approved, right before the tool runs:
        their answer may have changed during the wait. Same rules as the chain (trigger,
        timeout, fail mode, first block wins).
        """
        chain = tuple(entry for hook, entry in zip(self._members[_PRE], self._pre, strict=True)
                      if hook.recheck_after_approval)
        if not chain:
            return UNCHANGED
        result = await self._run_pre(ctx, chain, _NOT_RUN)
        if not result.allow:
            result.error = (f"{result.error} (checked again right before the call, after "
                            "the approval)")
        return result

    async def run_post_tool_use(self, ctx: HookContext) -> ChainResult:
        """Run the PostToolUse chain; ``ctx.tool_result`` ends as what the model sees.

        A closed failure withholds the raw output: later hooks see the error observation
        instead (so an audit hook still records the call), and the model gets that error.
        """
        fast = self._post_fast
        if fast is not None:
            for execute in fast:
                try:
                    r = await execute(ctx)
                except Exception as exc:
                    return await self._run_post(ctx, self._post[fast.index(execute):],
                                                _Raised(exc))
                if (r.__class__ is HookResult and r.modified_result is None
                        and not r.side_effects):
                    continue
                return await self._run_post(ctx, self._post[fast.index(execute):], r)
            return UNCHANGED
        return await self._run_post(ctx, self._post, _NOT_RUN)

    async def _run_post(self, ctx: HookContext, chain: tuple[_Entry, ...],
                        first: object) -> ChainResult:
        # The full PostToolUse loop; ``first`` as in _run_pre.
        trace: _Trace | None = None
        rewritten = False
        withheld: str | None = None
        withheld_by: str | None = None
        for execute, name, opts in chain:
            try:
                if first is not _NOT_RUN:
                    r, first = first, _NOT_RUN
                    if isinstance(r, _Raised):
                        raise r.exc
                elif opts is None:
                    r = await execute(ctx)
                elif opts.trigger is not None and not opts.trigger(ctx):
                    continue
                elif opts.timeout is None:
                    r = await execute(ctx)
                else:
                    r = await _execute_with_timeout(execute, ctx, opts.timeout)
                if r.__class__ is not HookResult:
                    r = _check(r)
                if r.modified_result is None and not r.side_effects:
                    continue
            except Exception as exc:
                # What the hook raised or printed may quote the tool's raw output: it goes
                # to the trace's admin-only ``output``, never into the observation.
                _, closed = _failure(name, exc, opts)
                kind = _failure_kind(exc, opts)
                _log_failure(name, _POST, ctx, kind, closed)
                trace = _Trace.add(trace, name, _POST, "failed", f"hook '{name}' {kind}",
                                   closed, output=_output_of(name, exc, kind))
                if closed and withheld is None:
                    withheld, withheld_by = withheld_message(name, kind), name
                    ctx.tool_result = withheld
                    ctx.output_withheld = True
                continue
            if r.side_effects:
                trace = _Trace.effects(trace, name, _POST, r.side_effects)
            if r.modified_result is not None and withheld is None:
                ctx.tool_result = r.modified_result
                rewritten = True
                trace = _Trace.add(trace, name, _POST, "rewrote_result", "result rewritten")
        if trace is None:
            return UNCHANGED
        if withheld is not None:
            return trace.result(
                error=withheld, modified_result=withheld, blocked_by=withheld_by,
                withheld=True, failed_closed=True,
            )
        return trace.result(modified_result=ctx.tool_result if rewritten else None)

    async def run_session_start(self, ctx: HookContext) -> ChainResult:
        """Run the SessionStart chain; a closed failure stops the session (allow=False)."""
        trace: _Trace | None = None
        context: list[str] = []
        for execute, name, opts in self._session:
            try:
                if opts is None:
                    r = await execute(ctx)
                elif opts.trigger is not None and not opts.trigger(ctx):
                    continue
                elif opts.timeout is None:
                    r = await execute(ctx)
                else:
                    r = await _execute_with_timeout(execute, ctx, opts.timeout)
                if r.__class__ is not HookResult:
                    r = _check(r)
            except Exception as exc:
                msg, closed = _failure(name, exc, opts)
                _log_failure(name, _SESSION, ctx, _failure_kind(exc, opts), closed)
                trace = _Trace.add(trace, name, _SESSION, "failed", msg, closed)
                if closed:
                    return trace.result(
                        allow=False, error=f"Session stopped: {msg}", blocked_by=name,
                        failed_closed=True,
                    )
                continue
            if r.side_effects:
                trace = _Trace.effects(trace, name, _SESSION, r.side_effects)
            if r.additional_context:
                context.append(r.additional_context)
                trace = _Trace.add(
                    trace, name, _SESSION, "context",
                    f"added {len(r.additional_context)} characters of context",
                )
        if trace is None:
            return UNCHANGED
        return trace.result(additional_context="\n\n".join(context) if context else None)


class _Batch:
    """`HookRegistry.batch`'s block (a nested one changes nothing)."""

    __slots__ = ("outer", "registry")

    def __init__(self, registry: HookRegistry) -> None:
        self.registry = registry
        self.outer = registry._deferred is None

    def __enter__(self) -> None:
        if self.outer:
            self.registry._deferred = set()

    def __exit__(self, *_: object) -> None:
        if self.outer:
            self.registry._flush()


class _Trace:
    """What a chain did beyond "allow, change nothing"; made only once something happens."""

    __slots__ = ("events", "side_effects")

    def __init__(self) -> None:
        self.events: list[HookEvent] = []
        self.side_effects: list[str] = []

    @staticmethod
    def add(trace: _Trace | None, name: str, point: HookPoint, kind: HookEventKind,
            detail: str, closed: bool | None = None, output: Withheld | None = None
            ) -> _Trace:
        trace = trace or _Trace()
        mode = None if closed is None else ("closed" if closed else "open")
        trace.events.append(HookEvent(name, point, kind, detail, mode, output))
        return trace

    @staticmethod
    def effects(trace: _Trace | None, name: str, point: HookPoint,
                side_effects: Iterable[Any]) -> _Trace:
        trace = trace or _Trace()
        for s in side_effects:
            # After the tool ran, a hook's note may quote its raw output: masked, like the
            # admins' copy of a failed hook's output.
            said = mask_text(str(s)) if point is _POST else str(s)
            trace.side_effects.append(f"{name}: {said}")
            trace.events.append(HookEvent(name, point, "side_effect", said))
        return trace

    def result(self, **fields: Any) -> ChainResult:
        return ChainResult(side_effects=self.side_effects, events=self.events, **fields)


def _from(chain: tuple[_Entry, ...], name: str) -> tuple[_Entry, ...]:
    if name == ADMITTED:
        return ()
    for i, e in enumerate(chain):
        if e[1] == name:
            return chain[i:]
    raise KeyError(f"cannot resume the PreToolUse chain at '{name}': no such hook")


__all__ = [
    "ADMITTED",
    "HookRegistry",
    "PostToolUseHook",
    "PreToolUseHook",
    "SessionStartHook",
]
