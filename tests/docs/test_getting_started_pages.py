"""The install page and the demo page as a reader follows them: the install page's extras
and command exist as it says, `hookgate --help` runs through the installed command, and
`hookgate demo` prints what the demo page shows the approver, takes the approval command it
prints, and ends with the answer the page quotes."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from tests.demo.test_demo import _printed_approve, _rest, _start_demo
from tests.docs.samples import DOCS, REPO, blocks

INSTALL = DOCS / "getting-started" / "install.md"
#: How every install command starts: in the project's own virtual environment.
VENV = "python3 -m venv .venv && . .venv/bin/activate && "
DEMO = DOCS / "getting-started" / "demo.md"


def flat(text: str) -> str:
    """The words of ``text``, without the terminal's wrapping and the panels' borders."""
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", text).split())


def test_the_install_page_names_extras_and_a_command_that_exist() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["scripts"]["hookgate"].startswith("hookgate.cli.main:")
    text = INSTALL.read_text(encoding="utf-8")
    named = set(re.findall(r"^\| `([\w-]+)` \|", text, re.M))
    assert named and named <= set(project["optional-dependencies"]), named
    commands = [b.code.strip() for b in blocks(INSTALL) if b.lang == "bash"]
    assert commands[0] == f"{VENV}pip install -e ."
    assert "hookgate --help" in commands
    # The command pip installs, as the page runs it.
    installed = shutil.which("hookgate") or str(Path(sys.executable).parent / "hookgate")
    done = subprocess.run([installed, "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "serve" in done.stdout, done.stderr


def test_the_demo_shows_what_its_page_says(tmp_path: Path) -> None:
    commands = [b.code.strip() for b in blocks(DEMO) if b.lang == "bash"]
    assert commands == [f"{VENV}pip install -e . && hookgate demo"]
    [shown] = [b.code for b in blocks(DEMO) if b.lang == "text"]
    page = flat(DEMO.read_text(encoding="utf-8"))
    assert "http://127.0.0.1:8765/" in page

    demo, _, _, lines = _start_demo(tmp_path)
    command = _printed_approve(demo, lines)
    done = subprocess.run([sys.executable, "-m", "hookgate.cli.main", *command[1:]],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    transcript = flat("".join(lines) + _rest(demo, timeout=60))
    # What the approver reads, line by line as the page shows it (the terminal may wrap).
    for line in shown.splitlines():
        label, _, value = line.partition(":")
        assert flat(f"{label}: {value.strip()}") in transcript or \
            flat(value) in transcript, f"the demo does not print {line!r}:\n{transcript}"
    answer = re.search(r"`(Paid ACME 12,000\. Paid ACME 60,000\.)` once approved", page)
    assert answer and answer.group(1) in transcript, transcript
