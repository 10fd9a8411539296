"""Whether telemetry is on, and the tracer and meter when it is.

Telemetry is on when a real (SDK) tracer or meter provider is installed, by hookgate's
``telemetry:`` setup, by ``opentelemetry-instrument`` or by the embedding application, and
``OTEL_SDK_DISABLED`` is not true. The answer is cached in ``SWITCH.on`` and refreshed when a
run starts or a hook is registered, so a tool call pays one attribute read when it is off.
OpenTelemetry is not even imported until something else has imported it.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from opentelemetry.metrics import Meter
    from opentelemetry.trace import Tracer

#: The instrumentation scope every hookgate span and metric is reported under.
SCOPE = "hookgate"

_TRUE = frozenset({"true", "1", "yes", "on"})
#: Values of OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT that put content on spans.
_CAPTURE_ON_SPANS = frozenset({"true", "span_only", "span_and_event"})


class _Switch:
    __slots__ = ("capture_content", "mask_patterns", "on")

    def __init__(self) -> None:
        self.on = False
        #: Set by ``telemetry: {capture_content: true}``; the env vars can also turn it on.
        self.capture_content = False
        #: Extra secret-key patterns (``telemetry: {mask_patterns: [...]}``) masked in
        #: captured arguments, on top of the defaults every card and audit row masks.
        self.mask_patterns: tuple[str, ...] = ()


SWITCH = _Switch()


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("hookgate")
    except PackageNotFoundError:
        return "0"


def sdk_disabled() -> bool:
    return os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() in _TRUE


def refresh() -> bool:
    """Look again whether a real provider is installed; returns (and caches) the answer.

    Turning on also hands the hook registry the wrapper that traces each hook registered
    from then on (hookgate.hooks imports nothing of ours, so we set its seam).
    """
    on = _providers_installed() and not sdk_disabled()
    if on != SWITCH.on:
        from hookgate.hooks import registry
        from hookgate.telemetry.hooks import traced_execute
        from hookgate.telemetry.instruments import instruments

        registry.instrument = traced_execute if on else None
        instruments.cache_clear()  # made again from the provider now installed
    SWITCH.on = on
    return on


def _providers_installed() -> bool:
    # Nobody can have set a provider through an API that was never imported (the
    # OTEL_PYTHON_*_PROVIDER variables load one on first use, so they count too).
    env = os.environ
    if ("opentelemetry.trace" not in sys.modules and "opentelemetry.metrics" not in sys.modules
            and "OTEL_PYTHON_TRACER_PROVIDER" not in env
            and "OTEL_PYTHON_METER_PROVIDER" not in env):
        return False
    from opentelemetry import metrics, trace

    # The API's own providers (proxies until one is set, no-ops) are defined in the API
    # packages; anything else is a real provider (the SDK's or a vendor's).
    return not (_from_api(trace.get_tracer_provider(), "opentelemetry.trace")
                and _from_api(metrics.get_meter_provider(), "opentelemetry.metrics"))


def _from_api(provider: object, package: str) -> bool:
    return type(provider).__module__.startswith(package)


def capture_content() -> bool:
    """Whether tool arguments and results go on spans (opt-in, as the GenAI conventions say).

    Either ``telemetry: {capture_content: true}``, or both standard variables:
    ``OTEL_SEMCONV_STABILITY_OPT_IN`` naming ``gen_ai_latest_experimental`` and
    ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` (true / SPAN_ONLY / SPAN_AND_EVENT).
    """
    if SWITCH.capture_content:
        return True
    opt_in = {v.strip() for v in os.environ.get("OTEL_SEMCONV_STABILITY_OPT_IN", "").split(",")}
    mode = os.environ.get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "")
    return "gen_ai_latest_experimental" in opt_in and mode.strip().lower() in _CAPTURE_ON_SPANS


def tracer() -> Tracer:
    from opentelemetry import trace

    return trace.get_tracer(SCOPE, _version())


def meter() -> Meter:
    from opentelemetry import metrics

    return metrics.get_meter(SCOPE, _version())
