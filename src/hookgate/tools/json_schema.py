"""Arguments checked against a JSON schema that came from outside hookgate (an MCP server's
input schema, the parameters an outside agent declares): one validator cache and one wording
of what is wrong, for every tool whose parameters are such a schema.
"""

from __future__ import annotations

import functools
import json
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

#: Validators by the schema object they were built for (a tool's schema lives as long as the
#: tool): a call does not encode its schema again to find its validator.
_BY_SCHEMA: OrderedDict[int, tuple[Mapping[str, Any], Any]] = OrderedDict()
_BY_SCHEMA_MAX = 512


def schema_problem(schema: Mapping[str, Any], args: Any, *, whose: str) -> str | None:
    """What is wrong with ``args`` against ``schema`` ("amount: 'lots' is not of type
    'number'"), or None; a schema that cannot be applied (invalid, a bad pattern, an
    unresolvable or endless ``$ref``) is a problem too, named as ``whose`` schema."""
    # Imported on the first check, not with the module: every process that starts a
    # server or reads a configuration imports this module, few check an outside schema.
    import jsonschema  # type: ignore[import-untyped]

    try:
        error = jsonschema.exceptions.best_match(_validator_of(schema).iter_errors(args))
    except jsonschema.exceptions.SchemaError as exc:
        return f"{whose} schema is invalid: {exc.message}"
    except Exception as exc:  # a bad pattern, an unresolvable or endless $ref, ...
        return f"{whose} schema cannot be applied ({type(exc).__name__})"
    if error is None:
        return None
    where = ".".join(str(p) for p in error.absolute_path) or "(arguments)"
    return f"{where}: {error.message[:300]}"  # the message may quote a huge value


def _validator_of(schema: Mapping[str, Any]) -> Any:
    hit = _BY_SCHEMA.get(id(schema))
    if hit is not None and hit[0] is schema:  # held here, so its id is not reused meanwhile
        return hit[1]
    validator = _validator(json.dumps(schema, sort_keys=True))
    _BY_SCHEMA[id(schema)] = (schema, validator)
    while len(_BY_SCHEMA) > _BY_SCHEMA_MAX:
        _BY_SCHEMA.popitem(last=False)
    return validator


@functools.lru_cache(maxsize=512)
def _validator(schema_json: str) -> Any:
    import jsonschema

    schema = json.loads(schema_json)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    cls.check_schema(schema)
    return cls(schema)
