"""The architecture holds by construction, checked over the source tree (AST, no imports):
one guarded path runs tools, the hook model depends on nothing else in hookgate, and every
engine runs its tool calls through that path. The scans cover modules added later too."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "hookgate"

#: The guarded path, and the module that defines the private callable it calls.
MAY_CALL_TOOL_FUNCTIONS = {"tools/guarded.py", "tools/tool.py"}
TOOL_PRIVATES = {"_invoke", "_fn"}

#: Packages whose modules run agents or tool calls: engines, workflows, delegation, evals.
RUNNER_PACKAGES = ("engines", "workflows", "delegation", "evals")
RUNNER_CLASS_SUFFIXES = ("Engine", "Runner")
TOOL_RUNNING_CALLS = {"execute_tool_call", "run_call", "run_calls", *TOOL_PRIVATES}
#: Importing one of these means tool calls go through the guarded path.
GUARDED_ENTRANCES = {"execute_tool_call", "RunDriver"}


def modules(under: Path = PACKAGE) -> list[Path]:
    return sorted(p for p in under.rglob("*.py") if "__pycache__" not in p.parts)


def rel(path: Path) -> str:
    return path.relative_to(PACKAGE).as_posix()


def parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def module_name(path: Path) -> str:
    parts = ["hookgate", *path.relative_to(PACKAGE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(tree: ast.Module, name: str, is_package: bool) -> list[tuple[str, list[str]]]:
    """Every import anywhere in the module (also inside functions and TYPE_CHECKING blocks),
    as (absolute module, names taken from it); relative imports resolved against ``name``."""
    out: list[tuple[str, list[str]]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((alias.name, []) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".")
                anchor = anchor if is_package else anchor[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            out.append((base, [alias.name for alias in node.names]))
    return out


def tool_private_uses(tree: ast.Module) -> list[str]:
    """``x._invoke`` / ``x._fn`` (other than an object's own ``self._fn``) and
    ``getattr(x, "_invoke")``, with line numbers."""
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and node.attr in TOOL_PRIVATES
                and not (isinstance(node.value, ast.Name) and node.value.id == "self")):
            found.append(f"line {node.lineno}: .{node.attr}")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ("getattr", "setattr", "hasattr") and len(node.args) >= 2
              and isinstance(node.args[1], ast.Constant)
              and node.args[1].value in TOOL_PRIVATES):
            found.append(f"line {node.lineno}: {node.func.id}(…, {node.args[1].value!r})")
    return found


def runs_tools(tree: ast.Module) -> bool:
    """A module runs tools if it defines an engine or runner class, or calls something that
    executes a tool call (the guarded path, the driver's run_call(s), a tool's privates)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name.endswith(RUNNER_CLASS_SUFFIXES):
            return True
        if isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called in TOOL_RUNNING_CALLS:
                return True
    return False


def takes_the_guarded_path(tree: ast.Module, name: str, is_package: bool) -> bool:
    for module, names in imported_modules(tree, name, is_package):
        if not module.startswith("hookgate."):
            continue
        if GUARDED_ENTRANCES & set(names):
            return True
        # Running an agent through an engine (workflow AGENT nodes, delegates) goes through
        # that engine's RunDriver.
        if module.startswith("hookgate.engines") and any(n.endswith("Engine") for n in names):
            return True
    return False


def runner_modules() -> list[Path]:
    return [p for pkg in RUNNER_PACKAGES if (PACKAGE / pkg).is_dir()
            for p in modules(PACKAGE / pkg)]


# -- (a) one guarded path -----------------------------------------------------------------


@pytest.mark.parametrize(
    "path", [p for p in modules() if rel(p) not in MAY_CALL_TOOL_FUNCTIONS], ids=rel)
def test_nothing_but_the_guarded_path_calls_a_tools_function(path: Path) -> None:
    assert tool_private_uses(parse(path)) == [], (
        f"{rel(path)} reaches into a tool's private callable; call tools through "
        "hookgate.tools.execute_tool_call so that the hooks run")


def test_the_guarded_path_is_where_the_tool_function_is_called() -> None:
    # Keeps the scan honest: it does find the one place that is allowed.
    assert tool_private_uses(parse(PACKAGE / "tools" / "guarded.py"))


def test_the_scan_catches_a_tool_called_around_the_guarded_path() -> None:
    rogue = ast.parse("async def shortcut(tool, args):\n"
                      "    await tool._invoke(args)\n"
                      "    return tool._fn(**args), getattr(tool, '_fn')\n")
    assert len(tool_private_uses(rogue)) == 3


# -- (b) the hook model stands alone ------------------------------------------------------


@pytest.mark.parametrize("path", modules(PACKAGE / "hooks"), ids=rel)
def test_the_hook_model_imports_nothing_else_from_hookgate(path: Path) -> None:
    name, is_package = module_name(path), path.name == "__init__.py"
    outside = [m for m, _ in imported_modules(parse(path), name, is_package)
               if (m == "hookgate" or m.startswith("hookgate."))
               and not (m == "hookgate.hooks" or m.startswith("hookgate.hooks."))]
    assert outside == [], f"{rel(path)} imports {outside}; hookgate.hooks must stand alone"


def test_the_import_scan_resolves_relative_imports() -> None:
    tree = ast.parse("from ..tools import Tool\nfrom . import model\n")
    found = imported_modules(tree, "hookgate.hooks.registry", is_package=False)
    assert found == [("hookgate.tools", ["Tool"]), ("hookgate.hooks", ["model"])]


# -- (c) engines run tools through the guarded path ---------------------------------------


def test_engine_modules_that_run_tools_take_the_guarded_path() -> None:
    running = [p for p in runner_modules() if runs_tools(parse(p))]
    # The scan must see the engines that exist today, or it proves nothing.
    assert {"engines/driver.py", "engines/react.py", "engines/dag.py"} <= {
        rel(p) for p in running}
    strays = [rel(p) for p in running
              if not takes_the_guarded_path(parse(p), module_name(p), p.name == "__init__.py")]
    assert strays == [], (
        f"{strays} run tool calls without execute_tool_call or RunDriver; every execution "
        "path must call tools through hookgate.tools.execute_tool_call")


def test_the_engine_scan_flags_an_engine_that_skips_the_guarded_path() -> None:
    rogue_engine = ast.parse("from hookgate.tools.calls import ToolCall\n"
                             "class ShortcutEngine:\n"
                             "    async def run(self, call: ToolCall) -> None: ...\n")
    rogue_node = ast.parse("async def run_node(tool, args):\n"
                           "    return await tool._invoke(args)\n")
    for rogue in (rogue_engine, rogue_node):
        assert runs_tools(rogue)
        assert not takes_the_guarded_path(rogue, "hookgate.engines.shortcut", is_package=False)


# -- (d) the engines sit below the catalog, the approvals and storage ----------------------

#: What the engines may import from hookgate: the layers below them (decision 0005).
ENGINES_MAY_IMPORT = ("agent", "canonical", "durations", "engines", "expressions", "hooks",
                      "llm", "matching", "retries", "telemetry", "tools")


@pytest.mark.parametrize("path", modules(PACKAGE / "engines"), ids=rel)
def test_the_engines_import_nothing_above_them(path: Path) -> None:
    name, is_package = module_name(path), path.name == "__init__.py"
    above = [m for m, _ in imported_modules(parse(path), name, is_package)
             if (m == "hookgate" or m.startswith("hookgate."))
             and m.split(".")[1:2] not in ([p] for p in ENGINES_MAY_IMPORT)]
    assert above == [], (f"{rel(path)} imports {above}; the engines take a registry "
                         "builder instead (hookgate.engines.registries)")


#: Where the deployment's objects are built: the runtime, and the executors it builds.
BUILDERS = ("runtime/runtime.py", "runs/executors/queue.py", "runs/executors/in_process.py",
            "runs/runner.py")


def _sets_anothers_attribute(target: ast.expr) -> bool:
    # ``a.b.c = ...`` (or ``self.a.b = ...``): an attribute of an object this code did not
    # make is set after that object was built.
    return isinstance(target, ast.Attribute) and isinstance(target.value, ast.Attribute)


@pytest.mark.parametrize("builder", BUILDERS)
def test_objects_are_wired_through_their_constructors_not_by_attributes_set_afterwards(
        builder: str) -> None:
    tree = parse(PACKAGE / builder)
    offenders = [
        f"{builder}:{node.lineno}: {ast.unparse(target)} = ..."
        for node in ast.walk(tree) if isinstance(node, ast.Assign | ast.AnnAssign)
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if _sets_anothers_attribute(target)
    ]
    assert offenders == []


def test_the_scan_for_attributes_set_afterwards_finds_one() -> None:
    tree = ast.parse("def build(self, q):\n    self.approvals.after_transition = q.go\n")
    assign = next(n for n in ast.walk(tree) if isinstance(n, ast.Assign))
    assert _sets_anothers_attribute(assign.targets[0])
