"""Real `hookgate serve` / `hookgate worker` processes on one PostgreSQL for the tests of
several instances, and a loopback chat-completions endpoint whose answers depend on the
run's message (so one model serves runs of every kind, and can be slow on purpose)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.fakes.server import LoopbackServer
from tests.live_server import free_port
from tests.loopback_http import HTTP

ROOT = Path(__file__).resolve().parent.parent
#: Debian's libfaketime (package faketime).
LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")


class Instance:
    """One hookgate process; its output goes to a log file the test can read."""

    def __init__(self, name: str, config: Path, workdir: Path, *, args: tuple[str, ...] = (),
                 command: str = "serve", clock_offset: str | None = None,
                 env: dict[str, str] | None = None) -> None:
        self.name = name
        self.config = config
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.args = args
        self.command = command
        self.clock_offset = clock_offset
        self.env = env or {}
        self.log = workdir / f"{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self._log_from = 0

    def spawn(self) -> None:
        cmd = [sys.executable, "-m", "hookgate.cli.main", self.command, "--config",
               str(self.config)]
        if self.command == "serve":
            cmd += ["--port", str(self.port), "--log-level", "warning"]
        cmd += list(self.args)
        # A PYTHONPATH in ``env`` comes first (e.g. a sitecustomize the test needs).
        path = [self.env.get("PYTHONPATH", ""), str(ROOT), os.environ.get("PYTHONPATH", "")]
        env = {**os.environ, **self.env, "PYTHONPATH": os.pathsep.join(p for p in path if p)}
        if self.clock_offset is not None:
            # libfaketime preloaded into hookgate itself (the `faketime` wrapper would fork,
            # and signals would reach the wrapper, not hookgate): this process's clock is
            # skewed by the offset.
            env.update(LD_PRELOAD=str(LIBFAKETIME), FAKETIME=self.clock_offset)
        with open(self.log, "ab") as out:
            #: Where this process's output starts in the log (it is appended to).
            self._log_from = out.tell()
            self.proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=out,
                                         stderr=subprocess.STDOUT)

    def _listening(self) -> bool:
        """Whether this process said it listens on its port (`hookgate serve` says so once
        its socket is bound): until then an answer on the port may be another test's
        server, which took the port between the probe and this process's bind."""
        if self.command != "serve":
            return True
        with open(self.log, "rb") as log:
            log.seek(self._log_from)
            said = log.read().decode(errors="replace")
        return f" on {self.url}/" in said

    def wait_up(self, timeout: float = 90) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        respawns = 3
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                said = self.log.read_text()[-3000:]
                if "cannot listen on" in said and respawns:
                    # The free port went to another test process between the probe and
                    # the bind: take another one.
                    respawns -= 1
                    self.port = free_port()
                    self.url = f"http://127.0.0.1:{self.port}"
                    self.spawn()
                    continue
                raise AssertionError(f"{self.name} exited: {said}")
            try:
                # /healthz: answered once the server listens, which it does only after its
                # start-up; /openapi.json (polled before) built the whole schema, ~0.1 s of
                # the server's CPU per start, for nobody. One shared client: httpx.get()
                # would build an SSL context per poll (~25 ms of this process's CPU).
                if (HTTP.get(self.url + "/healthz", timeout=1).status_code == 200
                        and self._listening()):
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise AssertionError(f"{self.name} did not come up: {self.log.read_text()[-3000:]}")

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def signal(self, sig: signal.Signals) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def kill(self) -> None:
        self.signal(signal.SIGKILL)
        assert self.proc is not None
        self.proc.wait(30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


class MessageModel:
    """A chat-completions endpoint: the user message ``KIND:REF`` picks the first turn —
    ``pay`` → pay(ref), ``slowtool`` → slow_step(ref), ``slowmodel`` → (after
    ``slow_s``) note(ref), ``delegate`` → call_agent(clerk, "pay:REF"); once a tool
    answered, the reply is ``done REF``."""

    def __init__(self, slow_s: float = 2.0) -> None:
        self.slow_s = slow_s
        self.calls: list[str] = []
        self._server = LoopbackServer(Starlette(routes=[
            Route("/v1/chat/completions", self._complete, methods=["POST"])]))

    @property
    def base_url(self) -> str:
        return f"{self._server.url}/v1"

    def start(self) -> None:
        self._server.start()

    def stop(self) -> None:
        self._server.stop()

    async def _complete(self, request: Request) -> JSONResponse:
        body = json.loads(await request.body())
        messages = body["messages"]
        user = next(m["content"] for m in messages if m["role"] == "user")
        kind, _, ref = str(user).partition(":")
        self.calls.append(user)
        message: dict[str, Any]
        if any(m["role"] == "tool" for m in messages):
            message = {"role": "assistant", "content": f"done {ref}"}
        else:
            if kind == "slowmodel":
                await asyncio.sleep(self.slow_s)
            name = {"pay": "pay", "slowtool": "slow_step",
                    "delegate": "call_agent"}.get(kind, "note")
            args = {"agent_id": "clerk", "message": f"pay:{ref}"} if kind == "delegate" \
                else {"ref": ref}
            message = {"role": "assistant", "content": None, "tool_calls": [{
                "id": f"c_{ref}", "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)}}]}
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        return JSONResponse({"id": "x", "object": "chat.completion", "created": 0,
                             "model": body.get("model"),
                             "choices": [{"index": 0, "message": message,
                                          "finish_reason": finish}]})
