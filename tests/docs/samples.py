"""The fenced code blocks of the documentation (docs/**/*.md), with what the comment line
right above each says of it: ``<!-- sample: KIND -->`` (``skip`` for a fragment that cannot
run alone, ``shell``, ``tutorial``, ``config``) or ``<!-- file: NAME -->`` (a file a
tutorial writes)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[\w-]*)[^\n]*$")
NOTE = re.compile(r"<!-- (?P<what>sample|file): (?P<value>[\w./-]+) -->")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # 1-based, the opening fence
    lang: str
    code: str
    sample: str | None  # the <!-- sample: ... --> kind
    file: str | None  # the <!-- file: ... --> name

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    lines = page.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent = opening.group("indent")
        start = i
        body: list[str] = []
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i][len(indent):])
            i += 1
        note = NOTE.search(lines[start - 1]) if start else None
        found.append(Block(
            page=page, line=start + 1, lang=opening.group("lang"), code="\n".join(body) + "\n",
            sample=note.group("value") if note and note.group("what") == "sample" else None,
            file=note.group("value") if note and note.group("what") == "file" else None))
        i += 1
    return found


def pages() -> list[Path]:
    """Every page of the site, and the README, whose samples are held to the same rule."""
    return [*sorted(DOCS.rglob("*.md")), REPO / "README.md"]
