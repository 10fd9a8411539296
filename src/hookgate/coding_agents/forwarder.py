"""The hook command a coding agent runs per call: one POSIX ``sh`` line around ``curl`` (no
Python start-up), which posts the hook's stdin to hookgate and turns every failure of its
own into a deny. Shared by every coding agent whose hooks are commands.

These agents run a tool when a hook times out, prints something malformed or (Codex,
Gemini) exits 1; exit 2 denies in all of them. So ``curl`` gives up ``MARGIN_S`` before the
agent's hook timeout; no answer, a non-200 status (5xx, a bad or revoked token, hookgate's
own refusal: 403, whose reason is printed as is) and a 200 body of the wrong shape all end
in ``exit 2`` with one line on stderr; stdout carries only a body rendered for that agent.
For an agent whose model reads only "hook exited with code 2" (Copilot CLI), every such
failure also prints that agent's deny body (`Refusal.DENY_BODY`), its reason made of fixed
words and characters that need no JSON escaping, so the model reads why.
"""

from __future__ import annotations

import enum
import math
import re
import shlex

__all__ = ["MARGIN_S", "MAX_WAIT_S", "PROMPT_TIMEOUT_S", "Accept", "Refusal", "checked_wait_s",
           "command", "hook_timeout_s", "is_env_name", "prompt_command"]

#: Seconds between curl's deadline and the agent's hook timeout.
MARGIN_S = 5
#: Seconds curl waits beyond hookgate's own wait for a person.
ANSWER_MARGIN_S = 5


class Accept(enum.Enum):
    """Which 200 bodies the command passes on to the agent."""

    #: Only ``{}``, passed on as no output (Codex's one allow at PreToolUse).
    EMPTY = "empty"
    #: ``{}`` or another JSON object (context at SessionStart or PostToolUse).
    OBJECT = "object"
    #: Any JSON object, ``{}`` included, printed as is (Cursor: with ``failClosed`` an empty
    #: answer is a failed hook).
    JSON = "json"
    #: A JSON object that opens with an allow or a deny (``{"permission": "allow"|"deny"``:
    #: Cursor's answer before a tool runs).
    PERMISSION = "permission"
    #: ``{}`` (passed on as no output) or a ``{"permissionDecision": …}`` object; a deny is
    #: passed on and ends in ``exit 2`` too (Copilot CLI's PreToolUse).
    PERMISSION_DECISION = "permission_decision"


class Refusal(enum.Enum):
    """How the command blocks a call when anything short of hookgate's answer arrives."""

    #: The reason on stderr and ``exit 2`` (Codex, Gemini CLI: the model reads the reason).
    EXIT_2 = "exit_2"
    #: The reason on stdout and ``exit 2`` (Cursor shows the text of an exit 2 on stdout as
    #: the reason, and nothing of stderr).
    STDOUT = "stdout"
    #: Also ``{"permissionDecision":"deny","permissionDecisionReason":…}`` on stdout (Copilot
    #: CLI, whose model reads only "hook exited with code 2" otherwise).
    DENY_BODY = "deny_body"
    #: Nothing is blocked: the reason on stderr, the agent's go-on body (``go_on``) on stdout,
    #: ``exit 0``. For the user's prompt, which runs nothing: a prompt hookgate did not keep
    #: only makes more values count as untrusted, and every tool call is still decided by
    #: the tool hooks, which fail closed.
    GO_ON = "go_on"


#: The longest wait for a person a hook is written for (a day). Node's timers, which Gemini
#: CLI and Cursor time hooks with, fire at once for a delay past 2**31-1 ms: a longer hook
#: timeout would time out at once, and these agents run the tool when a hook times out.
MAX_WAIT_S = 86_400


def checked_wait_s(wait_s: float) -> float:
    """``wait_s`` if it is a number of seconds from 0 to `MAX_WAIT_S` (else ValueError)."""
    if not math.isfinite(wait_s) or not 0 <= wait_s <= MAX_WAIT_S:
        raise ValueError(f"the wait for a person must be 0 to {MAX_WAIT_S} seconds, "
                         f"not {wait_s!r}")
    return wait_s


def curl_max_time_s(wait_s: float) -> int:
    """How long curl waits for hookgate, which answers within its wait for a person."""
    return int(checked_wait_s(wait_s)) + 1 + ANSWER_MARGIN_S


def hook_timeout_s(wait_s: float) -> int:
    """The hook timeout to configure in the agent: curl's deadline plus `MARGIN_S`."""
    return curl_max_time_s(wait_s) + MARGIN_S


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def is_env_name(name: str) -> bool:
    """Whether ``sh`` can expand ``$name`` (ASCII only: ``str.isidentifier`` takes ``TOKÉN``,
    which every hook run would fail on with "bad substitution")."""
    return _ENV_NAME.fullmatch(name) is not None


def command(url: str, *, token_env: str, wait_s: float, accept: Accept,
            refusal: Refusal = Refusal.EXIT_2, go_on: str = "") -> str:
    """The hook command posting stdin to ``url`` with the token from ``$token_env``
    (``go_on``: what `Refusal.GO_ON` prints on stdout after a failure)."""
    if not is_env_name(token_env):
        raise ValueError(f"{token_env!r} is not an environment variable name")
    limit = curl_max_time_s(wait_s)
    where = shlex.quote(url)
    if refusal is Refusal.DENY_BODY:
        # d REASON: the deny body (REASON holds no quote, backslash or control character),
        # the reason on stderr, exit 2. A server's text is cut to such characters first.
        define = ("d() { printf '{\"permissionDecision\":\"deny\",\"permissionDecision"
                  "Reason\":\"hookgate: %s\"}\\n' \"$1\"; echo \"hookgate: $1\" >&2; exit 2; }; ")
        no_answer = (f"d \"no answer within {limit} s (curl exit $?), so the call is "
                     "blocked\"; }; ")
        status = ("[ \"$c\" = 200 ] || { r=$(printf '%s' \"$b\" | LC_ALL=C tr -cd "
                  "'A-Za-z0-9 ._,:;()/=+-' | cut -c1-300); "
                  "if [ \"$c\" = 403 ]; then d \"$r\"; else d \"(HTTP $c) $r\"; fi; }; ")
        malformed = "d 'its answer is not one this hook accepts, so the call is blocked'"
    elif refusal is Refusal.GO_ON:
        # g REASON: the reason on stderr, the go-on body on stdout, exit 0.
        body = f"printf '%s\\n' {shlex.quote(go_on)}; " if go_on else ""
        define = (f"g() {{ printf \"hookgate: %s, so the prompt is not kept as the session's "
                  f"request\\n\" \"$1\" >&2; {body}exit 0; }}; ")
        no_answer = f"g \"no answer within {limit} s (curl exit $?)\"; }}; "
        status = "[ \"$c\" = 200 ] || g \"(HTTP $c) $b\"; "
        malformed = "g 'its answer is not one this hook accepts'"
    else:
        to = " >&2" if refusal is Refusal.EXIT_2 else ""
        define = ""
        no_answer = (f"echo \"hookgate: no answer within {limit} s (curl exit $?), so the "
                     f"call is blocked; server:\" {where}{to}; exit 2; }}; ")
        status = ("[ \"$c\" = 200 ] || { if [ \"$c\" = 403 ]; then printf 'hookgate: %s\\n' "
                  "\"$b\"; else printf 'hookgate (HTTP %s): %s\\n' \"$c\" \"$b\"; fi"
                  f"{to}; exit 2; }}; ")
        malformed = ("{ echo 'hookgate: its answer is not one this hook accepts, so the call "
                     f"is blocked'{to}; exit 2; }}")
    if accept is Accept.EMPTY:
        shape = f"[ \"$b\" = '{{}}' ] || {malformed}"
    elif accept is Accept.PERMISSION_DECISION:
        shape = ("case $b in '{}') ;; '{\"permissionDecision\":\"deny\",'*'}') "
                 "printf '%s\\n' \"$b\"; exit 2;; '{\"permissionDecision\":\"allow\"'*'}') "
                 f"printf '%s\\n' \"$b\";; *) {malformed};; esac")
    elif accept is Accept.PERMISSION:
        shape = ("case $b in '{\"permission\":\"allow\"'*'}'|'{\"permission\":\"deny\"'*'}') "
                 f"printf '%s\\n' \"$b\";; *) {malformed};; esac")
    elif accept is Accept.JSON:
        shape = f"case $b in '{{'*'}}') printf '%s\\n' \"$b\";; *) {malformed};; esac"
    else:
        shape = ("case $b in '{'*'}') [ \"$b\" = '{}' ] || printf '%s\\n' \"$b\";; *) "
                 f"{malformed};; esac")
    return (
        f"{define}b=$(curl -s --max-time {limit} -w '%{{http_code}}' -X POST "
        f"-H \"Authorization: Bearer ${{{token_env}-}}\" "
        "-H 'Content-Type: application/json' --data-binary @- "
        f"{where}) || {{ {no_answer}"
        "c=${b#\"${b%???}\"}; b=${b%???}; "
        f"{status}{shape}"
    )


#: The hook timeout of the prompt's hook: nobody is waited for there.
PROMPT_TIMEOUT_S = hook_timeout_s(0)


def prompt_command(url: str, *, token_env: str, accept: Accept, go_on: str = "") -> str:
    """The hook command for the user's prompt: it never blocks the prompt (`Refusal.GO_ON`)
    and waits for nobody."""
    return command(url, token_env=token_env, wait_s=0, accept=accept, refusal=Refusal.GO_ON,
                   go_on=go_on)
