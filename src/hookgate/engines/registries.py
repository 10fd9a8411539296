"""How an engine gets a session's hook registry: a ``RegistryBuilder`` handed to it.

The engines sit below the hook catalog and the approvals, so they do not build registries
themselves: whoever constructs an engine (the runner (hookgate.runs.runner), the workflow runner,
evals, the CLI) passes ``registries=``. An engine constructed without one (the public
``ReActEngine(llm=...)``) uses the default builder, which ``hookgate/__init__.py`` -- above
every layer, and run before any ``hookgate.engines`` module -- installs through
``use_default_builder``: the agent's declared hooks plus the approval gate (SPEC §1.6-7).
See docs/decisions/0005-engines-take-a-registry-builder.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from hookgate.agent import Agent
    from hookgate.hooks.registry import HookRegistry
    from hookgate.hooks.services import HookServices


class RegistryBuilder(Protocol):
    """Builds a fresh registry for one session of ``agent``; raises HookBuildError when a
    declared hook cannot be built (the run then ends ``blocked_build``: fail closed)."""

    def __call__(self, agent: Agent, services: HookServices) -> HookRegistry: ...


class NoRegistryBuilder(LookupError):
    """An engine was constructed without ``registries=`` and no default is installed."""


_default: RegistryBuilder | None = None


def use_default_builder(builder: RegistryBuilder) -> RegistryBuilder | None:
    """Make ``builder`` what engines constructed without ``registries=`` use; the builder
    it replaces (None at first). ``hookgate/__init__.py`` installs the catalog's."""
    global _default
    previous, _default = _default, builder
    return previous


def default_builder() -> RegistryBuilder:
    """The installed default builder; NoRegistryBuilder when there is none (no engine runs
    an agent with hooks it could not build)."""
    if _default is None:
        raise NoRegistryBuilder(
            "no registry builder: pass registries= to the engine, or install a default "
            "with hookgate.engines.registries.use_default_builder")
    return _default


def builder_or_default(registries: RegistryBuilder | None) -> RegistryBuilder:
    """``registries`` when given, else the installed default."""
    return registries if registries is not None else default_builder()
