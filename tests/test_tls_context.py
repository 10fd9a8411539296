"""hookgate's outgoing HTTP clients share one TLS context per process (hookgate.tls): an
HTTP hook's calls, guarded-call clients and channel senders read the CA bundle once, not
once per client (~25 ms of CPU each). Run in a fresh process with neither SSL_CERT_FILE nor
SSL_CERT_DIR set (httpx then reads certifi's bundle), counting every load of CA certificates."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import asyncio, json, ssl, threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    loads = []
    load = ssl.SSLContext.load_verify_locations

    def counted(self, *args, **kwargs):
        loads.append(1)
        return load(self, *args, **kwargs)

    ssl.SSLContext.load_verify_locations = counted

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            body = b"{}"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()

    from hookgate.catalog.declarative.http_hook import HttpEndpoint
    from hookgate.channels.delivery import PlatformSender
    from hookgate.client import AsyncClient, Client
    from hookgate.hooks.model import HookPoint

    async def main():
        hook = HttpEndpoint(f"http://127.0.0.1:{server.server_address[1]}/hook")
        for _ in range(5):
            await hook.ask({"hook_event_name": "PreToolUse"}, HookPoint.PRE_TOOL_USE)
        for _ in range(3):
            await AsyncClient("http://127.0.0.1:9", "t", framework="test").aclose()
            Client("http://127.0.0.1:9", "t", framework="test").close()
            await PlatformSender("slack", "http://127.0.0.1:9/api/").aclose()

    asyncio.run(main())
    server.shutdown()
    print(json.dumps({"loads": len(loads)}))
""")


def test_every_client_hookgate_makes_shares_one_tls_context() -> None:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path)}
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    # Five hook calls, six guarded-call clients, three channel senders: one load of the CA
    # bundle in all (each would have read it again before).
    assert json.loads(done.stdout.splitlines()[-1]) == {"loads": 1}, done.stdout
