"""Coding agents other than Claude Code (Codex first) guarded through the external core: each
agent is a codec from its hook's stdin to the typed call and from the verdict to the exact
answer that agent accepts, served per agent and reached by a ``curl`` one-liner.
"""
