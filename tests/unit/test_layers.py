"""The layers of pcmkimg, checked from the source (ast): the pure core imports nothing that
does I/O, and only the entry points (cli.py, agent.py) and the workflows use a workflow; and no
test patches a name of ours (the fakes come in through the ports)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "pcmkimg"
FORBIDDEN_IN_CORE = ("subprocess", "socket", "podman", "click", "requests", "pcmkimg.adapters")


def imports(path: Path) -> set[str]:
    """Every module ``path`` imports, at module level or inside a function."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def modules(sub: str) -> list[Path]:
    return sorted((PKG / sub).rglob("*.py"))


@pytest.mark.parametrize("path", modules("core"), ids=lambda p: str(p.relative_to(PKG)))
def test_the_core_does_no_io_and_knows_no_shell(path: Path) -> None:
    bad = sorted(
        m
        for m in imports(path)
        if any(m == f or m.startswith(f"{f}.") for f in FORBIDDEN_IN_CORE)
        or m.startswith("pcmkimg.workflows")
        or m in ("pcmkimg.cli", "pcmkimg.wiring", "pcmkimg.agent")
    )
    assert bad == [], f"{path.relative_to(PKG)} imports {bad}"


def test_only_the_entry_points_and_workflows_use_a_workflow() -> None:
    """The CLI's wiring (wiring.py) is part of the entry point: it makes the context."""
    users = {
        str(path.relative_to(PKG))
        for path in PKG.rglob("*.py")
        if any(m.startswith("pcmkimg.workflows") for m in imports(path))
    }
    entry = {"cli.py", "wiring.py", "agent.py"}
    allowed = entry | {str(p.relative_to(PKG)) for p in modules("workflows")}
    assert users - allowed == set()


@pytest.mark.parametrize("path", modules("adapters"), ids=lambda p: str(p.relative_to(PKG)))
def test_adapters_never_use_a_workflow_or_the_entry_points(path: Path) -> None:
    bad = sorted(
        m
        for m in imports(path)
        if m.startswith("pcmkimg.workflows")
        or m in ("pcmkimg.cli", "pcmkimg.wiring", "pcmkimg.agent")
    )
    assert bad == []


def test_the_checks_see_the_imports_they_judge() -> None:
    """The walk finds function-level imports too (a check that saw nothing proves nothing)."""
    found = imports(PKG / "cli.py")
    assert "pcmkimg.workflows.rollback" in found and "click" in found


def test_nothing_but_the_agent_loads_the_ocf_toolkit() -> None:
    """The CLI must not load the agent (it did, for the attribute's value) nor the toolkit;
    the records take the toolkit's light dataclass stand-in (``ocf._light``) and nothing else
    of it (what that loads at run time: test_runner_env.py)."""
    users = {
        str(path.relative_to(PKG)): [
            m for m in imports(path) if m == "pcmkimg.agent" or m == "ocf" or m.startswith("ocf.")
        ]
        for path in PKG.rglob("*.py")
    }
    users = {path: found for path, found in users.items() if found}
    assert sorted(users) == ["agent.py", "records.py"]
    assert all(m.startswith("ocf._light.") or m == "ocf._light" for m in users["records.py"])


# ------------------------------------------------------------------------ the tests patch nothing

TESTS = PKG.parent / "tests"
OURS = ("pcmkimg", "ocf")
"""The project's packages: a test gives a fake through a port, never patches one of their names."""
PATCHERS = frozenset({"setattr", "delattr"})
"""``monkeypatch.setattr``, ``mp.delattr``, the builtin ``setattr``; ``patch.object`` and
``patch("pcmkimg....")`` of unittest.mock are judged too."""


def _allowed() -> tuple[object, ...]:
    """What a test may patch, even through one of our modules (``journal.os``): the
    environment, the clock, signals and the system log."""
    import os
    import signal
    import syslog
    import time

    return (os, os.environ, time, signal, syslog)


def _ours(dotted: str) -> bool:
    return any(dotted == p or dotted.startswith(f"{p}.") for p in OURS)


def _bound_names(tree: ast.Module) -> dict[str, str]:
    """The names a test module binds to our modules and their objects: name -> dotted origin."""
    bound: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _ours(alias.name):
                    if alias.asname:
                        bound[alias.asname] = alias.name
                    else:
                        top = alias.name.split(".")[0]
                        bound[top] = top
        elif isinstance(node, ast.ImportFrom) and node.module and _ours(node.module):
            for alias in node.names:
                bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return bound


def _dotted(expr: ast.expr) -> list[str] | None:
    parts: list[str] = []
    while isinstance(expr, ast.Attribute):
        parts.insert(0, expr.attr)
        expr = expr.value
    if isinstance(expr, ast.Name):
        return [expr.id, *parts]
    return None


def _target(call: ast.Call) -> ast.expr | None:
    """The object (or "module.name" string) a call patches, if it is a patch at all."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    path = _dotted(func) or []
    mock_patch = path in (["patch"], ["mock", "patch"], ["unittest", "mock", "patch"])
    patch_object = path[-2:] == ["patch", "object"]
    if name in PATCHERS or mock_patch or patch_object:
        return call.args[0] if call.args else None
    return None


def _resolve(dotted: str) -> object:
    """The object ``dotted`` names (a module, then attributes); AttributeError when none."""
    import importlib

    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise AttributeError(dotted)


def patches_of_ours(source: str, filename: str = "<test>") -> list[tuple[int, str, bool]]:
    """Every patch in a test's source whose target is one of our modules or an object from
    them: (line, what it patches, allowed). Allowed: the target is the environment, the
    clock, signals or the system log, even seen through our module (``journal.os``)."""
    tree = ast.parse(source, filename)
    bound = _bound_names(tree)
    allowed = _allowed()
    found = []
    for call in ast.walk(tree):
        if not isinstance(call, ast.Call):
            continue
        target = _target(call)
        if target is None:
            continue
        if isinstance(target, ast.Constant) and isinstance(target.value, str):
            dotted = target.value.rpartition(".")[0]  # "pcmkimg.agent._find": what holds it
        else:
            parts = _dotted(target)
            if parts is None or parts[0] not in bound:
                continue  # not one of ours (a local fake, a standard module)
            dotted = ".".join([bound[parts[0]], *parts[1:]])
        if not _ours(dotted):
            continue
        try:
            obj = _resolve(dotted)
        except AttributeError:
            found.append((call.lineno, dotted, False))
            continue
        found.append((call.lineno, dotted, any(obj is a for a in allowed)))
    return sorted(found)


def test_no_test_patches_a_name_of_ours() -> None:
    """A test gives pcmkimg its fakes through a port (tests/fakes.py, the agent's ports), it
    never patches one of our names; the environment, the clock and signals aside."""
    judged, offenders = 0, []
    for path in sorted(TESTS.rglob("*.py")):
        for line, dotted, allowed in patches_of_ours(path.read_text(), str(path)):
            judged += 1
            if not allowed:
                offenders.append(f"{path.relative_to(TESTS.parent)}:{line}: patches {dotted}")
    assert offenders == []
    assert judged >= 2  # journal.os and pacemaker.time: the check sees the calls it judges


SAMPLE = """
import time
import pcmkimg.adapters.journal
from unittest import mock
from unittest.mock import patch
from pcmkimg import agent, cli
from pcmkimg.adapters import pacemaker as pm
from pcmkimg.core.cib import read
import ocf.log as L

def test(monkeypatch, mp):
    monkeypatch.setattr(agent, "_find", None)
    monkeypatch.setattr("pcmkimg.agent._resolve", None)
    mp.delattr(cli.update, "callback")
    setattr(read, "_config_elements", None)
    patch.object(read, "_index")
    mock.patch("pcmkimg.core.cib.read._index")
    monkeypatch.setattr(L.Logger, "log", None)
    monkeypatch.setattr(pm.time, "sleep", None)
    monkeypatch.setattr(pcmkimg.adapters.journal.os, "write", None)
    monkeypatch.setattr(time, "sleep", None)
    monkeypatch.setattr(fake, "names", {})
"""


def test_the_patch_check_sees_the_patches_it_judges() -> None:
    """A check that saw nothing proves nothing: each form of patch in a sample is caught; the
    clock and the environment through our modules are let through; what is not ours is not
    judged."""
    assert patches_of_ours(SAMPLE) == [
        (12, "pcmkimg.agent", False),
        (13, "pcmkimg.agent", False),
        (14, "pcmkimg.cli.update", False),
        (15, "pcmkimg.core.cib.read", False),
        (16, "pcmkimg.core.cib.read", False),
        (17, "pcmkimg.core.cib.read", False),
        (18, "ocf.log.Logger", False),
        (19, "pcmkimg.adapters.pacemaker.time", True),
        (20, "pcmkimg.adapters.journal.os", True),
    ]


# ------------------------------------------------------------------------ no import circle


def _module_name(path: Path) -> str:
    parts = path.relative_to(PKG.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PKG.rglob("*.py"))}


def _imported_modules(node: ast.Import | ast.ImportFrom, module: str) -> set[str]:
    """The pcmkimg modules one import statement names (a name imported from a package counts
    as its submodule when there is one; otherwise the nearest module that holds it)."""
    if isinstance(node, ast.Import):
        names = {a.name for a in node.names}
    else:
        base = node.module or ""
        if node.level:
            package = module.split(".")
            if MODULES[module].name != "__init__.py":
                package = package[:-1]
            package = package[: len(package) - node.level + 1]
            base = ".".join([*package, *([base] if base else [])])
        subs = {f"{base}.{a.name}" for a in node.names} & set(MODULES)
        names = subs or {base}
    found = set()
    for name in names:
        while name and name not in MODULES:
            name = name.rpartition(".")[0]
        if name:
            found.add(name)
    return found


def import_graph() -> dict[str, set[str]]:
    """module -> the pcmkimg modules it imports: every import statement, at module level, in
    a function or under ``if TYPE_CHECKING:`` (a type-only import draws a circle too)."""
    graph: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                found |= _imported_modules(node, module)
        graph[module] = found - {module}
    return graph


def cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import circle of ``graph`` (its modules in order, the first again at the end), or
    [] when it has none."""
    from graphlib import CycleError, TopologicalSorter

    try:
        tuple(TopologicalSorter(graph).static_order())
    except CycleError as err:
        return list(err.args[1])
    return []


def test_no_import_circle_among_pcmkimgs_modules() -> None:
    assert cycle(import_graph()) == []


def test_the_circle_check_sees_type_only_and_late_imports() -> None:
    """A check that saw nothing proves nothing: the graph holds a function-level import (the
    wiring's workflows.context), a TYPE_CHECKING one (tunnel -> config) and relative names;
    a circle drawn by hand is found."""
    graph = import_graph()
    assert "pcmkimg.workflows.context" in graph["pcmkimg.wiring"]
    assert "pcmkimg.adapters.config" in graph["pcmkimg.adapters.tunnel"]
    assert {"pcmkimg.core.cib.read", "pcmkimg.core.cib.edit"} <= graph["pcmkimg.core.cib"]
    made = {
        **graph,
        "pcmkimg.adapters.config": {*graph["pcmkimg.adapters.config"], "pcmkimg.adapters.tunnel"},
    }
    assert set(cycle(made)) == {"pcmkimg.adapters.config", "pcmkimg.adapters.tunnel"}
