"""Hand a Claude Code hook input to hookgate's endpoint from a ``type: command`` hook.

Claude Code sends SessionStart only to command hooks, never to ``type: http`` ones, so the
block ``hookgate claude-code install`` writes runs ``hookgate claude-code forward URL`` at
SessionStart: it posts the hook input from stdin to ``URL`` exactly as an http hook would
(the token from an environment variable, ``CLAUDE_CODE_ENTRYPOINT`` alongside) and prints
hookgate's answer for Claude Code to read.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

import httpx

#: The most of stdin read: a hook input is a few kilobytes.
MAX_INPUT = 1 << 20


class ForwardFailed(RuntimeError):
    """hookgate did not answer the hook call (unreachable, refused, or no JSON answer)."""


@dataclass(frozen=True, slots=True)
class Forward:
    url: str
    token_env: str
    timeout_s: float
    #: ``Hookgate-Acts-For``: a user id, or ``$NAME`` for an environment variable's value.
    acts_for: str | None = None

    def headers(self) -> dict[str, str]:
        token = os.environ.get(self.token_env)
        if not token:
            raise ForwardFailed(f"${self.token_env} is not set: hookgate needs the "
                                "developer's token")
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        entrypoint = os.environ.get("CLAUDE_CODE_ENTRYPOINT")
        if entrypoint:
            headers["X-Claude-Code-Entrypoint"] = entrypoint
        if self.acts_for is not None:
            acts_for = self.acts_for
            if acts_for.startswith("$") and acts_for[1:].isidentifier():
                acts_for = os.environ.get(acts_for[1:], "")
                if not acts_for:
                    raise ForwardFailed(f"{self.acts_for} is not set: hookgate needs the "
                                        "person this service identity acts for")
            headers["Hookgate-Acts-For"] = acts_for
        return headers

    def send(self, body: bytes) -> str:
        """hookgate's answer (a JSON object's text) to the hook input ``body``."""
        if len(body) > MAX_INPUT:
            raise ForwardFailed(f"the hook input is over {MAX_INPUT} bytes")
        try:
            json.loads(body)
        except ValueError as exc:
            raise ForwardFailed(f"the hook input on stdin is not JSON: {exc}") from None
        try:
            answer = httpx.post(self.url, content=body, headers=self.headers(),
                                timeout=self.timeout_s)
        except httpx.HTTPError as exc:
            raise ForwardFailed(f"hookgate at {self.url} could not be reached: {exc}") from None
        if answer.status_code != 200:
            raise ForwardFailed(f"hookgate answered {answer.status_code}: "
                                f"{answer.text[:500]}")
        try:
            parsed = answer.json()
        except ValueError:
            raise ForwardFailed("hookgate's answer is not JSON") from None
        if not isinstance(parsed, dict):
            raise ForwardFailed("hookgate's answer is not a JSON object")
        return json.dumps(parsed)
