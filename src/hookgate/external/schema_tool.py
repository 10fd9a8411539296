"""A tool known only by the JSON schema its caller sends (a framework's tool that hookgate
does not declare): its arguments are checked against the schema and its scalar parameters
converted the way the engines convert a declared tool's (pydantic's lax mode), so
``"60000"`` for a number is 60000.0 and ``"lots"`` is refused with the reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import AllowInfNan, TypeAdapter, ValidationError

from hookgate.tools.errors import ToolArgumentsError
from hookgate.tools.json_schema import schema_problem
from hookgate.tools.tool import Tool

#: The lax conversions of the scalar JSON schema types, as a declared tool's model makes them.
_CONVERSIONS: dict[str, TypeAdapter[Any]] = {
    "integer": TypeAdapter(int),
    "number": TypeAdapter(Annotated[float, AllowInfNan(False)]),
    "boolean": TypeAdapter(bool),
    "string": TypeAdapter(str),
}


class SchemaTool(Tool):
    """A `Tool` whose parameters are a caller's JSON schema: validated and converted."""

    def validate(self, args: Any) -> dict[str, Any]:
        checked = super().validate(args)  # boundary: finite, no surrogates, bounded
        converted = _converted(self.parameters, checked)
        problem = schema_problem(self.parameters, converted, whose="the tool's")
        if problem is not None:
            raise ToolArgumentsError(f"invalid arguments for '{self.name}': {problem}")
        return self._admissible(converted)


def _converted(schema: Mapping[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    """``args`` with each top-level scalar parameter converted to its declared type (a value
    that does not convert stays as it is, and the schema check names it)."""
    props = schema.get("properties")
    if not isinstance(props, Mapping):
        return args
    out = dict(args)
    for name, value in args.items():
        prop = props.get(name)
        kind = prop.get("type") if isinstance(prop, Mapping) else None
        adapter = _CONVERSIONS.get(kind) if isinstance(kind, str) else None
        if adapter is None or value is None:
            continue
        try:
            out[name] = adapter.validate_python(value)
        except ValidationError:
            continue
    return out
