"""The layers of pcmkimg, checked from the source (ast): the pure core imports nothing that
does I/O, and only the entry points (cli.py, agent.py) and the workflows use a workflow."""

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
        or m in ("pcmkimg.cli", "pcmkimg.agent")
    )
    assert bad == [], f"{path.relative_to(PKG)} imports {bad}"


def test_only_the_entry_points_and_workflows_use_a_workflow() -> None:
    users = {
        str(path.relative_to(PKG))
        for path in PKG.rglob("*.py")
        if any(m.startswith("pcmkimg.workflows") for m in imports(path))
    }
    allowed = {"cli.py", "agent.py"} | {str(p.relative_to(PKG)) for p in modules("workflows")}
    assert users - allowed == set()


@pytest.mark.parametrize("path", modules("adapters"), ids=lambda p: str(p.relative_to(PKG)))
def test_adapters_never_use_a_workflow_or_the_entry_points(path: Path) -> None:
    bad = sorted(
        m
        for m in imports(path)
        if m.startswith("pcmkimg.workflows") or m in ("pcmkimg.cli", "pcmkimg.agent")
    )
    assert bad == []


def test_the_checks_see_the_imports_they_judge() -> None:
    """The walk finds function-level imports too (a check that saw nothing proves nothing)."""
    found = imports(PKG / "cli.py")
    assert "pcmkimg.workflows.rollback" in found and "click" in found


def test_nothing_but_the_agent_loads_the_ocf_toolkit() -> None:
    """The CLI must not load the agent (it did, for the attribute's value) nor the toolkit."""
    users = sorted(
        str(path.relative_to(PKG))
        for path in PKG.rglob("*.py")
        if any(m == "pcmkimg.agent" or m == "ocf" or m.startswith("ocf.") for m in imports(path))
    )
    assert users == ["agent.py"]
