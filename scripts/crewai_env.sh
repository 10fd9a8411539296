#!/usr/bin/env bash
# CrewAI's adapter tests (tests/integrations/crewai) in an environment of their own: CrewAI
# pins mcp<2 while hookgate's MCP gateway needs mcp>=2.3, so the two cannot share one. Builds
# (or reuses) a virtualenv with CrewAI, hookgate without its MCP dependency and pytest, then
# runs the tests there (and the samples of docs/integrations/crewai.md); extra arguments go to
# pytest. HOOKGATE_CREWAI_VENV picks the folder.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${HOOKGATE_CREWAI_VENV:-.cache/venv-crewai}
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
py="$venv/bin/python"

# hookgate's own requirements and the crewai extra, less mcp (the MCP gateway is not tested
# here; the server loads it only for a configuration that declares mcp_servers).
mapfile -t requirements < <("$py" - <<'PY'
import re
import tomllib

with open("pyproject.toml", "rb") as f:
    project = tomllib.load(f)["project"]
wanted = project["dependencies"] + project["optional-dependencies"]["crewai"]
for requirement in wanted:
    if re.match(r"[A-Za-z0-9_.-]+", requirement).group(0).lower() != "mcp":
        print(requirement)
PY
)
"$py" -m pip install -q "${requirements[@]}" "pytest>=8" "pytest-asyncio>=0.24" \
  "pytest-timeout>=2.3"
"$py" -m pip install -q --no-deps -e .
"$py" -m pytest -q -p no:cacheprovider tests/integrations/crewai \
  "tests/docs/test_samples.py::test_the_python_samples_of_a_page_run[docs/integrations/crewai.md]" "$@"
