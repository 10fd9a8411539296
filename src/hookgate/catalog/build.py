"""Build a fresh HookRegistry for one session from an agent's declaration (SPEC §1.6, §4).

Building fails closed: any entry that cannot be turned into a hook raises HookBuildError
naming the agent and the entry, and the engine refuses to run the agent.
"""

from __future__ import annotations

import functools
import reprlib
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hookgate.agent import Agent, hook_declaration
from hookgate.canonical import NOT_JSON, json_copy, same_json
from hookgate.catalog.catalog import catalog, catalog_in_force, import_target, still_imports
from hookgate.hooks.errors import DuplicateHookError, HookBuildError
from hookgate.hooks.facts import FactStore
from hookgate.hooks.model import HOOK_BASES
from hookgate.hooks.registry import HookRegistry
from hookgate.hooks.services import HookServices
from hookgate.matching import ToolMatcher
from hookgate.policies.shadow import mode_of, shadowed

if TYPE_CHECKING:
    from hookgate.approvals.gate import ApprovalGate

GATE_NAME = "approval_gate"

# Errors quote the offending value, cut short only when it is long.
_quote = reprlib.Repr()
_quote.maxstring = _quote.maxother = 120
_KNOWN_SECTIONS = frozenset({"class_hooks", "command_hooks", "python_hooks", "http_hooks",
                             "claude_code", "untrusted_output"})
#: The sections whose hooks a build makes anew every time (the declarative ones).
_OWN_SECTIONS = ("command_hooks", "python_hooks", "http_hooks", "claude_code")


@dataclass(frozen=True, slots=True)
class BuildEnv:
    """What a hook class's ``from_declaration(params, env)`` receives."""

    agent: Agent
    services: HookServices


def _fail(agent: Agent, msg: str, entry: object = None) -> HookBuildError:
    return HookBuildError(f"agent '{agent.id}': {msg}", agent_id=agent.id, entry=entry)


def _describe(index: int, entry: object) -> str:
    # The entry's key path, 0-based like every other path in configuration errors.
    name = entry.get("name") if isinstance(entry, Mapping) else entry
    return f"hooks.class_hooks[{index}] {name!r}" if isinstance(name, str) else (
        f"hooks.class_hooks[{index}] {_quote.repr(entry)}")


def parse_entry(agent: Agent, index: int, entry: object) -> tuple[str, dict[str, Any]]:
    """An entry is a name, or ``{name, params}``; return (name, params) or raise."""
    label = _describe(index, entry)
    if isinstance(entry, str):
        if not entry.strip():
            raise _fail(agent, f"{label}: an empty name", entry)
        return entry.strip(), {}
    if isinstance(entry, Mapping):
        unknown = set(entry) - {"name", "params", "mode"}
        if unknown:
            raise _fail(agent, f"{label}: unknown keys {', '.join(sorted(map(str, unknown)))} "
                               "(an entry has 'name', optional 'params' and 'mode')", entry)
        name = entry.get("name")
        if not isinstance(name, str) or not name.strip():
            raise _fail(agent, f"{label}: 'name' must be a non-empty string", entry)
        params = entry.get("params", {})
        if params is None:
            params = {}
        if not isinstance(params, Mapping):
            raise _fail(agent, f"{label}: 'params' must be a mapping, got "
                               f"{type(params).__name__}", entry)
        return name.strip(), dict(params)
    raise _fail(agent, f"{label}: must be a catalog name, 'module:Class', or "
                       f"{{name, params}}; got {type(entry).__name__}", entry)


def resolve_hook_class(agent: Agent, index: int, name: str, entry: object) -> type:
    """A catalog name or ``module:Class`` to the hook class it stands for."""
    return _resolve(agent, index, name, entry)[0]


def _resolve(agent: Agent, index: int, name: str, entry: object) -> tuple[type, str]:
    # The class and the target it was imported from.
    label = _describe(index, entry)
    known = catalog()
    if name in known:
        target = known[name].target
    elif ":" in name:
        target = name
    else:
        raise _fail(agent, f"{label}: unknown hook '{name}' (catalog: "
                           f"{', '.join(sorted(known))}; or give 'module:Class')", entry)
    try:
        obj = import_target(target)
    except ImportError as exc:
        raise _fail(agent, f"{label}: '{target}' cannot be imported: {exc}", entry) from exc
    except Exception as exc:
        raise _fail(agent, f"{label}: importing '{target}' raised "
                           f"{type(exc).__name__}: {exc}", entry) from exc
    if not isinstance(obj, type) or not issubclass(obj, HOOK_BASES):
        raise _fail(agent, f"{label}: '{target}' is not a hook class (subclass "
                           "PreToolUseHook, PostToolUseHook or SessionStartHook)", entry)
    return obj, target


def instantiate(agent: Agent, index: int, cls: type, params: dict[str, Any], entry: object,
                env: BuildEnv) -> Any:
    try:
        factory = getattr(cls, "from_declaration", None)
        hook = factory(params, env) if callable(factory) else cls(**params)
    except HookBuildError as exc:
        raise _fail(agent, f"{_describe(index, entry)}: {exc}", entry) from exc
    except Exception as exc:
        raise _fail(agent, f"{_describe(index, entry)}: bad params {params!r}: "
                           f"{type(exc).__name__}: {exc}", entry) from exc
    if not isinstance(hook, HOOK_BASES):
        raise _fail(agent, f"{_describe(index, entry)}: building it gave "
                           f"{type(hook).__name__}, not a hook", entry)
    return hook


def _database_facts(services: HookServices) -> FactStore:
    assert services.database is not None
    facts: FactStore = _database_facts_class()(services.database)
    return facts


@functools.cache
def _database_facts_class() -> Any:
    # Imported on first use: a registry with a database has storage loaded already, and
    # reading a configuration (which imports this module) must not load storage and
    # SQLAlchemy. Cached: the guarded path builds a registry per call.
    from hookgate.storage.session_facts import DatabaseFacts

    return DatabaseFacts


def _untrusted_output(agent: Agent, declared: Any) -> Callable[[str], bool]:
    """``hooks.untrusted_output``: matchers (hookgate.matching) of the tools whose output is
    untrusted content, beside the tools' own declarations (hookgate.provenance)."""
    if declared is None:
        return _no_tool
    if isinstance(declared, str):
        declared = [declared]
    if not isinstance(declared, list):
        raise _fail(agent, "hooks.untrusted_output must be a list of tool matchers, got "
                           f"{type(declared).__name__}")
    try:
        matchers = tuple(ToolMatcher.parse(m) for m in declared)
    except HookBuildError as exc:
        raise _fail(agent, f"hooks.untrusted_output: {exc}") from exc
    return lambda name: any(m.matches(name) for m in matchers)


def _no_tool(_: str) -> bool:
    return False


@dataclass(frozen=True, slots=True)
class _Planned:
    """One ``class_hooks`` entry as a build found it."""

    index: int
    cls: type
    #: Where ``cls`` was imported from (`still_imports` checks it at every build).
    target: str
    #: The entry's place in errors (``hooks.class_hooks[0] 'audit_log'``).
    label: str


def shared_between_calls(cls: type) -> bool:
    """Whether ``cls`` is one of hookgate's own hooks that says (``shared_between_calls =
    True`` in its own body) that it keeps nothing per call and that its
    ``from_declaration`` reads only its params, the agent and ``services.database``: one
    instance serves every call of an agent's declaration in force (decision record 0034).
    A third party's class (or a subclass of a built-in one) never is: it gets its own
    instance at every build, as documented."""
    return vars(cls).get("shared_between_calls") is True and (
        cls.__module__.startswith("hookgate."))


@dataclass(frozen=True, slots=True)
class _Shared:
    """The registry of an agent's hooks that are shared between calls, as made for the
    modes in force (``version``) over one database: each build extends it with the hooks
    made per call (the approval gate with that call's approvals, declared hooks)."""

    version: str | None
    database: object
    registry: HookRegistry
    #: The latest registry a build finished over it for one `HookServices` object and the
    #: approvals it held then (a list of at most one), when the declaration adds nothing
    #: but the gate (`_Plan.gate_only`): a caller that builds again with that very services
    #: object gets it again (decision record 0037).
    finished: list[tuple[HookServices, object, HookRegistry]] = field(default_factory=list)

    def finished_for(self, services: HookServices) -> HookRegistry | None:
        """The registry finished for ``services`` as they are now, if it still holds (its
        chain entries taken with the telemetry instrument in force)."""
        for made_for, approvals, registry in self.finished:
            if made_for is services and approvals is services.approvals and (
                    registry.entries_current()):
                return registry
        return None


@dataclass(frozen=True, slots=True)
class _Plan:
    """What building an agent's hooks found out once and finds again for as long as its
    ``hooks`` section, the catalog and the imported classes are the same: each entry's
    class, and the matchers of ``untrusted_output``; when every entry's class is shared
    between calls (`shared_between_calls`), their hooks, made once per modes in force and
    database (`_Shared`). Any other hook is made anew at every build (decision records
    0014, 0026, 0034)."""

    #: A copy of the ``hooks`` section it was made from, compared at every build.
    hooks: object
    known: Mapping[str, Any]
    entries: tuple[_Planned, ...]
    untrusted_output: Callable[[str], bool]
    #: Every entry's class is shared between calls.
    all_shared: bool = False
    #: The section declares no hook of its own beside ``class_hooks`` (no command, Python,
    #: HTTP or Claude Code hooks): a build adds only the approval gate to the shared hooks.
    gate_only: bool = False
    #: The latest `_Shared` made (a list of at most one: the plan itself is immutable).
    shared: list[_Shared] = field(default_factory=list)


#: Each agent's plan, while the Agent object lives (a reloaded configuration is new Agents).
_PLANS: weakref.WeakKeyDictionary[Agent, _Plan] = weakref.WeakKeyDictionary()


def _plan_of(agent: Agent, raw_hooks: object) -> _Plan | None:
    """The agent's plan if it still holds for its ``hooks`` section as it is now."""
    plan = _PLANS.get(agent)
    if plan is None or plan.known is not catalog_in_force() or not same_json(raw_hooks, plan.hooks):
        return None
    if not all(still_imports(p.target, p.cls) for p in plan.entries):
        return None
    return plan


def _params(entry: object) -> dict[str, Any]:
    # parse_entry's params of an entry it accepted before.
    if isinstance(entry, Mapping):
        return dict(entry.get("params") or {})
    return {}


def _add(registry: HookRegistry, agent: Agent, index: int, cls: type, params: dict[str, Any],
         entry: object, env: BuildEnv, label: str) -> None:
    """Make ``entry``'s hook (and its companions) and register them."""
    try:
        # ``mode: shadow``: evaluated on every call, recorded, never deciding.
        mode = mode_of(entry.get("mode") if isinstance(entry, Mapping) else None, label, entry)
        hook = shadowed(instantiate(agent, index, cls, params, entry, env), mode)
    except HookBuildError as exc:
        if exc.agent_id is not None:
            raise
        raise _fail(agent, str(exc), entry) from exc
    try:
        registry.register(hook)
        # Hooks one declaration brings at other points (session_limits' PostToolUse).
        for companion in getattr(hook, "companions", ()):
            registry.register(companion)
    except DuplicateHookError as exc:
        raise _fail(agent, f"{label}: {exc}", entry) from exc


def build_registry(agent: Agent, services: HookServices | None = None, *,
                   again: bool = False) -> HookRegistry:
    """A new registry with the agent's declared hooks and the approval gate.

    What the agent's ``hooks`` section resolves to (each entry's class, the matchers) is
    found once per section as it is (`_Plan`, checked at every build); the hooks themselves
    are made anew at every build, with ``services``. ``again``: the caller builds with this
    very ``services`` object, a process's own, time after time; where the registry holds
    nothing made per call (`_Plan.gate_only`), the one finished for it is given again."""
    services = services or HookServices()
    env = BuildEnv(agent, services)
    raw_hooks = (agent.model_config_json or {}).get("hooks")
    decl = hook_declaration(agent)
    facts = None if services.database is None else _database_facts(services)
    plan = _plan_of(agent, raw_hooks)
    if plan is not None and plan.all_shared:
        shared = _shared_registry(plan, agent, decl, services)
        if again and plan.gate_only:
            # Nothing in it is made per call but the gate, which reads only the services'
            # approvals: built again with the same services (the external core's report,
            # a session's start), it is the same registry.
            kept = shared.finished_for(services)
            if kept is not None:
                return kept
        registry = shared.registry.extended()
        with registry.batch():
            _finish(registry, env, decl)
        if again and plan.gate_only:
            shared.finished[:] = [(services, services.approvals, registry)]
        return registry
    if plan is not None:
        class_hooks = decl["class_hooks"] if plan.entries else ()
        registry = HookRegistry(facts=facts, untrusted_output=plan.untrusted_output)
        with registry.batch():
            for p in plan.entries:
                entry = class_hooks[p.index]
                _add(registry, agent, p.index, p.cls, _params(entry), entry, env, p.label)
            _finish(registry, env, decl)
        return registry

    known = catalog_in_force()
    snapshot = json_copy(raw_hooks)
    if raw_hooks is not None and not isinstance(raw_hooks, Mapping):
        raise _fail(agent, f"model_config_json.hooks must be a mapping, got "
                           f"{type(raw_hooks).__name__}")
    unknown = set(decl) - _KNOWN_SECTIONS
    if unknown:
        raise _fail(agent, f"model_config_json.hooks has unknown keys "
                           f"{', '.join(sorted(map(str, unknown)))} (known: "
                           f"{', '.join(sorted(_KNOWN_SECTIONS))})")
    class_hooks = decl.get("class_hooks", [])
    if class_hooks is None:
        class_hooks = []
    if not isinstance(class_hooks, list):
        raise _fail(agent, f"hooks.class_hooks must be a list, got {type(class_hooks).__name__} "
                           f"{_quote.repr(class_hooks)}", class_hooks)

    untrusted = _untrusted_output(agent, decl.get("untrusted_output"))
    registry = HookRegistry(facts=facts, untrusted_output=untrusted)
    planned: list[_Planned] = []
    with registry.batch():
        for index, entry in enumerate(class_hooks):
            name, params = parse_entry(agent, index, entry)
            cls, target = _resolve(agent, index, name, entry)
            label = _describe(index, entry)
            _add(registry, agent, index, cls, params, entry, env, label)
            planned.append(_Planned(index, cls, target, label))
        _finish(registry, env, decl)
    if snapshot is not NOT_JSON:
        _PLANS[agent] = _Plan(snapshot, known, tuple(planned), untrusted,
                              all(shared_between_calls(p.cls) for p in planned),
                              all(decl.get(s) is None for s in _OWN_SECTIONS))
    return registry


def _shared_registry(plan: _Plan, agent: Agent, decl: Mapping[str, Any],
            services: HookServices) -> _Shared:
    """The plan's shared hooks in a registry of their own, made again when the modes in
    force (each entry's ``mode``) or the database changed since it was made."""
    from hookgate.policies.modes import modes_version  # as mode_of reads them: on use

    version = modes_version()
    made = plan.shared[0] if plan.shared else None
    if made is not None and made.version == version and made.database is services.database:
        return made
    # Only what a shared hook may read: never the call's approvals or a third party's extra.
    own = HookServices(database=services.database)
    env = BuildEnv(agent, own)
    facts = None if own.database is None else _database_facts(own)
    registry = HookRegistry(facts=facts, untrusted_output=plan.untrusted_output)
    class_hooks = decl["class_hooks"] if plan.entries else ()
    with registry.batch():
        for p in plan.entries:
            entry = class_hooks[p.index]
            _add(registry, agent, p.index, p.cls, _params(entry), entry, env, p.label)
    made = _Shared(version, services.database, registry)
    plan.shared[:] = [made]
    return made


def _finish(registry: HookRegistry, env: BuildEnv, decl: Mapping[str, Any]) -> None:
    # The declarative hooks (read at every build) and the approval gate.
    add_declarative_hooks, gate = _imported_on_use()
    add_declarative_hooks(registry, env, decl, _fail)

    if registry.get(GATE_NAME) is None:
        registry.register(gate.from_declaration({}, env))


@functools.cache
def _imported_on_use() -> tuple[Callable[..., None], type[ApprovalGate]]:
    # Imported when the first registry is built, once (not at every build).
    from hookgate.approvals.gate import ApprovalGate
    from hookgate.catalog.declarative.build import add_declarative_hooks

    return add_declarative_hooks, ApprovalGate
