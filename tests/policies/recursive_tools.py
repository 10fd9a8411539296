"""Tools whose argument types refer to themselves (a tree, two types that refer to each
other), for the bad-input tests: Cedar cannot type them, and nothing may crash on them."""

from __future__ import annotations

from pydantic import BaseModel

from hookgate import tool


class Node(BaseModel):
    name: str
    children: list[Node] = []


class Ping(BaseModel):
    pong: Pong | None = None


class Pong(BaseModel):
    ping: Ping | None = None


@tool
async def org__tree(root: Node, depth: int = 1) -> str:
    """Walk an org chart."""
    return root.name


@tool
async def net__ping(first: Ping) -> str:
    """Ping."""
    return "pong"
