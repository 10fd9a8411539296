"""A channel's settings as pydantic models, one per platform under a union keyed by ``type``.

`parse_settings` checks a channel's ``config`` mapping against its type's model and returns
the typed settings; every error is a `ChannelConfigError` that names the setting and says
where to find it ("feishu channel: config is missing 'app_id' (the app's App ID, cli_...)").
The platform packages declare their models on `ChannelSettingsModel`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import (
    BaseModel,
    ConfigDict,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails

from hookgate.channels.base import ChannelConfigError
from hookgate.channels.masking import secret_patterns
from hookgate.channels.retry_policy import RetryPolicy


class ChannelSettingsModel(BaseModel):
    """What every channel type's settings share: the API's base URL, extra secret-key
    patterns to mask on cards (``mask_patterns``) and the delivery ``retry`` policy.

    Values are taken as the types they are (``"yes"`` is not a boolean); an empty or
    blank required setting counts as missing; an empty optional one takes its default.
    """

    model_config = ConfigDict(strict=True, frozen=True, extra="ignore",
                              arbitrary_types_allowed=True)

    type: str
    #: Where ``base_url`` points when the config does not say.
    default_base_url: ClassVar[str] = ""

    base_url: str = ""
    mask_patterns: tuple[str, ...] = secret_patterns()
    retry: RetryPolicy = RetryPolicy()

    @model_validator(mode="before")
    @classmethod
    def _unset_empty(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            raise ValueError("config must be a mapping")
        required = {name for name, f in cls.model_fields.items() if f.is_required()}
        return {k: v for k, v in data.items()
                if not (v is None or v == "" or (k in required and isinstance(v, str)
                                                 and not v.strip()))}

    @field_validator("base_url", mode="before")
    @classmethod
    def _http_url(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        if not value.startswith(("https://", "http://")):
            raise ValueError(f"'base_url' must be an http(s) URL, got {value!r}")
        return value

    @field_validator("mask_patterns", mode="before")
    @classmethod
    def _with_default_patterns(cls, value: Any) -> tuple[str, ...]:
        if not isinstance(value, list | tuple) or not all(isinstance(p, str) for p in value):
            raise ValueError("'mask_patterns' must be a list of strings")
        return secret_patterns(value)

    @field_validator("retry", mode="before")
    @classmethod
    def _retry_policy(cls, value: Any) -> RetryPolicy:
        if isinstance(value, RetryPolicy):
            return value
        try:
            return RetryPolicy.from_config("", value)
        except ChannelConfigError as exc:
            raise ValueError(str(exc).removeprefix(" channel: ")) from None

    def model_post_init(self, context: Any) -> None:
        if not self.base_url:
            object.__setattr__(self, "base_url", self.default_base_url)


def parse_settings(model: type[ChannelSettingsModel], channel_type: str,
                   config: Mapping[str, Any], union: TypeAdapter[Any] | None = None) -> Any:
    """``config`` checked as a ``channel_type`` channel's settings (the ``model``; through
    ``union``, the discriminated union of every type's model, when given)."""
    if not isinstance(config, Mapping):
        raise ChannelConfigError(f"{channel_type} channel: config must be a mapping")
    data = {**config, "type": channel_type}
    try:
        return model.model_validate(data) if union is None else union.validate_python(data)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        if first["loc"][:1] == (channel_type,):  # the union's tag
            first["loc"] = first["loc"][1:]
        raise ChannelConfigError(f"{channel_type} channel: {_say(model, first)}") from None


def _say(model: type[ChannelSettingsModel], error: ErrorDetails) -> str:
    """One pydantic error in the words of a person editing the configuration file."""
    name = ".".join(str(part) for part in error["loc"]) or "config"
    kind, given = error["type"], error.get("input")
    if kind == "missing":
        field = model.model_fields.get(name)
        where = f" ({field.description})" if field is not None and field.description else ""
        return f"config is missing '{name}'{where}"
    if kind == "string_type":
        return f"'{name}' must be a string, got {type(given).__name__}"
    if kind == "bool_type":
        return f"'{name}' must be true or false, got {given!r}"
    if kind in ("int_type", "int_parsing", "float_type"):
        return f"'{name}' must be a number, got {given!r}"
    if kind == "value_error":
        return str(error["msg"]).removeprefix("Value error, ")
    return f"'{name}': {error['msg']}"
