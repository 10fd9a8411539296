"""The framework integration pages, end to end as a reader follows them: the page's files
written into an empty folder, `hookgate serve` started as the page says, the agent run with
the page's command until hookgate holds its call, the request decided with the page's
`hookgate approvals` command, the run resumed with the page's command (or by the agent's
own process, waiting for the decision), and the audit row read with the page's `hookgate
audit list`."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.samples import DOCS, REPO, Block, blocks
from tests.instances import Instance

TOKEN = "dev-token-alice"
#: The agent's own token: a service identity's (``kind: service``), which acts for alice and
#: never decides.
BOT_TOKEN = "dev-token-buyer-bot"
SERVE = ("export ALICE_TOKEN=dev-token-alice BUYER_BOT_TOKEN=dev-token-buyer-bot\n"
         "hookgate serve --config hookgate.yaml --port 8000")


def script(block: Block, url: str, **swap: str) -> list[str]:
    """bash running a shell block, `hookgate` and `python` being this interpreter's."""
    text = block.code.replace("http://127.0.0.1:8000", url)
    for old, new in swap.items():
        text = text.replace(old, new)
    prelude = (f'hookgate() {{ "{sys.executable}" -m hookgate.cli.main "$@"; }}\n'
               f'python() {{ "{sys.executable}" "$@"; }}\nset -e\n')
    return ["bash", "-c", prelude + text]


def shell(block: Block, cwd: Path, env: dict[str, str], url: str, **swap: str) -> str:
    done = subprocess.run(script(block, url, **swap), cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, f"{block.where}: {done.stdout}\n{done.stderr}"
    return done.stdout


def one(page: list[Block], text: str) -> Block:
    found = [b for b in page if b.sample == "shell" and text in b.code]
    assert len(found) == 1, f"{len(found)} shell blocks contain {text!r}"
    return found[0]


#: page → (the framework's module, what the resumed run's answer quotes, the audited tool)
PAGES = {
    "pydantic-ai.md": ("pydantic_ai", ("approved by alice", "invoice checked",
                                        "paid 500 to acme"), "pay"),
    "openai-agents.md": ("agents", ("approved by alice", "invoice checked",
                                     "paid 500 to acme"), "pay"),
    "adk.md": ("google.adk", ("approved by alice", "invoice checked",
                              '{"paid": 500, "to": "acme"}'), "pay"),
    "langgraph.md": ("langgraph", ("approved by alice", "bob is owed 5", "sent 5 to bob"),
                     "transfer"),
}


@pytest.mark.timeout(600)  # several real processes on a shared machine
@pytest.mark.parametrize("name", sorted(PAGES))
def test_a_framework_page_runs_as_written(name: str, tmp_path: Path) -> None:
    module, answer, tool = PAGES[name]
    pytest.importorskip(module)
    page = blocks(DOCS / "integrations" / name)
    for block in page:
        if block.file:
            (tmp_path / block.file).write_text(block.code, encoding="utf-8")
    install = one(page, "pip install")
    assert install.code.startswith("pip install -e '.["), install.code  # for a clone
    serve = one(page, "hookgate serve")
    assert serve.code.strip() == SERVE
    env = {**os.environ, "ALICE_TOKEN": TOKEN, "COLUMNS": "120", "NO_COLOR": "1",
           "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    env.pop("HOOKGATE_URL", None)
    env.pop("HOOKGATE_TOKEN", None)
    server = Instance("serve", tmp_path / "hookgate.yaml", tmp_path,
                      env={"ALICE_TOKEN": TOKEN, "BUYER_BOT_TOKEN": BOT_TOKEN})
    server.spawn()
    try:
        server.wait_up()
        # The agent runs until hookgate holds its call; the page's export stays set for the
        # rest of the second terminal. On a page without a resume step the agent's process
        # waits for the decision itself.
        run = one(page, "export HOOKGATE_URL")
        agent = subprocess.Popen(script(run, server.url), cwd=tmp_path, env=env, text=True,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        said = []
        try:
            assert agent.stdout is not None
            for line in agent.stdout:
                said.append(line)
                if line.startswith("waiting for "):
                    break
            waiting = re.search(r"waiting for (\S+)", "".join(said))
            assert waiting, "".join(said)
            request_id = waiting.group(1)
            # The agent's terminal keeps its export (BUYER_BOT_TOKEN); alice decides with
            # her own token (the page's approve step exports it).
            env.update(HOOKGATE_URL=server.url, BUYER_BOT_TOKEN=BOT_TOKEN)
            assert "export HOOKGATE_TOKEN=dev-token-alice" in one(
                page, "hookgate approvals approve").code
            assert "HOOKGATE_TOKEN" not in run.code and BOT_TOKEN in run.code, run.code

            decided = shell(one(page, "hookgate approvals approve"), tmp_path, env,
                            server.url, REQUEST_ID=request_id)
            assert request_id in decided, decided
            env.update(HOOKGATE_TOKEN=TOKEN)  # the rest of the page reads as alice
            rest, _ = agent.communicate(timeout=120)
            assert agent.returncode == 0, "".join(said) + rest
        finally:
            if agent.poll() is None:
                agent.kill()
                agent.wait()
        resumed = [b for b in page if b.sample == "shell" and "resume" in b.code]
        if resumed:
            assert not rest.strip(), rest  # the agent's process ended at the pause
            (resumed_block,) = resumed
            rest = shell(resumed_block, tmp_path, env, server.url)
        assert all(part in rest for part in answer), rest

        audit = shell(one(page, "hookgate audit list"), tmp_path, env, server.url)
        row = next(line for line in audit.splitlines() if request_id[:8] in line)
        assert tool in audit and "ok" in row and "alice" in row, audit
    finally:
        server.stop()
