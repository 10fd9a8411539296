"""The hook catalog and building a session's registry from an agent's declaration.

``HookServices`` lives in hookgate.hooks.services; it is named here too because the API
reference documents it as ``hookgate.catalog.HookServices``.
"""

from hookgate.catalog.build import BuildEnv, build_registry
from hookgate.catalog.catalog import CatalogEntry, catalog, catalog_entries
from hookgate.hooks.services import HookServices

__all__ = [
    "BuildEnv",
    "CatalogEntry",
    "HookServices",
    "build_registry",
    "catalog",
    "catalog_entries",
]
