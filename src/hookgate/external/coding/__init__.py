"""Rules for the calls of coding agents (Claude Code, Codex, and the agents after them):
their policy section, shell commands and the paths a call names. Neutral: no coding agent's
codec is imported here, and each codec reads its rules from here."""
