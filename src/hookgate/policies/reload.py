"""Declaring a change complete: validate the files as they are and stamp their version
(policies/stamp.py), which every process serving them then takes (``hookgate policy
reload``)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from hookgate.policies.errors import PolicyLoadError
from hookgate.policies.policy_set import Default, policies_of
from hookgate.policies.schema import cedar_schema
from hookgate.policies.source import read_policy_files, version_of
from hookgate.policies.stamp import write_stamp
from hookgate.tools.tool import Tool


def checked_version(path: Path, default: Default, tools: Iterable[Tool], *,
                    declared_tools: bool = False) -> str:
    """The version of the files at ``path`` once they validate for ``tools``, read twice
    to the same text; PolicyLoadError naming every problem, or saying they are changing."""
    files = read_policy_files(path)
    policies_of(files, cedar_schema(tools), default, declared_tools=declared_tools)
    again = read_policy_files(path)
    if version_of(again) != version_of(files):
        raise PolicyLoadError([f"{path}: the files changed while they were read (a write is "
                               "under way?); run the reload again once it is done"])
    return version_of(files)


def reload_policies(path: Path, default: Default, tools: Iterable[Tool], *,
                    declared_tools: bool = False) -> str:
    """Validate and stamp the set at ``path``; its version."""
    version = checked_version(path, default, tools, declared_tools=declared_tools)
    write_stamp(path, version)
    return version
