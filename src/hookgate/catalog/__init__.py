"""The hook catalog and building a session's registry from an agent's declaration."""

from hookgate.catalog.build import BuildEnv, build_registry
from hookgate.catalog.catalog import CatalogEntry, catalog, catalog_entries
from hookgate.catalog.services import HookServices

__all__ = [
    "BuildEnv",
    "CatalogEntry",
    "HookServices",
    "build_registry",
    "catalog",
    "catalog_entries",
]
