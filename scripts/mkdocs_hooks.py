"""MkDocs hooks of the documentation site: the reference pages' generated parts (see
docs_reference.py), and pages added later under docs/guides/ or docs/decisions/ joining
the navigation without an edit to mkdocs.yml."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import docs_reference

MARKER = re.compile(r"<!-- generated: ([a-z-]+) -->")
#: Folders whose pages join the named nav section when the nav does not list them yet.
OPEN_SECTIONS = {"guides": ("Guides",), "decisions": ("Development", "Decision records")}


def _nav_paths(nav: Any) -> set[str]:
    if isinstance(nav, str):
        return {nav}
    if isinstance(nav, list):
        return set().union(*(_nav_paths(item) for item in nav)) if nav else set()
    if isinstance(nav, dict):
        return set().union(*(_nav_paths(v) for v in nav.values()))
    return set()


def _section(nav: list[Any], titles: tuple[str, ...]) -> list[Any] | None:
    for title in titles:
        found = next((item[title] for item in nav if isinstance(item, dict) and title in item),
                     None)
        if not isinstance(found, list):
            return None
        nav = found
    return nav


def on_config(config: Any) -> Any:
    docs = Path(config["docs_dir"])
    listed = _nav_paths(config["nav"])
    for folder, titles in OPEN_SECTIONS.items():
        section = _section(config["nav"], titles)
        if section is None:
            continue
        for page in sorted((docs / folder).glob("*.md")):
            path = f"{folder}/{page.name}"
            if path not in listed:
                section.append(path)
    return config


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    def generate(match: re.Match[str]) -> str:
        return docs_reference.GENERATORS[match.group(1)]()

    return MARKER.sub(generate, markdown)
