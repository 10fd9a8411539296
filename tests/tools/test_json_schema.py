"""An outside schema's check says what ``jsonschema`` says, for every schema and value: the
check compiled for flat object schemas (decision record 0040) only ever answers "valid"
where ``jsonschema`` finds no error, and every refusal keeps ``jsonschema``'s words."""

from __future__ import annotations

import json
import random
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest

from hookgate.tools.json_schema import _checks_of, schema_problem

#: As pydantic and the MCP SDKs write a tool's schema (mcp-server-time's output schema).
FLAT = {"properties": {"timezone": {"title": "Timezone", "type": "string"},
                       "datetime": {"title": "Datetime", "type": "string",
                                    "format": "date-time"},
                       "is_dst": {"title": "Is Dst", "type": "boolean"},
                       "count": {"type": "integer", "description": "how many"},
                       "ratio": {"type": "number", "default": 1.5},
                       "nothing": {"type": "null"}},
        "required": ["timezone", "is_dst"], "title": "TimeResult", "type": "object"}
CLOSED = {**FLAT, "additionalProperties": False}
DECLARED = {**FLAT, "$schema": "https://json-schema.org/draft/2020-12/schema"}
#: Shapes the compiled check leaves to jsonschema alone.
OTHERS: list[dict[str, Any]] = [
    {**FLAT, "$schema": "http://json-schema.org/draft-04/schema#"},
    {**FLAT, "properties": {**FLAT["properties"], "tz": {"type": "string", "enum": ["UTC"]}}},
    {**FLAT, "properties": {"tz": {"type": ["string", "null"]}}},
    {**FLAT, "properties": {"tz": {"anyOf": [{"type": "string"}, {"type": "null"}]}}},
    {**FLAT, "properties": {"tz": {"type": "string", "minLength": 2}}},
    {**FLAT, "properties": {"inner": {"type": "object",
                                      "properties": {"a": {"type": "integer"}}}}},
    {**FLAT, "additionalProperties": {"type": "integer"}},
    {**FLAT, "minProperties": 3},
    {"type": "object", "properties": {"a": {"$ref": "#/$defs/a"}},
     "$defs": {"a": {"type": "integer"}}},
    {"properties": {"a": {"type": "integer"}}},
    {"type": "object", "properties": {"a": True}},
]
SCALARS: list[Any] = ["UTC", "", "2026-12-07T08:53:21+00:00", "not a date", 0, 1, -7, 2**70,
                      1.0, 1.5, -0.0, True, False, None, [], ["UTC"], {}, {"a": 1}]
KEYS = ["timezone", "datetime", "is_dst", "count", "ratio", "nothing", "tz", "inner", "a",
        "extra"]


def jsonschema_says(given: dict[str, Any], value: Any) -> str | None:
    # What the check said before it had a compiled path: jsonschema's best match, over the
    # schema as the check holds it (keys sorted: the order decides between equal matches).
    schema = json.loads(json.dumps(given, sort_keys=True))
    cls = jsonschema.validators.validator_for(schema,
                                              default=jsonschema.Draft202012Validator)
    error = jsonschema.exceptions.best_match(cls(schema).iter_errors(value))
    if error is None:
        return None
    where = ".".join(str(p) for p in error.absolute_path) or "(arguments)"
    return f"{where}: {error.message[:300]}"


def values() -> list[Any]:
    rng = random.Random(40)
    out: list[Any] = list(SCALARS)
    out.append({"timezone": "UTC", "is_dst": False})
    out.append({"timezone": "UTC", "is_dst": False, "extra": 1})
    out.append({"timezone": "UTC", "is_dst": 0})
    out.append({"timezone": "UTC", "is_dst": False, "count": 3.0})
    out.append({"timezone": "UTC", "is_dst": False, "count": True, "ratio": False})
    for _ in range(3000):
        keys = rng.sample(KEYS, rng.randint(0, 5))
        out.append({k: rng.choice(SCALARS) for k in keys})
    return out


@pytest.mark.parametrize("schema", [FLAT, CLOSED, DECLARED, *OTHERS],
                         ids=[f"schema{i}" for i in range(3 + len(OTHERS))])
def test_every_value_is_judged_as_jsonschema_judges_it(schema: dict[str, Any]) -> None:
    for value in values():
        assert schema_problem(schema, value, whose="the server's input") \
            == jsonschema_says(schema, value), value


def test_a_flat_tool_schema_is_checked_without_jsonschema_when_it_holds() -> None:
    # The fast answer is there for the shape MCP servers list (else this change pays nothing).
    assert _checks_of(FLAT).flat is not None
    assert _checks_of(CLOSED).flat is not None
    assert all(_checks_of(schema).flat is None for schema in OTHERS)


def test_an_invalid_schema_is_still_named_as_invalid() -> None:
    broken = {"type": "object", "properties": {"a": {"type": "strin"}}}
    problem = schema_problem(broken, {"a": "x"}, whose="the server's input")
    assert problem is not None and problem.startswith("the server's input schema is invalid")
