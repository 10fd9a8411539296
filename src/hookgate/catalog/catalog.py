"""The hook catalog: names a declaration may use, built in or added by other packages.

A package adds hooks with an entry point in the group ``hookgate.hooks``::

    [project.entry-points."hookgate.hooks"]
    spend_limit = "mypkg.policies:SpendLimit"
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib.metadata import entry_points

ENTRY_POINT_GROUP = "hookgate.hooks"


@dataclass(frozen=True, slots=True)
class CatalogEntry:
    """One catalog name and the class it stands for (``module:Class``)."""

    name: str
    target: str
    description: str
    aliases: tuple[str, ...] = ()
    source: str = "builtin"

    def load(self) -> object:
        return import_target(self.target)


BUILTIN: tuple[CatalogEntry, ...] = (
    CatalogEntry(
        "approval_gate",
        "hookgate.approvals.gate:ApprovalGate",
        "Human approval gate: a call that needs confirmation waits for a person's decision "
        "(web inbox, Feishu/Lark, Slack or WeCom). Added to every agent automatically.",
        # The gate was first built for Feishu; declarations that name it so keep working.
        aliases=("feishu_gate",),
    ),
    CatalogEntry(
        "result_truncate",
        "hookgate.catalog.builtin.result_truncate:ResultTruncate",
        "Cuts tool output over max_chars characters (default 8000; keep_tail keeps the end "
        "too) with a marker stating the original size, so one huge result cannot flood the "
        "model's context.",
    ),
    CatalogEntry(
        "audit_log",
        "hookgate.catalog.builtin.audit_log:AuditLog",
        "A tamper-evident row per tool call, blocked attempts included: who, the arguments "
        "(secrets masked), outcome, result size and digest, latency; hash-chained per org "
        "(`hookgate audit verify`). A row that cannot be written withholds the result.",
    ),
    CatalogEntry(
        "readonly_guard",
        "hookgate.catalog.builtin.readonly_guard:ReadonlyGuard",
        "Blocks tools that write while the org is read-only (a database flag set with "
        "PUT /api/orgs/{id}/read_only or `hookgate orgs read-only`), from the next call on.",
    ),
    CatalogEntry(
        "cedar_policy",
        "hookgate.catalog.builtin.cedar_policy:CedarPolicy",
        "Judges every call by a Cedar policy set (params: policies: file or folder, default: "
        "deny|allow): permit allows, forbid denies with its @reason, @ask sends the call to a "
        "person; reloaded when the files change; the deciding policies and the set's version "
        "go to the trace, the audit row and the card.",
    ),
    CatalogEntry(
        "connector_rate_limit",
        "hookgate.catalog.builtin.rate_limit:ConnectorRateLimit",
        "At most N calls per window per connector, per user or per org (params: limits "
        "{oa: '10/minute'}, per, redis_url); counters shared by every process; the refusal "
        "says when to retry.",
    ),
    CatalogEntry(
        "session_limits",
        "hookgate.catalog.builtin.session_limits:SessionLimits",
        "Limits over time per user, agent, session or org (params: limits {name: {tools, "
        "per, window, count | sum + max | after_approved}}): calls or an argument's sum in "
        "a sliding window, calls in flight included, exact across instances; a tool only "
        "after an approved call of another in the session.",
    ),
    CatalogEntry(
        "untrusted_target",
        "hookgate.catalog.builtin.untrusted_target:UntrustedTarget",
        "A write whose argument value came only from untrusted content (a tool result "
        "declared untrusted_output, not the user's request nor a trusted result) goes to a "
        "person; the card names the argument and the tool it came from (params: matcher, "
        "writes_only, arguments, action: ask|deny).",
    ),
)


def _parts(target: str) -> tuple[str, str]:
    if ":" in target:
        module_name, _, attr = target.partition(":")
    else:
        module_name, _, attr = target.rpartition(".")
    return module_name, attr


def import_target(target: str) -> object:
    """Import ``module:attr`` (``module.attr`` also accepted); errors say what was missing."""
    module_name, attr = _parts(target)
    if not module_name or not attr:
        raise ImportError(f"'{target}' is not of the form 'module:Name'")
    module = importlib.import_module(module_name)
    obj: object = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ImportError(f"module '{module_name}' has no attribute '{attr}'") from None
    return obj


def still_imports(target: str, obj: object) -> bool:
    """Whether ``target`` is ``obj`` among the modules imported now (imports nothing): what
    `import_target` found is still what it would find."""
    module_name, attr = _parts(target)
    found: object = sys.modules.get(module_name)
    for part in attr.split("."):
        found = getattr(found, part, _MISSING)
    return found is obj


_MISSING = object()


def catalog() -> dict[str, CatalogEntry]:
    """Every catalog name (aliases included) to its entry; built-ins win over plug-ins."""
    return dict(_catalog(tuple(sys.path)))


def catalog_in_force() -> Mapping[str, CatalogEntry]:
    """The catalog as `catalog` reads it now, not copied: the same object for as long as the
    names it holds are the same (the import path and the scan's cache unchanged)."""
    return _catalog(tuple(sys.path))


@lru_cache(maxsize=4)
def _catalog(search_path: tuple[str, ...]) -> dict[str, CatalogEntry]:
    # Scanning every installed distribution's entry points costs milliseconds, and every
    # registry build (one per run) asks: the scan is made once per import path, so a
    # process sees the plug-ins installed where it imports from (a changed sys.path scans
    # again).
    out: dict[str, CatalogEntry] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        origin = ep.dist.name if ep.dist else "an installed package"
        out.setdefault(
            ep.name, CatalogEntry(ep.name, ep.value, f"from {origin}", source="plugin")
        )
    for entry in BUILTIN:
        out[entry.name] = entry
        for alias in entry.aliases:
            out[alias] = entry
    return out


def catalog_entries() -> list[CatalogEntry]:
    """The distinct entries (no alias twice), built-ins first, for listings."""
    seen: dict[str, CatalogEntry] = {}
    for entry in catalog().values():
        seen.setdefault(entry.name, entry)
    return sorted(seen.values(), key=lambda e: (e.source != "builtin", e.name))
