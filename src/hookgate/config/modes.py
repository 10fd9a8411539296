"""Which entries of a configuration may carry a ``mode:`` (hookgate.policies.modes): every
agent's declaration as built (its org's ``policies:`` entries included) and every MCP
server's gate rules, and the digests of its sections for what a reload cannot take."""

from __future__ import annotations

from pathlib import Path

from hookgate.config.errors import ConfigError
from hookgate.config.schema import HookgateConfig
from hookgate.hooks.errors import HookBuildError
from hookgate.policies.modes import ModeCatalogue, catalogue, watch_modes


def mode_catalogue(config: HookgateConfig) -> ModeCatalogue:
    """The entries of ``config`` that carry a mode; HookBuildError for a bad mode."""
    roots: dict[str, object] = {
        f"agents[{agent.id}].model_config_json": agent.model_config_json
        for agent in config.build_agents().values()}
    roots.update({f"mcp_servers[{spec.id}]": spec for spec in config.mcp_servers})
    return catalogue(roots, config.model_dump(mode="json"))


def watch_config_modes(config: HookgateConfig) -> str | None:
    """Take the modes stamped for ``config``'s file from now on in this process (`hookgate
    serve`); why not, when its entries cannot be read (they then keep the file's modes)."""
    source = Path(config.source)
    if not source.is_file():
        return f"{config.source} is not a file: modes are the ones it was started with"
    try:
        watch_modes(source, mode_catalogue(config))
    except (HookBuildError, ConfigError, ValueError, TypeError) as exc:
        return f"modes are not reloadable, they stay as started: {exc}"
    return None
