"""``${VAR}`` and ``${VAR:-default}`` in configuration strings, taken from the environment.

``$${`` stands for a literal ``${``. An unset variable without a default is an error that
names the key path, so a missing secret is found at load time rather than at first use.

References are hidden from the YAML parser and put back afterwards: SPEC §6 writes them
unquoted inside flow mappings (``{app_secret: ${SECRET}}``), where YAML would otherwise
read the ``{`` as the start of a mapping.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Mapping
from typing import Any

_REFERENCE = re.compile(r"\$(\$?)\{([^}\n]*)\}")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class UnsetVariable(Exception):
    """A ``${VAR}`` whose variable is not set (or is malformed), at ``key``."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


def key_path(parts: tuple[str | int, ...]) -> str:
    """``("agents", 0, "tools", 1)`` → ``agents[0].tools[1]``."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


class References:
    """Swaps each reference in a YAML text for a plain-word placeholder, and back."""

    def __init__(self) -> None:
        self._prefix = f"hookgateref{uuid.uuid4().hex[:8]}n"
        self._placeholder = re.compile(re.escape(self._prefix) + r"(\d+)x")
        self._originals: list[str] = []

    def hide(self, text: str) -> str:
        def swap(match: re.Match[str]) -> str:
            self._originals.append(match.group(0))
            return f"{self._prefix}{len(self._originals) - 1}x"

        return _REFERENCE.sub(swap, text)

    def restore(self, text: str) -> str:
        if not self._originals or self._prefix not in text:
            return text
        return self._placeholder.sub(lambda m: self._originals[int(m.group(1))], text)


def _expand_string(text: str, where: tuple[str | int, ...], env: Mapping[str, str]) -> str:
    def substitute(match: re.Match[str]) -> str:
        escaped, body = match.group(1), match.group(2)
        if escaped:
            return "${" + body + "}"
        name, sep, default = body.partition(":-")
        if not _NAME.fullmatch(name):
            raise UnsetVariable(key_path(where), f"'${{{body}}}' is not a valid variable "
                                "reference (use ${NAME} or ${NAME:-default})")
        if name in env:
            return env[name]
        if sep:
            return default
        raise UnsetVariable(key_path(where), f"environment variable {name} is not set "
                            f"(set it, or write ${{{name}:-default}})")

    return _REFERENCE.sub(substitute, text)


def expand(value: Any, env: Mapping[str, str], refs: References | None = None,
           where: tuple[str | int, ...] = (),
           verbatim: Callable[[tuple[str | int, ...]], bool] | None = None) -> Any:
    """A copy of ``value`` (parsed YAML) with every string's references replaced.

    ``refs`` puts back the references hidden from the parser first. Strings at a key path
    for which ``verbatim`` is true are kept as written (hook commands: their ``$VAR`` and
    ``${VAR}`` are the shell's to expand, as in Claude Code).
    """
    if isinstance(value, str):
        text = refs.restore(value) if refs else value
        if verbatim is not None and verbatim(where):
            return text
        return _expand_string(text, where, env)
    if isinstance(value, list):
        return [expand(v, env, refs, (*where, i), verbatim) for i, v in enumerate(value)]
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            key = refs.restore(k) if refs and isinstance(k, str) else k
            out[key] = expand(v, env, refs, (*where, str(key)), verbatim)
        return out
    return value


def is_hook_command(where: tuple[str | int, ...]) -> bool:
    """True for an agent's hook commands: ``command_hooks[i].command`` and everything in an
    imported Claude Code settings block (``claude_code``)."""
    if len(where) < 5 or where[0] != "agents" or where[2:4] != ("model_config_json", "hooks"):
        return False
    section = where[4]
    if section == "claude_code":
        return True
    return section == "command_hooks" and len(where) == 7 and where[6] == "command"
