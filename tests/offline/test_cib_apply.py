"""pcmkimg.core.cib edits applied by Pacemaker's own tools to CIB files (no cluster)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pcmkimg.core import cib as C
from pcmkimg.core import lease
from tests import fixtures
from tests.offline._tools import run, write
from tests.sandbox.require import need_tools

FLOATING = "cluster.common.tag/mariadb:pcmklatest"


def config_of(path: Path) -> tuple:
    return fixtures.canonical(C.parse_cib(path.read_bytes()).find("configuration"))


EDITS = {
    "image": lambda t: C.set_bundle_image(t, "galera-bundle", "reg:8787/ns/mariadb:17.1"),
    "meta": lambda t: C.set_bundle_meta(t, "redis-bundle", "target-role", "Stopped"),
    "add-guard": lambda t: C.add_guard(t, "galera-bundle", FLOATING),
    "remove-guard": lambda t: C.remove_guard(
        C.add_guard(t, "galera-bundle", FLOATING).new_cib, "galera-bundle"
    ),
    "legacy-lease": lambda t: C.set_cluster_property(t, "pcmkimg-lease", "holder=a;expires=1"),
}


@pytest.mark.parametrize("name", sorted(EDITS))
def test_patch_applies_with_cibadmin_and_verifies(tmp_path: Path, name: str) -> None:
    need_tools("cibadmin", "crm_verify")
    start = fixtures.cib("status-ok.xml")  # a CIB with a status section and num_updates > 0
    if name == "remove-guard":
        start = C.add_guard(start, "galera-bundle", FLOATING).new_cib
        change = C.remove_guard(start, "galera-bundle")
    else:
        change = EDITS[name](start)
    live = write(tmp_path / "live.xml", start)
    patch = tmp_path / "patch.xml"
    patch.write_bytes(change.patch_xml())
    run("cibadmin", "--patch", "--xml-file", str(patch), cib_file=live)
    assert config_of(live) == fixtures.canonical(change.new_cib.find("configuration"))
    run("crm_verify", "-x", str(live))


def test_patch_is_refused_when_the_cib_moved(tmp_path: Path) -> None:
    need_tools("cibadmin", "crm_attribute")
    start = fixtures.cib("base.xml")
    change = C.set_bundle_image(start, "galera-bundle", "x")
    live = write(tmp_path / "live.xml", start)
    run("crm_attribute", "-n", "other-change", "-v", "1", cib_file=live)  # someone else writes
    patch = tmp_path / "patch.xml"
    patch.write_bytes(change.patch_xml())
    proc = run("cibadmin", "--patch", "--xml-file", str(patch), cib_file=live, check=False)
    assert proc.returncode == 103, proc.stderr  # pcmk_err_old_data
    assert C.bundle(C.parse_cib(live.read_bytes()), "galera-bundle").image == FLOATING


def test_the_lease_is_a_status_patch_bumping_num_updates_and_a_compare_and_swap(
    tmp_path: Path,
) -> None:
    """The lease's ticket state: Pacemaker applies its patch under ``/cib/status`` with only
    ``num_updates`` bumped, refuses a second patch made from the same read, and a takeover of
    an older pcmkimg's property deletes it in the same patch."""
    need_tools("cibadmin", "crm_verify")
    start = fixtures.cib("status-ok.xml")
    a, b = lease.Lease("a", 1, "ta"), lease.Lease("b", 2, "tb")
    live = write(tmp_path / "live.xml", start)
    patch = tmp_path / "patch.xml"

    def apply(change: C.CibChange, check: bool = True) -> int:
        patch.write_bytes(change.patch_xml())
        proc = run("cibadmin", "--patch", "--xml-file", str(patch), cib_file=live, check=check)
        return proc.returncode

    apply(lease.write(start, a))
    now = C.parse_cib(live.read_bytes())
    assert lease.read(now) == a
    version, before = C.cib_version(now), C.cib_version(start)
    assert version.epoch == before.epoch and version.num_updates > before.num_updates
    assert apply(lease.write(start, b), check=False) == 103  # made from the same read
    assert lease.read(C.parse_cib(live.read_bytes())) == a
    apply(lease.erase(now))
    assert lease.read(C.parse_cib(live.read_bytes())) is None
    run("crm_verify", "-x", str(live))
    old = C.set_cluster_property(start, lease.LEGACY_PROPERTY, a.encode()).new_cib
    live = write(tmp_path / "live.xml", old)
    apply(lease.write(old, b))
    after = C.parse_cib(live.read_bytes())
    assert lease.read(after) == b and lease.LEGACY_PROPERTY not in C.cluster_properties(after)
    assert C.cib_version(after).epoch > C.cib_version(old).epoch  # a configuration change


def test_pcs_commands_make_the_same_guard(tmp_path: Path) -> None:
    need_tools("pcs")
    base = fixtures.cib("base.xml")
    target = write(tmp_path / "pcs.xml", base)
    for argv in C.guard_pcs_commands(base, "galera-bundle", FLOATING):
        # --force: the guard agent is not installed on this machine
        extra = ["--force"] if argv[1:3] == ["resource", "create"] else []
        run(argv[0], "-f", str(target), *argv[1:], *extra)
    expected = C.add_guard(base, "galera-bundle", FLOATING).new_cib
    assert config_of(target) == fixtures.canonical(expected.find("configuration"))
