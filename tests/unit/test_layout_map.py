"""CONTRIBUTING.md's layout map (section "Development": the code block of ``pcmkimg/...`` lines) is
complete and true: each module it names exists, and each module of ``pcmkimg/`` is in it.

The map is read as CONTRIBUTING.md writes it: a line at the left margin names a top-level file
(``pcmkimg/cli.py``) or folder (``pcmkimg/core/``); an entry indented by two spaces per level
names a file or a folder inside the folder above it; a line indented past the entries, in the
description column, goes on with the description above. Every entry has a description.

"Each module" is every ``.py`` file under ``pcmkimg/``, read from the tree when the test runs,
except a package's ``__init__.py`` that only imports (and lists ``__all__``): its folder's entry
stands for it. An ``__init__.py`` that holds something of its own (``pcmkimg/__init__.py``: the
version and the shared constants) and ``__main__.py`` are modules like the others.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "pcmkimg"
LAYOUT_DOC = ROOT / "CONTRIBUTING.md"
ENTRY = re.compile(r"(?P<indent>(?:  )*)(?P<name>[\w./]+?)(?: {2,}(?P<what>\S.*))?")
"""An entry: its indentation (two spaces a level), its name, two spaces at least, what it
holds."""


def layout_map(text: str) -> list[str]:
    """The lines of the code block of CONTRIBUTING.md whose first line names ``pcmkimg/``."""
    blocks = re.findall(r"^```[^\n]*\n(.*?)^```", text, flags=re.M | re.S)
    found = [b for b in blocks if b.startswith("pcmkimg/")]
    assert len(found) == 1, "CONTRIBUTING.md has no layout map (a code block of pcmkimg/ lines)"
    return found[0].splitlines()


def mapped(lines: list[str]) -> dict[str, str]:
    """Path (relative to the repository) -> what the map says it holds."""
    entries: dict[str, str] = {}
    folders: list[str] = []  # the folder of each level above the current line
    column = None  # where descriptions start: a line indented that far goes on the one above
    last = None
    for line in lines:
        indent = len(line) - len(line.lstrip(" "))
        if column is not None and indent >= column:
            assert last is not None, f"a continuation with no entry above it: {line!r}"
            entries[last] += " " + line.strip()
            continue
        found = ENTRY.fullmatch(line)
        assert found and found["what"], f"not an entry 'NAME  what it holds': {line!r}"
        level = len(found["indent"]) // 2
        assert level <= len(folders), f"indented under no folder: {line!r}"
        name = found["name"]
        path = "/".join([*folders[level - 1 : level], name.rstrip("/")])
        folders[level:] = [path] if name.endswith("/") else []
        column = found.start("what")
        entries[path] = found["what"]
        last = path
    return entries


def only_imports(path: Path) -> bool:
    """A module of a docstring, imports and ``__all__``, nothing of its own."""

    def imports(node: ast.stmt) -> bool:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            return True
        if isinstance(node, ast.Expr):
            return isinstance(node.value, ast.Constant)
        targets = node.targets if isinstance(node, ast.Assign) else []
        return [ast.unparse(t) for t in targets] == ["__all__"]

    return all(imports(node) for node in ast.parse(path.read_text()).body)


def modules() -> set[str]:
    """Every module of pcmkimg/ in the tree now (see the docstring for what counts)."""
    found = set()
    for path in PKG.rglob("*.py"):
        if "__pycache__" in path.parts:
            continue
        if path.name == "__init__.py" and only_imports(path):
            continue
        found.add(path.relative_to(ROOT).as_posix())
    return found


ENTRIES = mapped(layout_map(LAYOUT_DOC.read_text()))


def test_the_map_reads_as_a_tree() -> None:
    """The reading itself: folders nest, descriptions go on, and an odd line is refused."""
    sample = [
        "pcmkimg/a.py      one",
        "pcmkimg/core/     two",
        "  b.py            three",
        "                  and more",
        "  cib/            four",
        "    c.py          five",
        "  d.py            six",
        "pcmkimg/e.py      seven",
    ]
    assert mapped(sample) == {
        "pcmkimg/a.py": "one",
        "pcmkimg/core": "two",
        "pcmkimg/core/b.py": "three and more",
        "pcmkimg/core/cib": "four",
        "pcmkimg/core/cib/c.py": "five",
        "pcmkimg/core/d.py": "six",
        "pcmkimg/e.py": "seven",
    }
    with pytest.raises(AssertionError, match="indented under no folder"):
        mapped(["pcmkimg/a.py      one", "  b.py            two"])
    with pytest.raises(AssertionError, match="not an entry"):
        mapped(["pcmkimg/a.py b.py    one and two"])


def test_every_entry_of_the_map_exists() -> None:
    missing = sorted(p for p in ENTRIES if not (ROOT / p).exists())
    assert not missing, f"CONTRIBUTING.md's layout map names what the tree does not have: {missing}"


def test_every_module_is_in_the_map() -> None:
    absent = sorted(modules() - set(ENTRIES))
    assert not absent, (
        f"modules CONTRIBUTING.md's layout map leaves out: {absent}; give each a line of what it "
        "holds, under its folder"
    )


def test_every_folder_of_pcmkimg_is_in_the_map() -> None:
    folders = {
        p.relative_to(ROOT).as_posix()
        for p in PKG.rglob("*")
        if p.is_dir() and (p / "__init__.py").exists()
    }
    assert folders - {"pcmkimg"} <= set(ENTRIES), sorted(folders - set(ENTRIES) - {"pcmkimg"})
