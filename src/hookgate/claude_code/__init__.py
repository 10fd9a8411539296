"""hookgate as Claude Code's remote approval backend: Claude Code's ``type: http`` hooks
post to ``/api/claude-code/hooks?agent=ID``; its tools are external tools here, which
hookgate never runs but which every hook, audit row, rate limit, read-only rule and the
approval gate apply to.
"""
