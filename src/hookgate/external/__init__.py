"""Guarded calls for agents that run elsewhere (Claude Code, framework adapters, the v1 API):
the tool runs outside hookgate, between a PreToolUse ask and a PostToolUse report, and these
modules hold what both halves share: rules, approvals used once, kept decisions, sessions.
"""
