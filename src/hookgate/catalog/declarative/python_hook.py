"""Python hooks: a function ``module:function`` gets the hook input as a dict and returns
the answer as a dict (or None to allow).

The function may be async, or sync (then it runs in a worker thread so it cannot stall the
event loop; a thread cannot be killed, so on a timeout the call is abandoned, not stopped).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from hookgate.catalog.catalog import import_target
from hookgate.catalog.declarative.protocol import HookReply, reply_from_value
from hookgate.hooks.errors import HookBuildError
from hookgate.hooks.model import HookPoint

#: Keys a python hook entry takes besides the common ones.
KEYS = frozenset({"function"})


@dataclass(frozen=True, slots=True)
class PythonCallable:
    """Calls ``function(payload)``; ``target`` is how it was declared."""

    kind: ClassVar[str] = "python"
    target: str
    function: Callable[[dict[str, Any]], Any]
    cwd: str | None = None

    @classmethod
    def from_declaration(cls, entry: Mapping[str, Any]) -> PythonCallable:
        target = entry.get("function")
        if not isinstance(target, str) or ":" not in target:
            raise HookBuildError("a python hook needs 'function', given as 'module:function'")
        try:
            function = import_target(target)
        except ImportError as exc:
            raise HookBuildError(f"'{target}' cannot be imported: {exc}") from None
        except Exception as exc:
            raise HookBuildError(
                f"importing '{target}' raised {type(exc).__name__}: {exc}"
            ) from None
        if isinstance(function, type):
            raise HookBuildError(
                f"'{target}' is a class; a hook class goes under class_hooks, a python hook "
                "names a function"
            )
        if not callable(function):
            raise HookBuildError(f"'{target}' is not callable")
        return cls(target, function)

    async def ask(self, payload: dict[str, Any], point: HookPoint) -> HookReply:
        if inspect.iscoroutinefunction(self.function):
            value = await self.function(payload)
        else:
            value = await asyncio.to_thread(self.function, payload)
            if inspect.isawaitable(value):
                value = await value
        return reply_from_value(value)

    def describe(self) -> str:
        return f"function={self.target!r}"
