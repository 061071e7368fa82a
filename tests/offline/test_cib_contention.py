"""Another operator edits the CIB between pcmkimg's read and its write (issue 22 item 5), on a
CIB file with Pacemaker's own tools (no cluster).

pcmkimg's compare-and-swap (``pacemaker.update_cib``: the lease taken, renewed and released)
sends a format-2 patch whose source is the version it read; the other edit made in between
(``crm_attribute`` of another node, a constraint, a parameter of another resource) moved the
version on, so ``cibadmin --patch`` refuses it; pcmkimg reads again, builds the patch from the
new version and it lands, and the other edit is still there. The restart's holds and pin are a
``cibadmin --modify`` (a merge by id) and deletes by id: an edit of the same bundle made while
they are in force survives their placing and their removal.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from pcmkimg.adapters import lease as leasing
from pcmkimg.adapters import pacemaker as pm
from pcmkimg.adapters.runner import subprocess_backend
from pcmkimg.core import cib, lease
from tests import fixtures
from tests.offline._tools import run
from tests.sandbox.require import need_tools

EDITS: dict[str, tuple[list[str], str]] = {
    "node attribute": (
        ["crm_attribute", "--node", "controller-2", "--name", "fw-mark", "--update", "7"],
        'name="fw-mark" value="7"',
    ),
    "constraint": (
        [
            "cibadmin",
            "--create",
            "-o",
            "constraints",
            "--xml-text",
            '<rsc_location id="fw-edit" rsc="redis-bundle" node="controller-1" score="7"/>',
        ],
        'id="fw-edit"',
    ),
    "resource parameter": (
        ["crm_resource", "--resource", "galera", "--set-parameter", "fw", "--parameter-value", "7"],
        'name="fw" value="7"',
    ),
}


class Interleaved:
    """The real tools on the CIB file, with the other operator's edit run just before
    pcmkimg's first ``cibadmin --patch`` (after pcmkimg read the CIB); the patches' exit codes."""

    def __init__(self, edit: list[str], path: Path) -> None:
        self.edit = edit
        self.path = path
        self.patches: list[int] = []

    def __call__(
        self, argv: Sequence[str], env: Mapping[str, str], timeout: float, stdin: str | None
    ) -> tuple[int, str, str]:
        patch = tuple(argv[:2]) == ("cibadmin", "--patch")
        if patch and not self.patches:
            run(*self.edit, cib_file=self.path)
        rc, out, err = subprocess_backend(argv, env, timeout, stdin)
        if patch:
            self.patches.append(rc)
        return rc, out, err


@pytest.fixture
def cib_file(tmp_path: Path) -> Path:
    need_tools("cibadmin", "crm_attribute", "crm_resource")
    path = tmp_path / "cib.xml"
    path.write_text(fixtures.text("status-ok.xml"))
    os.chmod(path, 0o600)
    return path


@pytest.mark.parametrize("other", sorted(EDITS))
def test_the_lease_is_taken_renewed_and_released_over_an_edit_made_since_the_read(
    cib_file: Path, other: str
) -> None:
    edit, mark = EDITS[other]
    steps = {
        "take": lambda port, mine: leasing.acquire(port, mine=mine),
        "renew": lambda port, mine: leasing.renew(port, mine),
        "release": lambda port, mine: leasing.release(port, mine),
    }
    mine = leasing.new_lease(30)
    for step, do in steps.items():
        backend = Interleaved(edit, cib_file)
        port = pm.Pacemaker(pm.Runner(cib_file=str(cib_file), backend=backend))
        if step == "renew":
            mine = do(port, mine)
        else:
            do(port, mine)
        text = cib_file.read_text()
        assert mark in text, f"{step}: the other edit is gone"
        # The first patch was refused (its source version is gone), the second landed.
        assert len(backend.patches) == 2 and backend.patches[0] != 0, (step, backend.patches)
        assert backend.patches[1] == 0
        held = lease.read(cib.parse_cib(text.encode()))
        assert (held is None) == (step == "release"), step
        if held is not None:
            assert held.token == mine.token and held.renewals == mine.renewals
        run("crm_attribute", "--node", "controller-2", "--name", "fw-mark", "--delete",
            cib_file=cib_file)  # fmt: skip
        run("cibadmin", "--delete", "-o", "constraints", "--xml-text",
            '<rsc_location id="fw-edit"/>', cib_file=cib_file, check=False)  # fmt: skip
        run("crm_resource", "--resource", "galera", "--delete-parameter", "fw",
            cib_file=cib_file, check=False)  # fmt: skip


def test_an_edit_of_the_same_bundle_survives_the_holds_and_the_pin(cib_file: Path) -> None:
    r = pm.Runner(cib_file=str(cib_file))
    holds = pm.Holds(r, "galera-bundle", 60)
    holds.place(["controller-0", "controller-2"])
    meta = ["crm_resource", "--resource", "galera-bundle", "--meta", "--set-parameter"]
    run(*meta, "fw-note", "--parameter-value", "kept", cib_file=cib_file)
    run(*EDITS["constraint"][0], cib_file=cib_file)
    holds.place(["controller-1"])  # written again: the lifetime renewed, one ban more
    holds.release()
    config = cib.parse_cib(cib_file.read_bytes())
    text = cib_file.read_text()
    assert 'name="fw-note" value="kept"' in text
    assert 'id="fw-edit"' in text
    assert not [c.id for c in cib.cli_constraints(config)]
    assert "pcmkimg-pin" not in text
