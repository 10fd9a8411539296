"""Which of an agent's rules apply to a call that runs outside hookgate, and the Tool it becomes.

A section of the agent's ``model_config_json`` (``claude_code``, ``guarded_calls``) holds
``wait_s`` and ``rules``; a rule has a ``matcher``, a ``when`` (hookgate.matching) and
``requires_confirmation``, ``writes``, ``connector``, plus any keys a caller adds
(Claude Code's ``command`` and ``path_*``). Every key given must hold for the rule to apply.
A rule's ``reason`` is shown to the approver, with the rule, when it asked for a person.
A rule with ``mode: shadow`` changes nothing: what it would have decided is recorded
(hookgate.policies.shadow) on the call's context by the guarded path.
"""

from __future__ import annotations

import dataclasses
import math
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from hookgate.agent import Agent
from hookgate.canonical import NOT_JSON, json_copy, same_json
from hookgate.external.schema_tool import SchemaTool
from hookgate.hooks.errors import HookBuildError
from hookgate.hooks.facts import NOT_TRACED, PROVENANCE_KEY
from hookgate.hooks.model import HookContext, HookPoint
from hookgate.matching import Condition, ToolMatcher, not_evaluated, selects
from hookgate.policies.shadow import Mode, ShadowDecision, mode_of, record_shadow
from hookgate.tools.guarded_call import ShadowRecorder
from hookgate.tools.tool import Tool

#: A test a rule key adds: True when the call meets it (fail closed: unsure is True).
ArgumentTest = Callable[[HookContext], bool]
#: Extra rule keys: each parses its value (HookBuildError) into a test.
RuleKeys = Mapping[str, Callable[[Any], ArgumentTest]]
_RULE_KEYS = frozenset({"matcher", "when", "requires_confirmation", "writes", "connector",
                        "reason", "mode"})
#: The longest ``reason`` of a rule (it goes on approval cards).
REASON_CHARS = 500
_KEYS = frozenset({"wait_s", "rules"})
#: Where a call's declared JSON schema travels: hook metadata, then the request's context.
TOOL_SCHEMA_KEY = "tool_schema"
#: The parameters of a stand-in whose runtime sent no schema: any JSON object. Never changed,
#: so one object serves every such stand-in and its validator is found by identity
#: (tools/json_schema.py), not by encoding a new copy at every call (decision record 0037).
ANY_OBJECT: dict[str, Any] = {"type": "object"}


class ExternalToolRan(RuntimeError):
    """Raised if anything tried to run an external agent's tool inside hookgate."""


def _never_run(**_: Any) -> None:
    raise ExternalToolRan("an external agent's tools run in that agent, never in hookgate")


@dataclass(frozen=True, slots=True)
class ToolRule:
    matcher: ToolMatcher
    when: Condition | None
    requires_confirmation: bool | None
    writes: bool | None
    connector: str | None
    tests: tuple[ArgumentTest, ...] = ()
    #: Where the rule is declared and what it says, as the approver reads it.
    described: str = ""
    #: ``shadow``: the rule never changes a call; what it would decide is recorded.
    mode: Mode = "enforce"
    #: The rule's own ``reason``, for a shadow decision's note.
    reason: str | None = None
    #: Where the rule is declared (``guarded_calls.rules[0] of agent 'scout'``).
    named: str = ""

    def shadow_decision(self) -> ShadowDecision:
        """What this rule, in shadow mode, would have decided about a call it applies to."""
        return ShadowDecision(f"rule {self.named}",
                              "ask" if self.requires_confirmation else "allow",
                              self.reason or "")

    def applies(self, ctx: HookContext) -> tuple[bool, str | None]:
        """Whether the rule applies to ``ctx``'s call. A rule whose ``when`` cannot be
        evaluated applies (fail closed); the second value then says why it could not."""
        picked, failure = selects(self.matcher, self.when, ctx)
        if not picked:
            return False, None
        return all(test(ctx) for test in self.tests), failure


@dataclass(frozen=True, slots=True)
class CallRules:
    """The rules of one section and how long a call waits for a person inside one request."""

    rules: tuple[ToolRule, ...] = ()
    wait_s: float = 0.0

    @classmethod
    def read(cls, agent: Agent, section: str, *, default_wait_s: float,
             keys: RuleKeys | None = None) -> CallRules:
        """The agent's rules under ``section``; HookBuildError says what is wrong.

        Read once for as long as the section is the same (value and type, all the way
        down) and kept per agent; each rule's mode is read again at every read (a
        ``hookgate policy reload`` may have stamped another), and the same rules come back
        (the same object) while nothing changed."""
        decl = (agent.model_config_json or {}).get(section) or {}
        held = _READ.get(agent)
        key = (cls, section, default_wait_s, id(keys))
        found = None if held is None else held.get(key)
        if found is not None and found.keys is keys and same_json(decl, found.section):
            return found.now(decl)
        version = _modes_version()  # before the modes are read: a reload meanwhile is seen
        rules = cls._read(agent, section, decl, default_wait_s=default_wait_s, keys=keys)
        copy = json_copy(decl)
        if copy is not NOT_JSON:
            _READ.setdefault(agent, {})[key] = _Read(copy, keys, rules, version)
        return rules

    @classmethod
    def _read(cls, agent: Agent, section: str, decl: Any, *, default_wait_s: float,
              keys: RuleKeys | None) -> CallRules:
        if not isinstance(decl, Mapping):
            raise HookBuildError(f"agent '{agent.id}': model_config_json.{section} must be "
                                 "a mapping")
        unknown = sorted(str(k) for k in decl if k not in _KEYS)
        if unknown:
            raise HookBuildError(f"agent '{agent.id}': {section} has unknown keys "
                                 f"{', '.join(unknown)} (known: wait_s, rules)")
        wait = decl.get("wait_s", default_wait_s)
        if (isinstance(wait, bool) or not isinstance(wait, int | float)
                or not math.isfinite(wait) or wait < 0):
            raise HookBuildError(f"agent '{agent.id}': {section}.wait_s must be a number "
                                 f"of seconds >= 0, got {wait!r}")
        rules = decl.get("rules") or []
        if not isinstance(rules, list):
            raise HookBuildError(f"agent '{agent.id}': {section}.rules must be a list")
        where = f"agent '{agent.id}': {section}.rules"
        return cls(tuple(_rule(f"{where}[{i}]", r, keys or {},
                               f"{section}.rules[{i}] of agent '{agent.id}'")
                         for i, r in enumerate(rules)), float(wait))

    def flags(self, probe: HookContext, *, writes: bool, connector: str) -> RuleFlags:
        """What the rules that apply to the call (``probe`` carries its arguments and
        metadata) say; ``writes`` and ``connector`` are the defaults they may change."""
        needs = False
        asked: list[str] = []
        shadow: list[ShadowDecision] = []
        for rule in self.rules:
            applies, failure = rule.applies(probe)
            if not applies:
                continue
            if rule.mode == "shadow":
                shadow.append(rule.shadow_decision())
                continue
            if rule.requires_confirmation:
                needs = True
                asked.append(rule.described if failure is None else
                             f"{rule.described} ({not_evaluated(failure)}; the rule "
                             "applies, fail closed)")
            if rule.writes is not None:
                writes = rule.writes
            if rule.connector is not None:
                connector = rule.connector
        return RuleFlags(needs, "; ".join(asked) or None, writes, connector, tuple(shadow))

    def tool(self, name: str, probe: HookContext, *, writes: bool, connector: str,
             schema: Mapping[str, Any] | None = None,
             description: str | None = None) -> Tool:
        """The stand-in Tool for a call of a tool the agent does not declare (``probe``
        carries its arguments and metadata); ``writes`` and ``connector`` are the defaults
        the rules may change; ``schema`` the tool's JSON schema as the agent's runtime
        declares it (arguments are checked and converted by it, and an approver's edit
        too)."""
        return self.stand_in(name, self.flags(probe, writes=writes, connector=connector),
                             schema=schema, description=description)

    @staticmethod
    def stand_in(name: str, flags: RuleFlags, *, schema: Mapping[str, Any] | None = None,
                 description: str | None = None) -> Tool:
        """The stand-in Tool with the flags the rules gave the call (`flags`)."""
        # A runtime that sends no description of the tool gets none made up.
        return SchemaTool(name=name, description=description or "",
                          parameters=dict(schema) if schema else ANY_OBJECT,
                          _fn=_never_run, requires_confirmation=flags.requires_confirmation,
                          connector=flags.connector, writes=flags.writes,
                          confirmation_reason=flags.reason)


class _Read:
    """An agent's section as `CallRules.read` read it: a copy to compare, and the rules
    with the modes they had at the last read, under the modes in force then
    (``version``)."""

    __slots__ = ("keys", "rules", "section", "version")

    def __init__(self, section: Any, keys: RuleKeys | None, rules: CallRules,
                 version: str | None) -> None:
        self.section, self.keys, self.rules, self.version = section, keys, rules, version

    def now(self, decl: Mapping[str, Any]) -> CallRules:
        """The rules with each one's mode as `mode_of` reads it now: read again only
        when the modes in force changed since the last read (the section, its declared
        modes included, is the same: `CallRules.read` compared it)."""
        rules = self.rules
        if not rules.rules:
            return rules
        version = _modes_version()
        if version == self.version:
            return rules  # the same modes in force: mode_of answers what it answered
        entries = decl["rules"]
        modes = [mode_of(entries[i].get("mode"), rule.named, entries[i])
                 for i, rule in enumerate(rules.rules)]
        if any(m != rule.mode for m, rule in zip(modes, rules.rules, strict=True)):
            self.rules = rules = type(rules)(
                tuple(rule if m == rule.mode else dataclasses.replace(rule, mode=m)
                      for m, rule in zip(modes, rules.rules, strict=True)), rules.wait_s)
        self.version = version
        return rules


def _modes_version() -> str | None:
    # Imported on use, as mode_of reads the modes (policies.shadow).
    from hookgate.policies.modes import modes_version

    return modes_version()


#: Each agent's sections as read, while the Agent object lives (a reloaded configuration is
#: new Agents), by (class, section, default wait, the extra rule keys' identity).
_READ: weakref.WeakKeyDictionary[Agent, dict[tuple[type, str, float, int], _Read]] = (
    weakref.WeakKeyDictionary())


@dataclass(frozen=True, slots=True)
class RuleFlags:
    """What an agent's rules say about one call."""

    requires_confirmation: bool
    #: The rules that asked for a person, as the approver reads them.
    reason: str | None
    writes: bool
    connector: str
    #: What the rules in shadow mode that apply would have decided (nothing above counts
    #: them): the guarded path records these on the call's context.
    shadow: tuple[ShadowDecision, ...] = ()


def shadow_recorder(decisions: tuple[ShadowDecision, ...]) -> ShadowRecorder:
    """What a call carries for the guarded path to record ``decisions`` (the rules in shadow
    mode that apply to it) on its context: `GuardedCall.with_shadow`."""
    def record(ctx: HookContext, *, counted: bool = True) -> None:
        record_shadow(ctx, decisions, counted=counted)
    return record


def declared_tool(tool_name: str, context: Mapping[str, Any] | None) -> Tool | None:
    """The tool an external request was asked for, from the JSON schema its agent's runtime
    declared, or its hookgate declaration's (kept in the request's context as
    ``tool_schema``): an edit is checked and converted by its types; None without one, so an
    edit is refused (approvals/edits.py)."""
    schema = (context or {}).get(TOOL_SCHEMA_KEY)
    if not isinstance(schema, Mapping) or schema.get("type") != "object":
        return None
    return SchemaTool(name=tool_name,
                      description=str((context or {}).get("tool_description") or ""),
                      parameters=dict(schema), _fn=_never_run)


def probe_context(name: str, args: dict[str, Any], agent: Agent, user_id: str | None,
                  metadata: dict[str, Any]) -> HookContext:
    # The rules are read before the call is traced: a `when` over provenance applies.
    return HookContext(hook_point=HookPoint.PRE_TOOL_USE, tool_name=name, tool_args=args,
                       agent_id=agent.id, user_id=user_id,
                       metadata={**metadata, PROVENANCE_KEY: NOT_TRACED})


def _rule(where: str, entry: object, keys: RuleKeys, named: str) -> ToolRule:
    if not isinstance(entry, Mapping):
        raise HookBuildError(f"{where} must be a mapping")
    known = _RULE_KEYS | set(keys)
    unknown = sorted(str(k) for k in entry if k not in known)
    if unknown:
        raise HookBuildError(f"{where}: unknown keys {', '.join(unknown)} (known: "
                             f"{', '.join(sorted(known))})")
    try:
        matcher = ToolMatcher.parse(entry.get("matcher"))
        when = Condition(entry["when"]) if entry.get("when") is not None else None
        tests = tuple(parse(entry[key]) for key, parse in keys.items() if key in entry)
    except HookBuildError as exc:
        raise HookBuildError(f"{where}: {exc}") from None
    flags = {}
    for key in ("requires_confirmation", "writes"):
        value = entry.get(key)
        if value is not None and not isinstance(value, bool):
            raise HookBuildError(f"{where}: '{key}' must be true or false")
        flags[key] = value
    connector = entry.get("connector")
    if connector is not None and (not isinstance(connector, str) or not connector):
        raise HookBuildError(f"{where}: 'connector' must be a non-empty string")
    reason = entry.get("reason")
    if reason is not None and (not isinstance(reason, str) or not reason.strip()
                               or len(reason) > REASON_CHARS):
        raise HookBuildError(f"{where}: 'reason' must be a non-empty string of at most "
                             f"{REASON_CHARS} characters")
    mode = mode_of(entry.get("mode"), where, entry)
    return ToolRule(matcher, when, flags["requires_confirmation"], flags["writes"], connector,
                    tests, _described(named, entry, reason), mode,
                    reason.strip() if reason else None, named)


def _described(named: str, entry: Mapping[str, Any], reason: str | None) -> str:
    # "claude_code.rules[0] of agent 'coder' (matcher Bash, command git push): why".
    shown = [f"{key} {_shown(value)}" for key, value in entry.items()
             if key not in ("requires_confirmation", "writes", "connector", "reason", "mode")
             and value is not None]
    what = f" ({', '.join(shown)})" if shown else ""
    said = f": {reason.strip()}" if reason else ""
    return f"{named}{what}{said}"


def _shown(value: object) -> str:
    # [[git, push], [rm, -rf]] reads "git push | rm -rf".
    if isinstance(value, list) and any(isinstance(v, list) for v in value):
        return " | ".join(_shown(v) for v in value)
    if isinstance(value, list):
        return " ".join(str(v) for v in value)
    return str(value)
