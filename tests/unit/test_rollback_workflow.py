"""``pcmkimg rollback`` (workflows.rollback) around its node step, with fakes, no cluster.

The node step itself (retag, restart, verify, roll back) is the update's and is tested in
``test_execute_paths``; here: what the rollback does before it (leftover bans, the lease) and
how it reports a failure of it.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from pcmkimg.adapters import podman, signals
from pcmkimg.adapters.errors import PacemakerError, PacemakerTimeoutError, RestartFailedError
from pcmkimg.adapters.journal import history, open_journal
from pcmkimg.core.errors import PreflightFailed
from pcmkimg.core.reference import Reference, parse
from pcmkimg.core.tagplan import HOLD_TAG, TagOp
from pcmkimg.workflows import rollback as rb
from pcmkimg.workflows.errors import UpdateFailed
from tests import fakes
from tests.fakes import key

NODE = "controller-1"
BUNDLE_ID = "galera-bundle"
FLOATING = "cluster.common.tag/mariadb:pcmklatest"
BACK = "cluster.common.tag/mariadb:pcmkprevious"
HOLD = f"cluster.common.tag/mariadb:{HOLD_TAG}"
LEFT_BAN = f"cli-ban-{BUNDLE_ID}-on-{NODE}"
CURRENT_ID = "c" * 64
PREVIOUS_ID = "p" * 64
TIMEOUT = 7.0


def cluster_of(store: fakes.FakeStore, bans: list[str]) -> fakes.FakeCluster:
    """The three controllers, each running its replica on CURRENT_ID (``store`` is NODE's);
    ``bans``: those an earlier, killed restart left. Reading the cluster is an event."""
    stores = {
        node: store
        if node == NODE
        else fakes.FakeStore(node, {FLOATING: CURRENT_ID}, {fakes.container_of(node): CURRENT_ID})
        for node in fakes.NODES
    }
    cluster = fakes.FakeCluster(stores, timeout=TIMEOUT)
    cluster.own_bans = list(bans)
    cluster.record_reads = True
    return cluster


def run(tmp_path: Path, cluster: fakes.FakeCluster) -> rb.RollbackReport:
    ctx = fakes.context(cluster, journal_dir=tmp_path / "state")
    return rb.run(ctx, rb.RollbackRequest("mariadb", NODE, TIMEOUT))


def before_swap() -> fakes.FakeStore:
    names = {FLOATING: CURRENT_ID, BACK: PREVIOUS_ID, "reg.example.com/m:1": CURRENT_ID}
    return fakes.FakeStore(NODE, names, {fakes.container_of(NODE): CURRENT_ID})


def failing(cluster: fakes.FakeCluster, error: PacemakerError) -> fakes.FakeCluster:
    """The node step's restart fails with ``error`` (the replica keeps running)."""
    cluster.restart_errors[NODE] = (error, False)
    return cluster


WATCHED = ("read", "acquire", "find-bans", "removed-bans", "wait", "restart", "release")


# --------------------------------------------------------------------------- leftover bans


def test_a_ban_a_killed_restart_left_is_removed_under_the_lease_and_the_cluster_settles(
    tmp_path: Path,
) -> None:
    cluster = failing(
        cluster_of(before_swap(), [LEFT_BAN]), RestartFailedError("stop it here", "x")
    )
    with pytest.raises(UpdateFailed):
        run(tmp_path, cluster)
    assert cluster.kinds(*WATCHED) == [
        ("read",),  # find the bundle, before the lease
        ("acquire", "30"),
        ("read",),  # under the lease: the leftover bans of this read
        ("find-bans", BUNDLE_ID),
        ("removed-bans", LEFT_BAN),
        ("wait",),  # crm_resource --wait,
        ("wait",),  # then the cluster settles
        ("read",),  # the baseline, once settled
        ("restart", NODE),  # the node step, to the rollback image
        ("release",),
    ]
    assert cluster.stores[NODE].called("retag") == [f"{key(FLOATING)} -> {PREVIOUS_ID}"]
    leftover = [e for e in history(tmp_path / "state") if e["event"] == "leftover-bans"]
    assert [e["removed"] for e in leftover] == [[LEFT_BAN]]


def test_without_a_leftover_ban_nothing_is_removed_and_nothing_waits(tmp_path: Path) -> None:
    cluster = failing(cluster_of(before_swap(), []), RestartFailedError("stop it here", "x"))
    with pytest.raises(UpdateFailed):
        run(tmp_path, cluster)
    assert cluster.kinds(*WATCHED) == [
        ("read",),
        ("acquire", "30"),
        ("read",),  # under the lease, asked for leftover bans: none; the baseline
        ("find-bans", BUNDLE_ID),
        ("restart", NODE),
        ("release",),
    ]


# --------------------------------------------------------------------------- the failure's fix


def test_a_failed_start_says_the_previous_image_does_not_start(tmp_path: Path) -> None:
    store = before_swap()
    error = RestartFailedError("start of the replica failed", "look at it")
    with pytest.raises(UpdateFailed) as info:
        run(tmp_path, failing(cluster_of(store, []), error))
    assert info.value.message.endswith(
        f"{NODE} was put back on the image it ran before: start of the replica failed"
    )
    assert info.value.fix.startswith(f"the image under {BACK} does not start on {NODE}")
    assert (store.names[key(FLOATING)], store.names[key(BACK)]) == (CURRENT_ID, PREVIOUS_ID)


def test_any_other_failure_keeps_its_own_fix(tmp_path: Path) -> None:
    error = PacemakerTimeoutError(
        "the cluster did not settle within 7s", "check the cluster with crm_mon"
    )
    with pytest.raises(UpdateFailed) as info:
        run(tmp_path, failing(cluster_of(before_swap(), []), error))
    assert "does not start" not in info.value.fix
    assert info.value.fix == "check the cluster with crm_mon"
    assert info.value.message.endswith(": the cluster did not settle within 7s")


# --------------------------------------------------------------------------- an interrupted swap


def swap_ops() -> list[str]:
    """The tag operations of a rollback's swap, in order."""
    store = before_swap()
    store.retag(FLOATING, PREVIOUS_ID)
    return [method for method, _ in store.calls if method in ("tag", "untag")]


def swap_stopped_after(ops: int) -> fakes.FakeStore:
    """The store after a rollback's swap (floating to the previous image, whose only name is
    the rollback name) stopped after ``ops`` of its four tag operations (kill -9: a
    BaseException nothing catches)."""
    store = before_swap()
    sequence = swap_ops()
    method = sequence[ops]
    store.fail(method, *[None] * sequence[:ops].count(method), SystemExit("killed"))
    with pytest.raises(SystemExit):
        store.retag(FLOATING, PREVIOUS_ID)
    store.calls.clear()
    return store


def journal_says(tmp_path: Path, *events: tuple[str, dict[str, object]]) -> None:
    earlier = open_journal(tmp_path / "state", run="run-0")
    for event, fields in events:
        earlier.record(event, service="mariadb", node=NODE, **fields)


def test_the_swap_has_four_tag_operations_and_the_second_leaves_the_image_held_only() -> None:
    assert swap_ops() == ["tag", "tag", "tag", "untag"]
    store = swap_stopped_after(2)
    assert store.names == {
        key(FLOATING): CURRENT_ID,
        key(BACK): CURRENT_ID,
        key(HOLD): PREVIOUS_ID,  # its only name
        "reg.example.com/m:1": CURRENT_ID,
    }


@pytest.mark.parametrize("ops", [1, 2, 3])
def test_a_rerun_after_a_swap_killed_half_way_does_the_rollback(tmp_path: Path, ops: int) -> None:
    store = swap_stopped_after(ops)
    journal_says(tmp_path, ("rollback", {"to": PREVIOUS_ID}))
    cluster = cluster_of(store, [])
    report = run(tmp_path, cluster)
    assert cluster.kinds("restart") == [("restart", NODE)]
    assert (report.image_id, report.result.result) == (PREVIOUS_ID, "ok")
    assert store.names == {
        key(FLOATING): PREVIOUS_ID,
        key(BACK): CURRENT_ID,
        "reg.example.com/m:1": CURRENT_ID,
    }
    assert store.image_of(fakes.container_of(NODE)) == PREVIOUS_ID


@pytest.mark.parametrize(
    "journal",
    [
        [],
        [("rollback", {"to": PREVIOUS_ID}), ("retag", {"after": PREVIOUS_ID})],
        [("rollback", {"to": CURRENT_ID})],
    ],
    ids=["no-journal", "retag-journaled", "another-image"],
)
def test_a_hold_name_the_journal_does_not_explain_is_refused_and_nothing_moves(
    tmp_path: Path, journal: list
) -> None:
    store = swap_stopped_after(2)
    journal_says(tmp_path, *journal)
    before = dict(store.names)
    cluster = cluster_of(store, [])
    with pytest.raises(PreflightFailed) as info:
        run(tmp_path, cluster)
    assert f"{HOLD} names {PREVIOUS_ID[:12]} on {NODE}" in info.value.message
    assert f"podman untag {PREVIOUS_ID[:12]} {HOLD}" in info.value.fix
    assert store.names == before
    assert not store.called("tag") and not store.called("untag") and not store.called("retag")
    assert cluster.kinds("restart") == []
    assert cluster.kinds("acquire", "release") == [("acquire", "30"), ("release",)]


def test_the_store_makes_a_tag_plan_whole_before_a_signal_takes_effect() -> None:
    store = podman.Store.__new__(podman.Store)
    store.node = NODE
    made: list[str] = []

    def tag(image_id: str, ref: Reference) -> None:
        if not made:
            os.kill(os.getpid(), signal.SIGTERM)
        made.append(f"tag {ref.tag}")

    def untag(image_id: str, ref: Reference) -> None:
        made.append(f"untag {ref.tag}")

    store.tag = tag  # type: ignore[method-assign]
    store.untag = untag  # type: ignore[method-assign]
    back, floating, hold = parse(BACK), parse(FLOATING), parse(HOLD)
    swap = [
        TagOp("tag", PREVIOUS_ID, hold),
        TagOp("tag", CURRENT_ID, back),
        TagOp("tag", PREVIOUS_ID, floating),
        TagOp("untag", PREVIOUS_ID, hold, last_ok=True),
    ]
    with signals.sigterm_raises(), pytest.raises(signals.Terminated):
        store.apply(swap)
    assert made == ["tag pcmkhold", "tag pcmkprevious", "tag pcmklatest", "untag pcmkhold"]
