"""The core's modules import each other without a cycle, and never hide one.

A cycle between two modules can be kept from failing at import time by moving one side's import
into a function; it then fails, or not, depending on which module a program imports first. So
the core's imports of pcmkimg modules stand at module level (or, for type annotations only,
under ``if TYPE_CHECKING:``), the graph they draw has no cycle, and each module imports alone,
first, in a fresh interpreter. A function may still import the standard library late (the
agent's monitor saves the cost of ``json`` that way).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "pcmkimg" / "core"


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(CORE.rglob("*.py"))}


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imported(node: ast.Import | ast.ImportFrom, module: str) -> set[str]:
    """The pcmkimg modules an import statement of ``module`` loads (a name imported from a
    package counts as its submodule when there is one)."""
    if isinstance(node, ast.Import):
        return {a.name for a in node.names if a.name.split(".")[0] == "pcmkimg"}
    base = node.module or ""
    if node.level:
        package = module.split(".")
        if MODULES.get(module, Path()).name != "__init__.py":
            package = package[:-1]
        package = package[: len(package) - node.level + 1]
        base = ".".join([*package, *([base] if base else [])])
    if base.split(".")[0] != "pcmkimg":
        return set()
    return {base} | {f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in MODULES}


def run_time_imports(module: str) -> tuple[set[str], list[str]]:
    """The pcmkimg modules ``module`` imports at module level (outside ``if TYPE_CHECKING``),
    and the imports of pcmkimg modules it makes inside a function (line: statement)."""
    tree = ast.parse(MODULES[module].read_text())
    top: set[str] = set()
    late: list[str] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking(child.test):
                for other in child.orelse:
                    visit(other, in_function)
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                found = _imported(child, module)
                if found and in_function:
                    late.append(f"{child.lineno}: {ast.unparse(child)}")
                elif not in_function:
                    top.update(found)
                continue
            nested = isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            visit(child, in_function or nested)

    visit(tree, False)
    return top, late


def test_the_checks_see_every_core_module() -> None:
    assert {"pcmkimg.core.images", "pcmkimg.core.naming", "pcmkimg.core.cib.read"} <= set(MODULES)
    top, late = run_time_imports("pcmkimg.core.store")
    assert {"pcmkimg.core.images", "pcmkimg.core.naming"} <= top and not late


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_core_module_imports_pcmkimg_inside_a_function(module: str) -> None:
    _, late = run_time_imports(module)
    assert not late, f"{module} imports inside a function (a hidden cycle?): {late}"


def test_the_core_imports_draw_no_cycle() -> None:
    graph = {}
    for module in MODULES:
        top, _ = run_time_imports(module)
        graph[module] = {m for m in top if m in MODULES and m != module}
    try:
        tuple(TopologicalSorter(graph).static_order())
    except CycleError as err:
        pytest.fail(f"import cycle in the core: {' -> '.join(err.args[1])}")


def test_each_core_module_imports_first_in_a_fresh_interpreter() -> None:
    """One interpreter per module, that module imported before any other of pcmkimg."""
    procs = {
        module: subprocess.Popen(
            [sys.executable, "-c", f"import {module}"],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for module in MODULES
    }
    failed = {}
    for module, proc in procs.items():
        _, err = proc.communicate(timeout=60)
        if proc.returncode:
            failed[module] = err.strip().splitlines()[-1:]
    assert not failed, failed
