"""The one error a configuration file can raise, naming the file and the key at fault."""

from __future__ import annotations


class ConfigError(Exception):
    """A configuration file that cannot be used.

    ``str(error)`` reads ``file: key: problem`` (e.g. ``hookgate.yaml: agents[0].tools[1]:
    unknown tool 'oa__pay' (configured tools: oa__purchase_pay)``); further problems found
    in the same pass follow on their own lines.
    """

    def __init__(self, file: str, key: str | None, problem: str,
                 more: list[str] | None = None) -> None:
        self.file = file
        self.key = key
        self.problem = problem
        self.more = list(more or [])
        first = f"{file}: {key}: {problem}" if key else f"{file}: {problem}"
        super().__init__("\n".join([first, *self.more]))
