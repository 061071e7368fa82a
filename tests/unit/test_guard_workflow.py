"""``guard add`` and ``guard remove`` (pcmkimg.workflows.guard.add, .remove) on the fake cluster
(tests.fakes): which CIB changes they make, and under which lease (the real lease, written
into the fake's CIB)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pcmkimg.core import cib as C
from pcmkimg.core.errors import BundleNotFoundError, PreflightFailed
from pcmkimg.workflows.guard import add, remove, show
from tests import fakes

BUNDLE = "haproxy-bundle"
FLOATING = "cluster.common.tag/haproxy:pcmklatest"
OTHER = "cluster.common.tag/haproxy2:pcmklatest"
IMAGE_ID = "a" * 64
OTHER_ID = "b" * 64


def cluster_with(names: dict[str, tuple[str, ...]], *, guarded: bool = False) -> fakes.FakeCluster:
    """The base cluster (haproxy-bundle runs on the three controllers); each node's store has
    the names given for it. The guard clone starts where its image is in the store."""
    ids = {FLOATING: IMAGE_ID, OTHER: OTHER_ID}
    stores = {
        node: fakes.FakeStore(node, {name: ids[name] for name in found})
        for node, found in names.items()
    }
    cluster = fakes.FakeCluster(stores, timeout=60)
    if guarded:
        cluster.config = C.add_guard(cluster.config, BUNDLE, FLOATING).new_cib
    cluster.guards_run = True
    cluster.starts_on_cleanup = False  # no galera container here
    return cluster


def everywhere(*names: str) -> dict[str, tuple[str, ...]]:
    return {node: names for node in fakes.NODES}


def run(cluster: fakes.FakeCluster, tmp_path: Path, req: add.AddRequest) -> add.AddReport:
    return add.run(fakes.context(cluster, journal_dir=tmp_path), req)


def unwire(cluster: fakes.FakeCluster, tmp_path: Path) -> remove.RemoveReport:
    return remove.run(fakes.context(cluster, journal_dir=tmp_path), remove.RemoveRequest(BUNDLE))


def unleased(events: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """The CIB changes, waits and cleanups made while the update lease was not held; the lease
    is never taken twice."""
    leased = False
    outside = []
    for event in events:
        if event[0] == "acquire":
            assert not leased, "the lease taken twice"
            leased = True
        elif event[0] == "release":
            assert leased, "a release without the lease"
            leased = False
        elif event[0] in ("cib", "wait", "cleanup") and not leased:
            outside.append(event)
    assert not leased, "the lease left behind"
    return outside


def test_guard_add_and_remove_change_the_cib_only_under_the_update_lease(tmp_path: Path) -> None:
    """Issue 12.3: like every other command that changes the CIB or a store."""
    cluster = cluster_with(everywhere(FLOATING))
    added = run(cluster, tmp_path, add.AddRequest(BUNDLE, timeout=60))
    assert added.as_dict()["changed"]
    removed = unwire(cluster, tmp_path)
    assert removed.as_dict()["changed"]
    assert len(cluster.kinds("cib", "wait")) >= 3
    assert len(cluster.kinds("acquire")) == 2
    assert unleased(cluster.events) == []
    assert C.bundle(cluster.config, BUNDLE).guard is None


def test_a_refused_guard_add_undoes_its_clone_under_the_lease(tmp_path: Path) -> None:
    names = everywhere(FLOATING)
    names["controller-1"] = ()  # the guard cannot start there
    cluster = cluster_with(names)
    with pytest.raises(PreflightFailed):
        run(cluster, tmp_path, add.AddRequest(BUNDLE, timeout=60))
    assert C.bundle(cluster.config, BUNDLE).guard is None
    assert cluster.kinds("cleanup") == [("cleanup", f"{BUNDLE}-guard", "controller-1")]
    assert unleased(cluster.events) == []


def test_a_renamed_guard_that_cannot_start_keeps_its_former_name_wired(tmp_path: Path) -> None:
    """The new name is missing on a node: the guard gets its former name back and is wired
    again as it was, after it runs again (so that no replica restarts)."""
    names = everywhere(FLOATING, OTHER)
    names["controller-1"] = (FLOATING,)  # the new name fails there; the former one runs
    cluster = cluster_with(names, guarded=True)
    with pytest.raises(PreflightFailed) as refused:
        run(cluster, tmp_path, add.AddRequest(BUNDLE, OTHER, timeout=60))
    assert f"the guard keeps {FLOATING}" in refused.value.message
    final = C.bundle(cluster.config, BUNDLE)
    assert final.guard is not None and final.guard.image == FLOATING and final.guard_wired
    kinds = [e[1].split()[0] if e[0] == "cib" else e[0] for e in cluster.kinds("cib", "wait")]
    assert kinds == ["drop", "add", "wait", "add", "wait", "add"]
    # else it stays off there
    assert cluster.kinds("cleanup") == [("cleanup", f"{BUNDLE}-guard", "controller-1")]
    assert unleased(cluster.events) == []


def test_the_dry_run_of_a_rename_prints_the_steps_that_restart_no_replica(tmp_path: Path) -> None:
    cluster = cluster_with(everywhere(FLOATING), guarded=True)
    wired = cluster.config
    report = run(cluster, tmp_path, add.AddRequest(BUNDLE, OTHER, dry_run=True))
    cmds = report.as_dict()["commands"]
    ids = C.guard_ids(BUNDLE)
    assert cmds[:4] == [
        ["cibadmin", "--delete", "--xpath", f"//constraints/*[@id='{ids['order']}']"],
        ["cibadmin", "--delete", "--xpath", f"//constraints/*[@id='{ids['colocation']}']"],
        ["pcs", "resource", "update", ids["primitive"], f"image={OTHER}"],
        ["crm_resource", "--wait"],
    ]
    assert [c[:3] for c in cmds[4:]] == [
        ["pcs", "resource", "bundle"],
        ["pcs", "constraint", "order"],
        ["pcs", "constraint", "colocation"],
    ]
    assert cluster.events == [] and cluster.config is wired  # printed, nothing done


def test_nothing_to_do_takes_no_lease_and_moves_nothing(tmp_path: Path) -> None:
    """guard remove without a guard, guard add of a guard wired as asked, and a bundle that
    does not exist: answered from the CIB as read; no lease is taken, the CIB does not move
    (taking the lease writes it twice)."""
    cluster = cluster_with(everywhere(FLOATING))
    removed = unwire(cluster, tmp_path)
    assert not removed.as_dict()["changed"] and removed.lines() == [f"{BUNDLE}: no guard"]
    with pytest.raises(BundleNotFoundError):
        run(cluster, tmp_path, add.AddRequest("no-such-bundle", timeout=60))
    assert cluster.events == []
    run(cluster, tmp_path, add.AddRequest(BUNDLE, timeout=60))
    assert len(cluster.kinds("acquire")) == 1
    wired, events = cluster.config, list(cluster.events)
    again = run(cluster, tmp_path, add.AddRequest(BUNDLE, timeout=60))
    assert (again.as_dict(), again.lines()) == (
        {"changed": False, "description": ""},
        [f"{BUNDLE}: guard already wired"],
    )
    assert cluster.events == events and cluster.config is wired


def test_guard_show_reads_the_wiring_and_changes_nothing(tmp_path: Path) -> None:
    ctx = fakes.context(cluster_with(everywhere(FLOATING), guarded=True), journal_dir=tmp_path)
    wired = show.run(ctx, show.ShowRequest(BUNDLE))
    doc = wired.as_dict()
    assert (doc["bundle"], doc["wired"], doc["interleave"]) == (BUNDLE, True, True)
    assert doc["guard"]["image"] == FLOATING  # type: ignore[index]
    assert wired.lines()[0] == f"{BUNDLE}: guard wired"
    bare = fakes.context(cluster_with(everywhere(FLOATING)), journal_dir=tmp_path)
    none = show.run(bare, show.ShowRequest(BUNDLE))
    assert none.as_dict()["guard"] is None
    assert none.lines() == [f"{BUNDLE}: no guard (pcmkimg guard add {BUNDLE})"]
