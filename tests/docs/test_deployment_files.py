"""The deployment files in deploy/ say what the guide says and name what exists, as far as
this machine can check without a container engine or systemd running: the compose file
parses and its commands are `hookgate` commands with real options, its environment sets
every variable the configuration needs; the systemd units pass `systemd-analyze verify`
(or parse) and start real commands; the Containerfile copies files that exist, and the
configuration it copies loads and builds with `hookgate check`."""

from __future__ import annotations

import configparser
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from hookgate.cli.main import app
from tests.docs.samples import DOCS, REPO

DEPLOY = REPO / "deploy"
GUIDE = DOCS / "deployment" / "postgresql.md"
CONFIG_IN_IMAGE = "/etc/hookgate/hookgate.yaml"
ENV = {"COLUMNS": "200", "NO_COLOR": "1"}


def help_of(*path: str) -> str:
    done = CliRunner().invoke(app, [*path, "--help"], env=ENV)
    assert done.exit_code == 0, f"'hookgate {' '.join(path)}' is not a command: {done.output}"
    return done.output


def assert_a_real_command(argv: list[str], where: str) -> None:
    """``argv`` (after ``hookgate``) is a command of the real CLI, each of whose options
    that command's --help names."""
    assert argv and argv[0] in {"serve", "worker"}, f"{where}: {argv}"
    text = help_of(argv[0])
    for word in argv[1:]:
        if word.startswith("--"):
            assert re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", text), \
                f"{where}: 'hookgate {argv[0]}' has no option {word}"


def variables_of_config() -> set[str]:
    """The environment variables deploy/hookgate.yaml needs (those without a default)."""
    text = (DEPLOY / "hookgate.yaml").read_text(encoding="utf-8")
    return set(re.findall(r"\$\{(\w+)\}", text))


def test_the_guide_names_only_deployment_files_that_exist() -> None:
    text = GUIDE.read_text(encoding="utf-8")
    named = set(re.findall(r"deploy/[\w./-]+[\w]", text))
    assert {"deploy/hookgate.yaml", "deploy/Containerfile", "deploy/compose.yaml",
            "deploy/systemd"} <= named
    for unit in (DEPLOY / "systemd").glob("*.service"):
        assert f"`{unit.name}`" in text, f"{GUIDE.name} does not name {unit.name}"
    for path in named:
        assert (REPO / path).exists(), f"{GUIDE.name} names {path}, which does not exist"


def test_the_compose_file_runs_real_commands_with_what_the_configuration_needs() -> None:
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text(encoding="utf-8"))
    services = compose["services"]
    assert set(services) == {"postgres", "hookgate-1", "hookgate-2", "worker"}
    database = services["postgres"]["environment"]
    hookgate = {name: s for name, s in services.items() if name != "postgres"}
    commands = {name: s["command"] for name, s in hookgate.items()}
    assert commands["hookgate-1"][0] == commands["hookgate-2"][0] == "serve"
    assert commands["worker"][0] == "worker"
    needed = variables_of_config()
    assert "HOOKGATE_DATABASE_URL" in needed
    for name, service in hookgate.items():
        command = service["command"]
        assert_a_real_command(command, f"compose.yaml: {name}")
        assert command[command.index("--config") + 1] == CONFIG_IN_IMAGE
        if command[0] == "serve":
            assert "--no-worker" in command  # the worker service advances the runs
            assert command[command.index("--host") + 1] == "0.0.0.0"
            port = command[command.index("--port") + 1]
            assert all(p.endswith(f":{port}") for p in service["ports"])
        assert service["build"] == {"context": "..", "dockerfile": "deploy/Containerfile"}
        assert (DEPLOY / service["build"]["context"] / service["build"]["dockerfile"]).exists()
        env = service["environment"]
        assert needed <= set(env), f"{name} does not set {needed - set(env)}"
        # The database URL names the postgres service, its user, password and database.
        url = env["HOOKGATE_DATABASE_URL"]
        user, db = database["POSTGRES_USER"], database["POSTGRES_DB"]
        assert url == (f"postgresql://{user}:{database['POSTGRES_PASSWORD']}@postgres:5432/"
                       f"{db}"), url
        assert service["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert "healthcheck" in services["postgres"]


def _containerfile() -> list[tuple[str, str]]:
    """(instruction, arguments) of each step, continuation lines joined."""
    text = (DEPLOY / "Containerfile").read_text(encoding="utf-8").replace("\\\n", " ")
    steps = []
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            instruction, _, rest = line.strip().partition(" ")
            steps.append((instruction.upper(), rest.strip()))
    return steps


def test_the_containerfile_copies_what_exists_and_runs_a_real_command() -> None:
    steps = _containerfile()
    copied = [rest.split() for instruction, rest in steps if instruction == "COPY"]
    assert copied
    for words in copied:
        for source in words[:-1]:  # the build context is the repository's root
            assert (REPO / source).exists(), f"Containerfile copies {source}: no such file"
    assert ["deploy/hookgate.yaml", CONFIG_IN_IMAGE] in copied
    entrypoint = json.loads(dict(steps)["ENTRYPOINT"])
    command = json.loads(dict(steps)["CMD"])
    assert entrypoint == ["hookgate"]
    assert_a_real_command(command, "Containerfile CMD")
    assert command[command.index("--config") + 1] == CONFIG_IN_IMAGE
    exposed = dict(steps)["EXPOSE"]
    assert command[command.index("--port") + 1] == exposed
    health = dict(steps)["HEALTHCHECK"]
    assert f"http://127.0.0.1:{exposed}/readyz" in health
    installed = next(rest for instruction, rest in steps
                     if instruction == "RUN" and "pip install" in rest)
    extras = re.search(r"\.\[([\w,-]+)\]", installed)
    assert extras, installed
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    for extra in extras.group(1).split(","):
        assert re.search(rf"^{re.escape(extra)} = \[", pyproject, re.M), extra


def test_the_configuration_the_image_copies_loads_and_builds(tmp_path: Path) -> None:
    env = {**ENV, "HOOKGATE_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path}/check.db",
           "HOOKGATE_PUBLIC_URL": "https://hookgate.example.com", "ALICE_TOKEN": "t" * 24}
    assert variables_of_config() <= set(env)
    done = CliRunner().invoke(app, ["check", "--config", str(DEPLOY / "hookgate.yaml")],
                              env=env)
    assert done.exit_code == 0, done.output
    assert "ok: 1 agent(s)" in done.output


UNITS = sorted((DEPLOY / "systemd").glob("*.service"))


@pytest.mark.parametrize("unit", UNITS, ids=lambda p: p.name)
def test_a_systemd_unit_is_valid_and_starts_a_real_command(unit: Path, tmp_path: Path) -> None:
    assert {u.name for u in UNITS} == {"hookgate.service", "hookgate-worker.service"}
    parsed = configparser.ConfigParser(strict=True, interpolation=None)
    parsed.optionxform = str  # type: ignore[assignment,method-assign]
    parsed.read_string(unit.read_text(encoding="utf-8"))
    service = parsed["Service"]
    argv = service["ExecStart"].split()
    assert argv[0] == "/opt/hookgate/venv/bin/hookgate"  # the guide's virtual environment
    assert_a_real_command(argv[1:], unit.name)
    assert argv[argv.index("--config") + 1] == CONFIG_IN_IMAGE
    assert service["EnvironmentFile"] == "/etc/hookgate/hookgate.env"
    assert parsed["Install"]["WantedBy"] == "multi-user.target"
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        return
    # systemd's own check, with ExecStart pointing at this environment's hookgate: every
    # key known, every value well formed, the program executable.
    hookgate = Path(sys.executable).parent / "hookgate"
    assert hookgate.exists(), hookgate
    copy = tmp_path / unit.name
    copy.write_text(unit.read_text(encoding="utf-8").replace(argv[0], str(hookgate)),
                    encoding="utf-8")
    done = subprocess.run([analyze, "verify", str(copy)], capture_output=True, text=True,
                          timeout=60)
    said = (done.stdout + done.stderr).strip()
    assert done.returncode == 0 and not said, said
