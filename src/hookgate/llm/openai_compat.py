"""`OpenAICompatibleModel`: a ChatModel for any endpoint that speaks chat completions.

OpenAI, vLLM, Ollama, DeepSeek and the like all accept the same request with ``tools=``
and answer with ``tool_calls``; this client turns that reply into a ModelTurn, and every
way the endpoint can fail into a ModelError that names the endpoint and the cause.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from hookgate.llm.base import Message, ModelError, ModelTurn, ResponseInfo
from hookgate.telemetry.models import traced_chat
from hookgate.telemetry.propagation import with_trace_headers
from hookgate.tools.arguments import ArgumentsRefused, parse_arguments, refused_arguments
from hookgate.tools.calls import ToolCall

if TYPE_CHECKING:
    import openai

ENV_BASE_URL = "HOOKGATE_LLM_BASE_URL"
ENV_API_KEY = "HOOKGATE_LLM_API_KEY"
ENV_MODEL = "HOOKGATE_LLM_MODEL"

DEFAULT_TIMEOUT_S = 60.0


def _setting(value: str | None, env_var: str, what: str, env: Mapping[str, str]) -> str:
    chosen = value if value else env.get(env_var, "")
    if not chosen:
        raise ModelError(f"OpenAI-compatible model: no {what}; pass it or set {env_var}")
    return chosen


class OpenAICompatibleModel:
    """Chat completions with tool calls, through the official ``openai`` client.

    ``base_url``, ``api_key`` and ``model`` fall back to ``HOOKGATE_LLM_BASE_URL``,
    ``HOOKGATE_LLM_API_KEY`` and ``HOOKGATE_LLM_MODEL``. An endpoint that needs no key
    (a local vLLM or Ollama) still needs a non-empty one; any string will do.
    """

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        model: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT_S,
        extra_headers: Mapping[str, str] | None = None,
        max_retries: int = 2,
        env: Mapping[str, str] | None = None,
    ) -> None:
        environ = os.environ if env is None else env
        self.base_url = _setting(base_url, ENV_BASE_URL, "base URL", environ)
        self.model = _setting(model, ENV_MODEL, "model name", environ)
        self.timeout = timeout
        # The openai package takes about half a second to import: only a process that
        # talks to such a model pays for it (not `import hookgate`, not the CLI's --help).
        from openai import AsyncOpenAI

        self._client = AsyncOpenAI(
            base_url=self.base_url,
            api_key=_setting(api_key, ENV_API_KEY, "API key", environ),
            timeout=timeout,
            max_retries=max_retries,
            default_headers=dict(extra_headers or {}),
        )

    def __repr__(self) -> str:
        return f"<OpenAICompatibleModel {self.model!r} at {self.base_url}>"

    async def aclose(self) -> None:
        """Close the HTTP connections (the model can no longer be used afterwards)."""
        await self._client.close()

    @property
    def endpoint(self) -> str:
        """How errors name this endpoint: the model and the base URL."""
        return f"model '{self.model}' at {self.base_url}"

    @traced_chat("openai")
    async def complete(self, messages: list[Message], tools: list[dict[str, Any]]) -> ModelTurn:
        import openai  # loaded by __init__ already; this only binds the name

        try:
            completion = await self._client.chat.completions.create(
                model=self.model,
                # Messages are already OpenAI-shaped dicts (engines/driver.py builds them).
                messages=cast(Any, messages),
                tools=cast(Any, tools) if tools else openai.omit,
                extra_headers=with_trace_headers({}) or None,
            )
        except openai.APITimeoutError as exc:
            raise ModelError(
                f"{self.endpoint}: no reply within {self.timeout:g}s ({exc})"
            ) from exc
        except openai.APIConnectionError as exc:
            cause = exc.__cause__ or exc
            raise ModelError(f"{self.endpoint}: cannot connect: {cause}") from exc
        except openai.APIStatusError as exc:
            raise ModelError(
                f"{self.endpoint}: HTTP {exc.status_code}: {_status_detail(exc)}"
            ) from exc
        except openai.OpenAIError as exc:
            raise ModelError(f"{self.endpoint}: {type(exc).__name__}: {exc}") from exc
        try:
            return _parse_completion(completion)
        except ModelError as exc:
            raise ModelError(f"{self.endpoint}: malformed reply: {exc}") from exc
        except (AttributeError, TypeError, ValueError, IndexError) as exc:
            raise ModelError(
                f"{self.endpoint}: malformed reply: {type(exc).__name__}: {exc}"
            ) from exc


def _status_detail(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, Mapping):
        err = body.get("error", body)
        if isinstance(err, Mapping) and err.get("message"):
            return str(err["message"])
    return str(exc.message)


def _parse_completion(completion: Any) -> ModelTurn:
    choices = getattr(completion, "choices", None)
    if not choices:
        raise ModelError("the reply has no choices")
    message = getattr(choices[0], "message", None)
    if message is None:
        raise ModelError("the first choice has no message")
    content = message.content if isinstance(message.content, str) else None
    calls = [_parse_tool_call(raw, i) for i, raw in enumerate(message.tool_calls or [])]
    info = _response_info(completion, choices)
    if calls:
        return ModelTurn(tool_calls=calls, content=content, response=info)
    return ModelTurn(answer=content or "", content=content, response=info)


def _response_info(completion: Any, choices: Any) -> ResponseInfo:
    # Endpoints differ in what they fill in; take only values of the expected types.
    usage = getattr(completion, "usage", None)

    def count(name: str) -> int | None:
        value = getattr(usage, name, None)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    def string(value: Any) -> str | None:
        return value if isinstance(value, str) and value else None

    reasons = tuple(r for c in choices if (r := string(getattr(c, "finish_reason", None))))
    return ResponseInfo(id=string(getattr(completion, "id", None)),
                        model=string(getattr(completion, "model", None)),
                        finish_reasons=reasons, input_tokens=count("prompt_tokens"),
                        output_tokens=count("completion_tokens"))


def _parse_tool_call(raw: Any, index: int) -> ToolCall:
    function: Any = getattr(raw, "function", None)
    name = getattr(function, "name", None)
    if not isinstance(name, str) or not name:
        raise ModelError(f"tool call {index} has no function name")
    return ToolCall(id=str(raw.id or ""), name=name, args=_decode_arguments(function.arguments))


def _decode_arguments(raw: Any) -> Any:
    # Arguments that cannot be admitted (not JSON, NaN, 1e400, 300 levels deep, a lone
    # surrogate) become the refusal stand-in: the guarded path then refuses the call with
    # an observation the model can read, instead of the whole run failing on one bad call.
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}
    if not isinstance(raw, str):
        return raw
    try:
        return parse_arguments(raw)
    except ArgumentsRefused as exc:
        return refused_arguments(str(exc))
