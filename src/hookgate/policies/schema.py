"""The Cedar schema of hookgate's requests: users in orgs, agents, one action per tool (in
the generic ``call_tool`` group), and each tool's arguments typed from its signature.

Argument types map from the tool's JSON schema: string → String, integer → Long, number →
decimal, boolean → Bool, array → Set, object → Record, ``X | None`` → optional X. An
argument whose type Cedar cannot say (a type that refers to itself, one nested too deep) is
left out of the schema and of the context.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import cedarpy

from hookgate.tools.tool import Tool

CALL_TOOL = "call_tool"
USER, ORG, AGENT = "User", "Org", "Agent"
#: The entity whose tags are each limit's figures (``context.limits.by_name``).
LIMITS = "Limits"
#: A Cedar type in the schema's JSON form, e.g. ``{"type": "Long"}``.
CedarType = dict[str, Any]

_SCALARS: dict[str, CedarType] = {
    "string": {"type": "String"},
    "integer": {"type": "Long"},
    "number": {"type": "Extension", "name": "decimal"},
    "boolean": {"type": "Boolean"},
}


def _record(attributes: Mapping[str, CedarType]) -> CedarType:
    return {"type": "Record", "attributes": dict(attributes)}


#: What every call's context holds besides the arguments (see facts.CallFacts).
CONTEXT_FACTS: dict[str, CedarType] = {
    "tool": {"type": "String"},
    "connector": {"type": "String"},
    "writes": {"type": "Boolean"},
    "requires_confirmation": {"type": "Boolean"},
    "org_read_only": {"type": "Boolean"},
    "execution_path": {"type": "String"},
    "depth": {"type": "Long"},
    "now": {"type": "Extension", "name": "datetime"},
    "hour": {"type": "Long"},
    # Provenance (hookgate.provenance): an argument value came only from untrusted content.
    "untrusted": {"type": "Boolean"},
    "untrusted_args": {"type": "Set", "element": {"type": "String"}},
    # Session-aware limits (catalog/builtin/session_limits.py, policies/facts.py LIMITS_KEY):
    # the limits that counted the call, and the tightest count and sum among them.
    "limits": _record({
        "names": {"type": "Set", "element": {"type": "String"}},
        "count_used": {"type": "Long", "required": False},
        "count_remaining": {"type": "Long", "required": False},
        "sum_used": {"type": "Extension", "name": "decimal", "required": False},
        "sum_remaining": {"type": "Extension", "name": "decimal", "required": False},
        # Each limit's own figures, a tag per limit name: by_name.getTag("transfers").
        "by_name": {"type": "Entity", "name": LIMITS},
    }),
}

_ENTITIES: dict[str, Any] = {
    ORG: {"shape": _record({"read_only": {"type": "Boolean"}})},
    USER: {"memberOfTypes": [ORG],
           "shape": _record({"admin": {"type": "Boolean"}, "role": {"type": "String"}})},
    AGENT: {"memberOfTypes": [ORG],
            "shape": _record({"audited": {"type": "Boolean"}, "owner": {"type": "String"}})},
    # One per request; its tags are the figures of each limit that counted the call.
    LIMITS: {"shape": _record({}), "tags": _record({
        "count_used": {"type": "Long"},
        "count_remaining": {"type": "Long", "required": False},
        "sum_used": {"type": "Extension", "name": "decimal", "required": False},
        "sum_remaining": {"type": "Extension", "name": "decimal", "required": False},
    })},
}


#: How deep argument types nest before Cedar is told nothing more (a deeper value is left
#: out, like any type Cedar cannot say).
MAX_TYPE_DEPTH = 16


def argument_type(schema: Mapping[str, Any], root: Mapping[str, Any],
                  _seen: frozenset[str] = frozenset(), _depth: int = 0) -> CedarType | None:
    """The Cedar type of one JSON-schema value, or None when Cedar cannot say it: a type
    that refers to itself (``$ref`` recursion), nests deeper than MAX_TYPE_DEPTH, or is
    not well formed."""
    if _depth > MAX_TYPE_DEPTH:
        return None
    ref = schema.get("$ref")
    if isinstance(ref, str):
        defs = root.get("$defs")
        name = ref.removeprefix("#/$defs/")
        if (not ref.startswith("#/$defs/") or ref in _seen or not isinstance(defs, Mapping)
                or not isinstance(defs.get(name), Mapping)):
            return None
        return argument_type(defs[name], root, _seen | {ref}, _depth + 1)
    options = schema.get("anyOf")
    if isinstance(options, list):
        kept = [o for o in options if isinstance(o, Mapping) and o.get("type") != "null"]
        if len(kept) != 1:
            return None
        found = argument_type(kept[0], root, _seen, _depth + 1)
        return None if found is None else {**found, "required": False}
    kind = schema.get("type")
    if isinstance(kind, str) and kind in _SCALARS:
        return dict(_SCALARS[kind])
    if kind == "array":
        items = schema.get("items")
        element = (argument_type(items, root, _seen, _depth + 1)
                   if isinstance(items, Mapping) else None)
        if element is None:
            return None
        element.pop("required", None)
        return {"type": "Set", "element": element}
    if kind == "object":
        return arguments_record(schema, root, _seen, _depth + 1)
    return None


def arguments_record(schema: Mapping[str, Any], root: Mapping[str, Any] | None = None,
                     _seen: frozenset[str] = frozenset(), _depth: int = 0) -> CedarType:
    """A JSON-schema object as a Cedar record: required keys as declared, the rest optional.
    A malformed schema (an agent's runtime declares it) gives the keys it can read."""
    root = root if root is not None else schema
    listed = schema.get("required")
    required = {r for r in listed if isinstance(r, str)} if isinstance(listed, list) else set()
    props = schema.get("properties")
    attributes: dict[str, CedarType] = {}
    for key, prop in (props.items() if isinstance(props, Mapping) else ()):
        found = (argument_type(prop, root, _seen, _depth)
                 if isinstance(prop, Mapping) and isinstance(key, str) else None)
        if found is None:
            continue
        if key not in required:
            found["required"] = False
        attributes[key] = found
    return _record(attributes)


def context_type(tool: Tool) -> CedarType:
    """The context of one tool's calls: the call's facts and the typed arguments."""
    return _record({**CONTEXT_FACTS, "args": arguments_record(tool.parameters)})


def action_entry(tool: Tool) -> dict[str, Any]:
    """The schema's action for calls of ``tool``, in the ``call_tool`` group."""
    return {"memberOf": [{"id": CALL_TOOL}],
            "appliesTo": {"principalTypes": [USER], "resourceTypes": [AGENT],
                          "context": context_type(tool)}}


def cedar_schema(tools: Iterable[Tool]) -> dict[str, Any]:
    """The Cedar schema (JSON form) for calls of ``tools``."""
    actions: dict[str, Any] = {CALL_TOOL: {}}
    for tool in sorted(tools, key=lambda t: t.name):
        actions[tool.name] = action_entry(tool)
    return {"": {"entityTypes": _ENTITIES, "actions": actions}}


def cedar_schema_text(tools: Iterable[Tool]) -> str:
    """The same schema in Cedar's own schema syntax (what `hookgate policy schema` prints)."""
    return str(cedarpy.Schema.from_json_str(json.dumps(cedar_schema(tools))))
