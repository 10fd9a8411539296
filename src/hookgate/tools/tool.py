"""Tools: a name, a description, a JSON schema, the flags hooks read, and the callable.

The callable is private on purpose: the only place that invokes it is the guarded path
(`hookgate.tools.guarded`), so every call passes the hooks.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, get_type_hints, overload

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from hookgate.canonical import NotCanonicalJSON, canonical_sha256
from hookgate.tools.arguments import (
    ArgumentsRefused,
    check_arguments,
    first_non_finite,
    plain_scalars,
    refusal_of,
    screened,
)
from hookgate.tools.errors import ToolArgumentsError, ToolDefinitionError

ConfirmationRule = bool | Callable[[Mapping[str, Any]], bool]
ToolFunction = Callable[..., Any] | Callable[..., Awaitable[Any]]


def args_digest(args: Mapping[str, Any]) -> str:
    """sha256 of the canonical JSON (RFC 8785) of ``args``: what a person approves is pinned
    by this. Raises ArgumentsRefused for arguments JSON cannot say exactly (NaN, a lone
    surrogate, an integer past 2**53), which the arguments boundary refuses already."""
    try:
        return canonical_sha256(args)
    except NotCanonicalJSON as exc:
        raise ArgumentsRefused(f"the arguments cannot be pinned for approval: {exc}") from None


def legacy_args_digest(args: Mapping[str, Any]) -> str | None:
    """The digest hookgate before RFC 8785 pinned ``args`` with (sorted keys, no spaces,
    text unescaped, other objects as ``str``), or None when it had none. Only for telling
    a request stored before the upgrade from a different call; it never authorises one."""
    try:
        text = json.dumps(args, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                          default=str)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()
    except (TypeError, ValueError, RecursionError):
        return None


@dataclass(eq=False)
class Tool:
    """A callable the model may pick, with the flags the hooks read."""

    name: str
    description: str
    parameters: dict[str, Any]
    _fn: ToolFunction = field(repr=False)
    requires_confirmation: ConfirmationRule = False
    connector: str | None = None
    writes: bool = False
    _args_model: type[BaseModel] | None = field(default=None, repr=False)
    #: Words for the approver saying why this tool needs a person (e.g. "payments above
    #: 50,000"); shown on every approval card when the tool's own rule asked.
    confirmation_reason: str | None = None
    #: The tool's output is untrusted content (an email, a web page, a file, a review that
    #: anyone may have written): argument values found only there are traced as untrusted
    #: (hookgate.provenance).
    untrusted_output: bool = False

    def __post_init__(self) -> None:
        if not self.name or not isinstance(self.name, str):
            raise ToolDefinitionError("a tool needs a non-empty string name")
        if self.connector is None and "__" in self.name:
            self.connector = self.name.split("__", 1)[0]

    def needs_confirmation(self, args: Mapping[str, Any]) -> bool:
        """The tool's own rule (flag or predicate) for these arguments.

        A predicate that raises counts as "needs confirmation": a rule that cannot be
        evaluated must not wave a call through.
        """
        rule = self.requires_confirmation
        if callable(rule):
            try:
                return bool(rule(args))
            except Exception:
                return True
        return bool(rule)

    def validate(self, args: Any) -> dict[str, Any]:
        """Check ``args`` against the parameters; return them in canonical JSON form.

        Non-finite numbers (NaN, ±Infinity, also from strings such as "NaN" that a float
        parameter would coerce), lone surrogates and over-deep or oversized arguments are
        refused, before and after coercion: a predicate such as ``amount > 50_000`` is
        false for NaN, and what a person is shown must be what runs.
        """
        if not isinstance(args, dict):
            raise ToolArgumentsError(
                f"arguments for '{self.name}' must be a JSON object, got {type(args).__name__}"
            )
        refused = refusal_of(args)
        if refused is not None:
            raise ToolArgumentsError(f"invalid arguments for '{self.name}': refused: {refused}")
        if self._args_model is None:
            return _validate_with_schema(self.name, self.parameters, self._admissible(args))
        try:
            model = self._args_model.model_validate(args)
        except ValidationError as exc:
            raise ToolArgumentsError(_explain(self.name, exc)) from None
        # The Python values, not the JSON dump: a nested model would dump a NaN as null.
        dumped = model.model_dump(mode="json", by_alias=True)
        if not plain_scalars(model.__dict__) and not screened(
                model.model_dump(by_alias=True), objects=True):
            bad = first_non_finite(model.model_dump(by_alias=True))
            if bad is not None:
                raise ToolArgumentsError(f"invalid arguments for '{self.name}': refused: {bad} "
                                         "is not a finite number; only finite numbers are "
                                         "accepted")
            self._admissible(dumped)
        return dumped

    def _admissible(self, args: dict[str, Any]) -> dict[str, Any]:
        try:
            check_arguments(args)
        except ArgumentsRefused as exc:
            raise ToolArgumentsError(
                f"invalid arguments for '{self.name}': refused: {exc}") from None
        return args

    def schema(self) -> dict[str, Any]:
        """The OpenAI-style function description of this tool."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }

    async def _invoke(self, args: dict[str, Any]) -> Any:
        # Called only by the guarded path (enforced by tests/test_architecture.py).
        if self._args_model is not None:
            model = self._args_model.model_validate(args)
            kwargs = {f.alias or k: getattr(model, k) for k, f in type(model).model_fields.items()}
        else:
            kwargs = dict(args)
        result = self._fn(**kwargs)
        if inspect.isawaitable(result):
            result = await result
        return result


def _explain(name: str, exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(x) for x in err["loc"]) or "(arguments)"
        parts.append(f"{loc}: {err['msg']}")
    return f"invalid arguments for '{name}': " + "; ".join(parts)


def _validate_with_schema(
    name: str, schema: dict[str, Any], args: dict[str, Any]
) -> dict[str, Any]:
    # Tools built by hand with a raw JSON schema get the checks that matter for safety:
    # required keys present and no unknown keys.
    props = schema.get("properties", {}) or {}
    missing = [k for k in schema.get("required", []) or [] if k not in args]
    unknown = [k for k in args if props and k not in props]
    if missing or unknown:
        bits = []
        if missing:
            bits.append("missing " + ", ".join(missing))
        if unknown:
            bits.append("unknown " + ", ".join(unknown))
        raise ToolArgumentsError(f"invalid arguments for '{name}': " + "; ".join(bits))
    return dict(args)


def _model_for(fn: Callable[..., Any], name: str) -> type[BaseModel]:
    try:
        hints = get_type_hints(fn)
    except Exception as exc:
        raise ToolDefinitionError(f"tool '{name}': cannot read type hints: {exc}") from exc
    fields: dict[str, Any] = {}
    for i, (pname, param) in enumerate(inspect.signature(fn).parameters.items()):
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise ToolDefinitionError(
                f"tool '{name}': parameter '{pname}' must be passable by keyword "
                "(no *args, **kwargs or positional-only parameters)"
            )
        if pname not in hints:
            raise ToolDefinitionError(f"tool '{name}': parameter '{pname}' needs a type hint")
        default = ... if param.default is inspect.Parameter.empty else param.default
        # Neutral field names with the parameter name as alias: a parameter may then be
        # called anything (json, schema, model_config, _draft) without clashing with
        # pydantic's own attributes or being taken for a private one.
        fields[f"p{i}"] = (hints[pname], Field(default, alias=pname))
    model: type[BaseModel] = create_model(
        f"{name}_args", __config__=ConfigDict(extra="forbid", allow_inf_nan=False), **fields
    )
    return model


def _make_tool(
    fn: ToolFunction,
    *,
    name: str | None,
    description: str | None,
    requires_confirmation: ConfirmationRule,
    connector: str | None,
    writes: bool,
    confirmation_reason: str | None = None,
    untrusted_output: bool = False,
) -> Tool:
    tool_name = name or getattr(fn, "__name__", None)
    if not tool_name:
        raise ToolDefinitionError("cannot infer a tool name; pass name=...")
    try:
        model = _model_for(fn, tool_name)
        schema = model.model_json_schema()
    except ToolDefinitionError:
        raise
    except Exception as exc:  # pydantic cannot model or describe a parameter's type
        raise ToolDefinitionError(
            f"tool '{tool_name}': cannot describe its parameters: {exc}") from exc
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    doc = description if description is not None else inspect.getdoc(fn) or ""
    return Tool(
        name=tool_name,
        description=doc.strip(),
        parameters=schema,
        _fn=fn,
        requires_confirmation=requires_confirmation,
        connector=connector,
        writes=writes,
        _args_model=model,
        confirmation_reason=confirmation_reason,
        untrusted_output=untrusted_output,
    )


@overload
def tool(fn: ToolFunction, /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    requires_confirmation: ConfirmationRule = False,
    connector: str | None = None,
    writes: bool = False,
    confirmation_reason: str | None = None,
    untrusted_output: bool = False,
) -> Callable[[ToolFunction], Tool]: ...


def tool(
    fn: ToolFunction | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    requires_confirmation: ConfirmationRule = False,
    connector: str | None = None,
    writes: bool = False,
    confirmation_reason: str | None = None,
    untrusted_output: bool = False,
) -> Tool | Callable[[ToolFunction], Tool]:
    """Turn a typed (async or sync) function into a Tool.

    ``@tool`` or ``@tool(requires_confirmation=lambda a: a["amount"] > 50_000, writes=True)``.
    Parameters come from the type hints; the docstring is the description;
    ``confirmation_reason`` tells the approver in words why the rule asks for a person;
    ``untrusted_output``: what the tool returns is untrusted content (hookgate.provenance).
    """

    def wrap(f: ToolFunction) -> Tool:
        return _make_tool(
            f,
            name=name,
            description=description,
            requires_confirmation=requires_confirmation,
            connector=connector,
            writes=writes,
            confirmation_reason=confirmation_reason,
            untrusted_output=untrusted_output,
        )

    if fn is not None:
        return wrap(fn)
    return wrap
