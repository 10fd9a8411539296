"""Arguments checked against a JSON schema that came from outside hookgate (an MCP server's
input schema, the parameters an outside agent declares): one validator cache and one wording
of what is wrong, for every tool whose parameters are such a schema.

``jsonschema`` decides. For the commonest shape of a tool's schema (an object of named
scalar properties, as pydantic and the MCP SDKs write them) a check compiled once per
schema (`_Flat`) answers "valid" first, in a few dictionary and type lookups; it only ever
answers "valid" where ``jsonschema`` would, and anything else — a schema outside that
shape, an instance it does not find valid — goes to ``jsonschema`` (decision record 0040).
"""

from __future__ import annotations

import functools
import json
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

#: Validators by the schema object they were built for (a tool's schema lives as long as the
#: tool): a call does not encode its schema again to find its validator.
_BY_SCHEMA: OrderedDict[int, tuple[Mapping[str, Any], _Checks]] = OrderedDict()
_BY_SCHEMA_MAX = 512


def schema_problem(schema: Mapping[str, Any], args: Any, *, whose: str) -> str | None:
    """What is wrong with ``args`` against ``schema`` ("amount: 'lots' is not of type
    'number'"), or None; a schema that cannot be applied (invalid, a bad pattern, an
    unresolvable or endless ``$ref``) is a problem too, named as ``whose`` schema."""
    # Imported on the first check, not with the module: every process that starts a
    # server or reads a configuration imports this module, few check an outside schema.
    import jsonschema  # type: ignore[import-untyped]

    try:
        checks = _checks_of(schema)
        if checks.flat is not None and checks.flat(args):
            return None
        error = jsonschema.exceptions.best_match(checks.validator.iter_errors(args))
    except jsonschema.exceptions.SchemaError as exc:
        return f"{whose} schema is invalid: {exc.message}"
    except Exception as exc:  # a bad pattern, an unresolvable or endless $ref, ...
        return f"{whose} schema cannot be applied ({type(exc).__name__})"
    if error is None:
        return None
    where = ".".join(str(p) for p in error.absolute_path) or "(arguments)"
    return f"{where}: {error.message[:300]}"  # the message may quote a huge value


class _Checks:
    """A schema's ``jsonschema`` validator, and its compiled flat check if it has one."""

    __slots__ = ("flat", "validator")

    def __init__(self, validator: Any, flat: Callable[[Any], bool] | None) -> None:
        self.validator = validator
        self.flat = flat


def _checks_of(schema: Mapping[str, Any]) -> _Checks:
    hit = _BY_SCHEMA.get(id(schema))
    if hit is not None and hit[0] is schema:  # held here, so its id is not reused meanwhile
        return hit[1]
    checks = _checks(json.dumps(schema, sort_keys=True))
    _BY_SCHEMA[id(schema)] = (schema, checks)
    while len(_BY_SCHEMA) > _BY_SCHEMA_MAX:
        _BY_SCHEMA.popitem(last=False)
    return checks


@functools.lru_cache(maxsize=512)
def _checks(schema_json: str) -> _Checks:
    import jsonschema

    schema = json.loads(schema_json)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    cls.check_schema(schema)  # an invalid schema is never compiled: jsonschema says so
    flat = _Flat.compiled(schema) if cls is jsonschema.Draft202012Validator else None
    return _Checks(cls(schema), flat)


#: Keywords that assert nothing in draft 2020-12 as ``jsonschema`` applies it (``format``
#: too: no format checker is given to the validators above).
_ANNOTATIONS = frozenset({"title", "description", "default", "examples", "$comment",
                          "deprecated", "readOnly", "writeOnly", "format"})
_DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"
#: A scalar ``type`` and the exact Python types of a JSON value that are surely of it
#: (stricter than ``jsonschema``, which also takes 1.0 as an integer: such a value simply
#: goes to it).
_SCALARS: dict[str, tuple[type, ...]] = {
    "string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,),
    "null": (type(None),),
}


class _Flat:
    """The check of an object schema whose properties are scalars of one type each:
    ``type: object``, ``properties``, ``required``, a boolean ``additionalProperties`` and
    annotations, nothing else at any level. True only when ``jsonschema`` finds no error."""

    __slots__ = ("closed", "properties", "required")

    def __init__(self, properties: dict[str, tuple[type, ...]], required: tuple[str, ...],
                 closed: bool) -> None:
        self.properties = properties
        self.required = required
        self.closed = closed

    @classmethod
    def compiled(cls, schema: Any) -> _Flat | None:
        """The check of ``schema`` (checked already by ``jsonschema``), or None when it is
        not of this shape."""
        if not isinstance(schema, dict) or schema.get("type") != "object":
            return None
        if set(schema) - _ANNOTATIONS - {"type", "properties", "required",
                                         "additionalProperties", "$schema"}:
            return None
        if schema.get("$schema", _DRAFT_2020_12) != _DRAFT_2020_12:
            return None
        properties: dict[str, tuple[type, ...]] = {}
        for name, sub in (schema.get("properties") or {}).items():
            if not isinstance(sub, dict) or set(sub) - _ANNOTATIONS - {"type"}:
                return None
            kind = sub.get("type")
            kinds = _SCALARS.get(kind) if isinstance(kind, str) else None
            if kinds is None:
                return None
            properties[name] = kinds
        required = schema.get("required") or []
        closed = schema.get("additionalProperties", True)
        if not isinstance(closed, bool) or not all(isinstance(r, str) for r in required):
            return None
        return cls(properties, tuple(required), not closed)

    def __call__(self, instance: Any) -> bool:
        if type(instance) is not dict:
            return False
        for name in self.required:
            if name not in instance:
                return False
        properties = self.properties
        for name, value in instance.items():
            kinds = properties.get(name)
            if kinds is None:
                if self.closed:
                    return False
            elif type(value) not in kinds:
                return False
        return True
