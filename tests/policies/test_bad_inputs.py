"""Every bad policy or schema input is a one-line error naming the file and line and what to
do, never a traceback or a crashed process: syntax errors, unknown entity types, templates,
huge files, non-UTF-8 text, policies nested or chained past what the Cedar engine's stack
takes (it crashed the process), types that refer to themselves (a tool's, or a schema an
external agent declares), and malformed declared schemas."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hookgate.policies import CallFacts, cedar_schema
from hookgate.policies.live import LivePolicySet
from hookgate.policies.schema import arguments_record
from hookgate.policies.source import MAX_FILE_BYTES
from hookgate.tools.tool import Tool
from tests.policies.world import INVARIANTS, TOOLS, write_policies

ROOT = Path(__file__).resolve().parents[2]
CONFIG = """\
database: sqlite+aiosqlite:///{db}
orgs: [{{id: acme, read_only: false}}]
users: [{{id: alice, org: acme, admin: true}}]
tools: [tests.policies.world:oa__purchase_pay, tests.policies.world:crm__lookup,
        tests.policies.recursive_tools:org__tree, tests.policies.recursive_tools:net__ping]
models: {{script: {{type: scripted, turns: [{{answer: done}}]}}}}
agents:
  - id: buyer
    org: acme
    model: script
    tools: [oa__purchase_pay, crm__lookup, org__tree, net__ping]
    model_config_json: {{hooks: {{class_hooks: [audit_log]}}}}
policies:
  - {{org: acme, path: policies, default: deny}}
"""

PERMIT = '@id("ok")\npermit(principal, action in Action::"call_tool", resource);\n'
DEEP = "(" * 2000 + "1" + ")" * 2000
BAD_FILES: dict[str, tuple[bytes, int, str]] = {
    # name: (the file, the line the error names, words the error says)
    "syntax error": (PERMIT.encode() + b'\n@id("broken")\npermit(principal, action, resource'
                     b") when { context.writes && };\n", 4, "cannot be parsed"),
    "unknown entity type": (PERMIT.encode() + b'\n@id("robots")\npermit(principal is Robot,'
                            b" action, resource);\n", 4, "Robot"),
    "template": (b'permit(principal == ?principal, action, resource);\n', 0, "templates"),
    "huge file": (b"// padding\n" * (MAX_FILE_BYTES // 11 + 1), 0, "larger than"),
    "not UTF-8": (PERMIT.encode() + b"// caf\xe9\n", 3, "not UTF-8"),
    "nested past the engine's stack": (
        PERMIT.encode() + f"\npermit(principal, action, resource) when {{ {DEEP} == 1 }};\n"
        .encode(), 4, "nests brackets more than"),
    "chained past the engine's stack": (
        PERMIT.encode() + ("\npermit(principal, action, resource) when { " +
                           " && ".join(["true"] * 100_000) + " };\n").encode(), 4,
        "more than 1000 operators"),
    "chained past the engine's JSON": (
        PERMIT.encode() + ("\npermit(principal, action, resource) when { " +
                           " && ".join(["context.writes"] * 90) + " };\n").encode(), 4,
        "levels deep"),
    "a recursive argument's attribute": (
        PERMIT.encode() + b'\n@id("tree")\nforbid(principal, action == Action::"org__tree",'
        b' resource) when { context.args.root.children.contains("x") };\n', 4,
        "policy 'tree'"),
}


def hookgate(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hookgate.cli.main", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": f"{ROOT / 'src'}:{ROOT}", "COLUMNS": "300",
                               "NO_COLOR": "1", "PATH": "/usr/bin:/bin"})


@pytest.mark.parametrize("case", list(BAD_FILES), ids=list(BAD_FILES))
def test_a_bad_policy_file_is_a_one_line_error_naming_it(tmp_path: Path, case: str) -> None:
    data, line, words = BAD_FILES[case]
    folder = tmp_path / "policies"
    folder.mkdir()
    (folder / "pay.cedar").write_bytes(data)
    (tmp_path / "hookgate.yaml").write_text(CONFIG.format(db=tmp_path / "h.db"))

    done = hookgate("check", "--config", "hookgate.yaml", cwd=tmp_path)

    said = done.stdout + done.stderr
    assert done.returncode not in (0, -11) and done.returncode > 0, said[-2000:]
    assert "Traceback" not in said, said[-3000:]
    where = "pay.cedar" + (f":{line}:" if line else "")
    (named,) = [text for text in said.splitlines() if where in text and words in text]
    assert len(named) < 600


def test_a_tool_whose_argument_type_refers_to_itself_is_checked_and_typed(
        tmp_path: Path) -> None:
    write_policies(tmp_path / "policies", INVARIANTS + """
@id("small-trees")
forbid(principal, action == Action::"org__tree", resource)
when { context.args.root.name == "board" };
""")
    (tmp_path / "hookgate.yaml").write_text(CONFIG.format(db=tmp_path / "h.db"))

    checked = hookgate("check", "--config", "hookgate.yaml", cwd=tmp_path)
    schema = hookgate("policy", "schema", "--config", "hookgate.yaml", cwd=tmp_path)

    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert schema.returncode == 0 and "Traceback" not in schema.stderr
    # What Cedar can say is typed; the self-referring part is left out.
    assert "name: __cedar::String" in schema.stdout
    assert "children" not in schema.stdout


SELF = {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}},
        "$defs": {"A": {"$ref": "#/$defs/A"}}}
MUTUAL = {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}, "n": {"type": "integer"}},
          "$defs": {"A": {"type": "object", "properties": {"b": {"$ref": "#/$defs/B"}}},
                    "B": {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}}}}
MALFORMED = [
    SELF, MUTUAL,
    {"type": "object", "properties": ["amount", "vendor"]},
    {"type": "object", "properties": {"x": {"type": "array", "items": [1]}}, "required": "x"},
    {"type": "object", "properties": {"x": {"type": ["string", "null"]}, 7: {}}},
    {"type": "object", "properties": {"x": {"$ref": "https://example.com/x"}}},
    {"type": "object", "properties": {"x": {"anyOf": "no"}}, "$defs": []},
]
_nested: dict[str, object] = {"type": "integer"}
for _ in range(5000):
    _nested = {"type": "object", "properties": {"x": _nested}}
MALFORMED.append({"type": "object", "properties": {"x": _nested}})


@pytest.mark.parametrize("schema", MALFORMED, ids=[f"schema-{i}" for i in range(len(MALFORMED))])
def test_a_declared_schema_cedar_cannot_type_is_decided_without_a_crash(
        tmp_path: Path, schema: dict[str, object]) -> None:
    assert arguments_record(schema)["type"] == "Record"
    folder = write_policies(tmp_path / "policies", """\
@id("reads")
permit(principal, action == Action::"web__search", resource);
""")
    live = LivePolicySet(folder, "deny", [], declared_tools=True)
    declared = Tool(name="web__search", description="", parameters=schema,
                    _fn=lambda **_: None)

    decision = live.decide(CallFacts(tool_name="web__search", args={}, user_id="alice",
                                     org_id="acme", agent_id="scout"), declared)

    assert decision.effect == "allow" and decision.policy_ids == ("reads",)


def test_the_schema_of_recursive_tools_has_no_self_reference() -> None:
    from tests.policies.recursive_tools import net__ping, org__tree

    schema = cedar_schema([*TOOLS, org__tree, net__ping])
    args = schema[""]["actions"]["org__tree"]["appliesTo"]["context"]["attributes"]["args"]
    assert args["attributes"]["root"]["attributes"] == {"name": {"type": "String"}}
    assert "first" in schema[""]["actions"]["net__ping"]["appliesTo"]["context"][
        "attributes"]["args"]["attributes"]
