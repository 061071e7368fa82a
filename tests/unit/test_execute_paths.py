"""The failure paths of the update workflow (the node step, ``pcmkimg.workflows.nodestep``, and
``pcmkimg.workflows.update.run``) with the fakes of its two ports (``tests/fakes.py``), no
cluster.

A :class:`~tests.fakes.FakeStore` per node stands for its podman store: the primitives of the
store port (inspect, tag, untag, containers, events) over names -> image IDs, the running
containers, and pulls from a fake registry; the retag and restore rules are the real ones of the
port. A :class:`~tests.fakes.FakeCluster` is the cluster port on a scripted cluster; its replicas
are the containers running in the stores, so a restart or a cleanup starts the container on
whatever the floating name names at that moment, as Pacemaker would, and the real lease code
writes its lease into its CIB. The CIB and the nodes come from the fixtures in
``tests/fixtures/cib``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest
from lxml import etree

from pcmkimg import records
from pcmkimg.adapters import podman as images
from pcmkimg.adapters.errors import BanNotRemovedError, PacemakerTimeoutError, RestartFailedError
from pcmkimg.adapters.journal import Journal, history
from pcmkimg.core import cib, lease, plan, release
from pcmkimg.core.errors import PreflightFailed, RestartRefusedError
from pcmkimg.core.reference import parse
from pcmkimg.core.report import NodeResult, UpdateReport
from pcmkimg.errors import PcmkimgError
from pcmkimg.workflows import noderollback, nodestep
from pcmkimg.workflows import update as execute
from pcmkimg.workflows.errors import DigestRefused, PullsFailed, RollbackFailed, UpdateFailed
from pcmkimg.workflows.release import execute as execute_plan
from pcmkimg.workflows.session import Session
from pcmkimg.workflows.step import NodeStep, Undo
from tests import fixtures
from tests.fakes import (
    BUNDLE_ID,
    FLOATING,
    NODES,
    FakeCluster,
    FakeHolds,
    FakeStore,
    FakeStores,
    container_of,
    context,
    key,
)

BACK = "cluster.common.tag/mariadb:pcmkprevious"
OLD_REF = "registry.example.com/tripleo/mariadb:1.0"
NEW_REF = "registry.example.com/tripleo/mariadb:2.0"
OLD_ID = "a" * 64
NEW_ID = "b" * 64
BUNDLE = plan.BundleRef(
    BUNDLE_ID, "mariadb", FLOATING, tuple(f"{BUNDLE_ID}-podman-{i}" for i in range(3))
)
TIMEOUT = 5.0


_cib = fixtures.cib
_mon = fixtures.mon


def cluster_of(stores: Mapping[str, FakeStore], **kwargs: str) -> FakeCluster:
    """The scripted cluster over ``stores``; every timeout the workflow passes must be ours."""
    return FakeCluster(stores, timeout=TIMEOUT, **kwargs)


def store_on_old(node: str, *, running: bool = True, pulled_new: bool = True) -> FakeStore:
    """A node before the update: the floating name on the old image, the new one pulled."""
    names = {OLD_REF: OLD_ID, FLOATING: OLD_ID}
    if pulled_new:
        names[NEW_REF] = NEW_ID
    return FakeStore(
        node,
        names,
        running={container_of(node): OLD_ID} if running else {},
        registry={NEW_REF: NEW_ID, OLD_REF: OLD_ID},
    )


def make_session(
    tmp_path: Path, cluster: FakeCluster, stores: Mapping[str, FakeStore] | None = None
) -> Session:
    """A run's session on the cluster port ``cluster`` and the stores port over ``stores`` (by
    default the cluster's)."""
    return Session(
        cluster,
        FakeStores(cluster.stores if stores is None else stores),
        Journal(tmp_path / "journal.jsonl", "run-1"),
        timeout=TIMEOUT,
        lease_period=lease.DEFAULT_PERIOD,
    )


def events(tmp_path: Path) -> list[str]:
    return [e["event"] for e in history(tmp_path)]


def entries(tmp_path: Path, event: str) -> list[dict]:
    return [e for e in history(tmp_path) if e["event"] == event]


def step_on(node: str, res: NodeResult | None = None, **kw: object) -> NodeStep:
    """The node step of the update of mariadb to the new image on ``node``."""
    res = res or NodeResult(node)
    return NodeStep(BUNDLE, res, parse(NEW_REF), NEW_ID, **kw)  # type: ignore[arg-type]


def update(
    session: Session, node: str, *, restart: bool = True
) -> tuple[NodeResult, BaseException | None]:
    """The node's turn of a single service's update (one node step)."""
    step = step_on(node, restart=restart)
    res = step.res
    try:
        nodestep.turn(session, [step])
    except Exception as exc:  # the tests look at the error and at what was left behind
        return res, exc
    return res, None


def timed_out() -> PcmkimgError:
    return PacemakerTimeoutError(
        "crm_resource --restart did not finish within 5s", "check `crm_mon -1`", rc=-1
    )


def refused() -> PcmkimgError:
    return RestartRefusedError(
        "restart of galera-bundle on controller-0 refused: the replica is unmanaged",
        "`pcs resource manage galera-bundle` first",
    )


def unreachable() -> PcmkimgError:
    return images.NodeUnreachable(
        "cannot reach the podman socket", "start podman.socket on the node", node="controller-0"
    )


# --------------------------------------------------------------------------- the happy path


def test_update_node_restarts_onto_the_new_image(tmp_path: Path) -> None:
    store = store_on_old("controller-0")
    cluster = cluster_of({"controller-0": store})
    res, error = update(make_session(tmp_path, cluster), "controller-0")
    assert error is None
    assert (res.result, res.before, res.after, res.retagged, res.restarted) == (
        "ok",
        OLD_ID,
        NEW_ID,
        True,
        True,
    )
    assert store.names[FLOATING] == NEW_ID and store.names[BACK] == OLD_ID
    assert store.image_of(container_of("controller-0")) == NEW_ID
    assert res.container_before != res.container_after
    assert cluster.kinds("restart", "cleanup") == [("restart", "controller-0")]
    # The node attribute shows the real name behind the floating name at once.
    assert ("attribute", "controller-0", "pcmkimg-mariadb", NEW_REF) in cluster.events
    assert events(tmp_path) == ["retag", "restart", "updated"]


# --------------------------------------------------------------------------- 1. rolled back


@pytest.mark.parametrize(
    ("make_error", "stopped"),
    [(timed_out, True), (timed_out, False), (refused, False)],
    ids=["timeout-replica-down", "timeout-replica-up", "refused"],
)
def test_a_restart_error_after_the_retag_rolls_the_node_back(
    tmp_path: Path,
    make_error: Callable[[], PcmkimgError],
    stopped: bool,
) -> None:
    error = make_error()
    store = store_on_old("controller-0")
    cluster = cluster_of({"controller-0": store})
    cluster.restart_errors["controller-0"] = (error, stopped)
    res, raised = update(make_session(tmp_path, cluster), "controller-0")

    assert isinstance(raised, UpdateFailed)
    assert raised.__cause__ is error
    assert "was rolled back" in raised.message and error.message in raised.message
    assert raised.fix == error.fix  # not the "image does not run here" advice of a failed start
    assert res.result == "rolled-back" and res.rolled_back and res.retagged
    # The floating name names the old image again; the replica runs it.
    assert store.names[FLOATING] == OLD_ID
    assert store.image_of(container_of("controller-0")) == OLD_ID
    expected = ["retag", "restart", "failed", "rolled-back"]
    assert events(tmp_path) == expected
    assert error.message in entries(tmp_path, "failed")[0]["error"]
    # A replica left down is cleaned up and waited for; one still up is left alone.
    recovery = cluster.kinds("cleanup", "wait", "restart")[1:]
    assert recovery == ([("cleanup", BUNDLE_ID, "controller-0"), ("wait",)] if stopped else [])
    # The node attribute is written after a start only (no CIB write before the restart):
    # the rollback's start shows the old image again.
    values = [e[3] for e in cluster.kinds("attribute")]
    assert values == [OLD_REF]


def test_a_store_error_after_the_retag_rolls_the_node_back(tmp_path: Path) -> None:
    store = store_on_old("controller-0")
    cluster = cluster_of({"controller-0": store})
    error = unreachable()
    store.fail("containers", error)  # the first look at the running container
    res, raised = update(make_session(tmp_path, cluster), "controller-0")

    assert isinstance(raised, UpdateFailed) and raised.__cause__ is error
    assert raised.fix == error.fix
    assert res.result == "rolled-back" and not res.restarted
    assert store.names[FLOATING] == OLD_ID
    assert store.image_of(container_of("controller-0")) == OLD_ID
    # The replica never stopped: the rollback retags and verifies, nothing more.
    assert cluster.kinds("restart", "cleanup", "wait") == []
    assert events(tmp_path) == ["retag", "failed", "rolled-back"]


def test_a_replica_that_did_not_come_back_is_rolled_back_with_the_image_advice(
    tmp_path: Path,
) -> None:
    store = store_on_old("controller-0")
    cluster = cluster_of({"controller-0": store})
    failed = RestartFailedError(
        "restart of galera-bundle on controller-0: replica is not running", "fix the cause"
    )
    cluster.restart_errors["controller-0"] = (failed, True)
    res, raised = update(make_session(tmp_path, cluster), "controller-0")

    assert isinstance(raised, UpdateFailed)
    assert raised.fix.startswith(f"{NEW_REF} does not run here")
    assert "the nodes after it were not touched" in raised.fix
    assert res.result == "rolled-back"
    assert store.image_of(container_of("controller-0")) == OLD_ID


def test_a_failure_after_the_restart_restarts_the_replica_back_onto_the_old_image(
    tmp_path: Path,
) -> None:
    """The restart worked but reading the container afterwards failed: the replica runs the new
    image, so the rollback has to restart it once more."""
    store = store_on_old("controller-0")
    cluster = cluster_of({"controller-0": store})
    store.fail("containers", None, unreachable())  # before the restart: fine; after: fails
    res, raised = update(make_session(tmp_path, cluster), "controller-0")

    assert isinstance(raised, UpdateFailed) and res.result == "rolled-back"
    assert cluster.kinds("restart") == [("restart", "controller-0")] * 2
    assert store.image_of(container_of("controller-0")) == OLD_ID


# --------------------------------------------------------------------------- 2. not moved


def test_a_failure_when_the_name_did_not_move_is_raised_as_it_is(tmp_path: Path) -> None:
    """A re-run after an interruption: the floating name is already on the target, the replica
    still runs the old image. Nothing was retagged here, so nothing is rolled back."""
    store = store_on_old("controller-0")
    store.names[key(FLOATING)] = NEW_ID
    store.names[key(BACK)] = OLD_ID
    cluster = cluster_of({"controller-0": store})
    error = timed_out()
    cluster.restart_errors["controller-0"] = (error, False)
    res, raised = update(make_session(tmp_path, cluster), "controller-0")

    assert raised is error
    assert not res.retagged and not res.rolled_back and res.result == "failed"
    assert store.names[FLOATING] == NEW_ID and store.names[BACK] == OLD_ID
    assert store.called("retag") == [f"{FLOATING} -> {NEW_ID}"]  # no rollback retag
    assert store.called("restore") == []
    assert cluster.kinds("attribute", "cleanup") == []
    assert events(tmp_path) == ["retag", "restart", "failed"]
    assert entries(tmp_path, "retag")[0]["moved"] is False


def test_a_rerun_whose_start_fails_rolls_back_to_the_rollback_image(tmp_path: Path) -> None:
    """A re-run after an interrupted update to a broken image: the name already names it, and
    the start fails. The node goes back to the image kept under the rollback name."""
    store = store_on_old("controller-0")
    store.names[key(FLOATING)] = NEW_ID
    store.names[key(BACK)] = OLD_ID
    cluster = cluster_of({"controller-0": store})
    failed = RestartFailedError(
        "restart of galera-bundle on controller-0 failed: start error", "fix the cause"
    )
    cluster.restart_errors["controller-0"] = (failed, True)
    res, raised = update(make_session(tmp_path, cluster), "controller-0")

    assert isinstance(raised, UpdateFailed) and raised.__cause__ is failed
    assert not res.retagged and res.rolled_back and res.result == "rolled-back"
    assert res.before == OLD_ID
    assert store.names[FLOATING] == OLD_ID and store.names[BACK] == NEW_ID
    assert store.image_of(container_of("controller-0")) == OLD_ID
    assert events(tmp_path) == ["retag", "restart", "failed", "rolled-back"]


def test_a_store_error_while_publishing_does_not_leave_the_name_moved(tmp_path: Path) -> None:
    store = store_on_old("controller-0")
    cluster = cluster_of({"controller-0": store})
    store.fail("resolve", None, unreachable())  # the step's own resolve works, publish's fails
    res, raised = update(make_session(tmp_path, cluster), "controller-0")
    # Either the update went on (the attribute is informative only), or the node was rolled
    # back; never an error with the floating name left on an image the replica does not run.
    if raised is None:
        assert res.result == "ok"
        assert store.image_of(container_of("controller-0")) == NEW_ID
    else:
        assert isinstance(raised, (UpdateFailed, RollbackFailed))
        assert store.names[FLOATING] == OLD_ID


# --------------------------------------------------------------------------- 3. roll_back


def store_after_update(node: str, *, running_image: str | None) -> FakeStore:
    """A node whose floating name was moved to the new image (the old one is the rollback)."""
    names = {OLD_REF: OLD_ID, NEW_REF: NEW_ID, FLOATING: NEW_ID, BACK: OLD_ID}
    running = {container_of(node): running_image} if running_image else {}
    return FakeStore(node, names, running=running)


def moved(node: str, before: str | None = OLD_ID) -> images.Retagged:
    """The retag of ``store_after_update``: the floating name moved from ``before`` to the new
    image, and the rollback name (which named nothing) got ``before``."""
    return images.Retagged(
        node,
        FLOATING,
        before,
        NEW_ID,
        moved=True,
        rollback=BACK if before else None,
        rollback_name=BACK,
        rollback_before=None,
    )


def rolling_back(running_image: str | None) -> tuple[FakeStore, FakeCluster]:
    """controller-1 after its update failed, its replica running ``running_image`` (or down)."""
    store = store_after_update("controller-1", running_image=running_image)
    return store, cluster_of({"controller-1": store})


def rollback(
    tmp_path: Path, cluster: FakeCluster, store: FakeStore, before: str | None = OLD_ID
) -> tuple[NodeResult, BaseException | None]:
    res = NodeResult(store.node, before=before, after=NEW_ID, retagged=True)
    retag = moved(store.node, before)
    step = step_on(store.node, res, retag=retag, holds=FakeHolds([]))
    try:
        session = make_session(tmp_path, cluster, {store.node: store})
        noderollback.roll_back(session, [Undo(step, retag)])
    except Exception as exc:  # the tests look at the error
        return res, exc
    return res, None


CLEANED_UP = [("cleanup", BUNDLE_ID, "controller-1"), ("wait",)]


@pytest.mark.parametrize(
    ("running_image", "failed", "actions"),
    [
        (None, False, CLEANED_UP),
        (OLD_ID, True, CLEANED_UP),  # active but failed: cleaned up too
        (NEW_ID, False, [("restart", "controller-1")]),
    ],
    ids=["inactive", "failed", "on-the-new-image"],
)
def test_rollback_brings_the_replica_back_on_the_previous_image(
    tmp_path: Path,
    running_image: str | None,
    failed: bool,
    actions: list[tuple[str, ...]],
) -> None:
    store, cluster = rolling_back(running_image)
    if failed:
        cluster.failed.add("controller-1")
    res, raised = rollback(tmp_path, cluster, store)
    assert raised is None and res.rolled_back
    # Both names are as they were before the attempt: the rollback name named nothing.
    assert store.names[FLOATING] == OLD_ID and BACK not in store.names
    assert cluster.kinds("cleanup", "wait", "restart") == actions
    assert store.image_of(container_of("controller-1")) == OLD_ID
    assert cluster.failed == set()
    assert events(tmp_path) == ["rolled-back"]


def test_rollback_fails_when_the_replica_stays_down(tmp_path: Path) -> None:
    store, cluster = rolling_back(None)
    cluster.starts_on_cleanup = False
    res, raised = rollback(tmp_path, cluster, store)
    assert isinstance(raised, RollbackFailed)
    assert "did not start again on controller-1" in raised.message
    assert f"`podman tag {BACK} {FLOATING}`" in raised.fix
    assert f"`crm_resource --cleanup --resource {BUNDLE_ID} --node controller-1`" in raised.fix
    assert not res.rolled_back
    assert cluster.kinds("cleanup", "wait") == [("cleanup", BUNDLE_ID, "controller-1"), ("wait",)]
    assert events(tmp_path) == ["rollback-failed"]


def test_rollback_fails_when_the_replica_keeps_running_the_new_image(tmp_path: Path) -> None:
    store, cluster = rolling_back(NEW_ID)
    # The restart "works" but the container comes back on the new image (the bundle's image in
    # the CIB is not the floating name, say).
    store.starts_on = NEW_REF
    res, raised = rollback(tmp_path, cluster, store)
    assert isinstance(raised, RollbackFailed)
    assert f"runs {NEW_ID[:12]}, not {OLD_ID[:12]}" in raised.message
    assert f"podman tag {BACK} {FLOATING}" in raised.fix
    assert cluster.kinds("restart") == [("restart", "controller-1")]
    assert not res.rolled_back


def test_rollback_without_a_previous_image_has_nothing_to_roll_back_to(tmp_path: Path) -> None:
    store = store_after_update("controller-1", running_image=None)
    del store.names[key(BACK)]
    cluster = cluster_of({"controller-1": store})
    res, raised = rollback(tmp_path, cluster, store, before=None)
    assert isinstance(raised, RollbackFailed)
    assert "nothing to roll back to" in raised.message
    assert "pcmkimg update --node controller-1 mariadb --image REF" in raised.fix
    assert store.called("retag") == [] and cluster.events == []
    assert store.names[FLOATING] == NEW_ID
    assert entries(tmp_path, "rollback-failed")[0]["error"] == "no previous"


def test_update_of_a_node_without_the_floating_name_cannot_be_rolled_back(tmp_path: Path) -> None:
    store = store_on_old("controller-0")
    del store.names[key(FLOATING)]
    cluster = cluster_of({"controller-0": store})
    error = timed_out()
    cluster.restart_errors["controller-0"] = (error, True)
    res, raised = update(make_session(tmp_path, cluster), "controller-0")
    assert isinstance(raised, RollbackFailed)
    assert raised.__context__ is error  # raised while handling the restart's failure
    assert res.before is None and res.retagged and not res.rolled_back
    assert BACK not in store.names  # the retag had no old image to keep
    assert events(tmp_path) == ["retag", "restart", "failed", "rollback-failed"]


# --------------------------------------------------------------------------- 4. restart or not


def restart_if_needed(
    tmp_path: Path,
    running_image: str | None,
    *,
    guard_failed: bool = False,
    restart: bool = True,
) -> tuple[FakeStore, FakeCluster, NodeResult]:
    """_restart_if_needed on controller-2 just retagged, its replica running ``running_image``
    (or down), with the guard of guard.xml; ``guard_failed``: the guard's start failed there."""
    store = store_after_update("controller-2", running_image=running_image)
    cluster = cluster_of({"controller-2": store}, config="guard.xml")
    if guard_failed:
        cluster.extra_failures.append(guard_failure("controller-2"))
    res = NodeResult(store.node, before=OLD_ID, after=NEW_ID, retagged=True)
    session = make_session(tmp_path, cluster, {store.node: store})
    holds = FakeHolds(cluster.events)
    step = step_on(store.node, res, restart=restart, retag=moved(store.node), holds=holds)
    nodestep.restart_together(session, [step], None)
    return store, cluster, res


def test_a_replica_already_on_the_target_is_not_restarted(tmp_path: Path) -> None:
    store, cluster, res = restart_if_needed(tmp_path, NEW_ID)
    assert res.result == "unchanged" and not res.restarted
    assert res.container_after == res.container_before is not None
    assert cluster.kinds("restart", "cleanup") == []


def test_no_active_replica_means_retag_only(tmp_path: Path) -> None:
    store, cluster, res = restart_if_needed(tmp_path, None)
    assert res.result == "retag-only" and not res.restarted
    assert res.container_before is None
    assert cluster.kinds("restart", "cleanup") == []
    assert store.running == {}  # nothing started it


def test_no_restart_leaves_the_old_container_running(tmp_path: Path) -> None:
    # A guard failure is there, but --no-restart does not heal it either.
    store, cluster, res = restart_if_needed(tmp_path, OLD_ID, guard_failed=True, restart=False)
    assert res.result == "retag-only" and not res.restarted
    assert store.image_of(container_of("controller-2")) == OLD_ID
    assert cluster.kinds("restart", "cleanup") == []


def guard_failure(node: str) -> cib.Failure:
    return cib.Failure(
        op_key="galera-bundle-guard_start_0",
        resource="galera-bundle-guard",
        task="start",
        interval_ms=0,
        node=node,
        exitcode=5,
        exitstatus="not installed",
        exit_reason="cluster.common.tag/mariadb:pcmklatest is not in the store",
    )


def test_a_guard_that_refused_is_healed_and_the_replica_starts(tmp_path: Path) -> None:
    store, cluster, res = restart_if_needed(tmp_path, None, guard_failed=True)
    assert res.result == "started" and not res.restarted
    # The container that the cleanup started, not one seen before (there was none).
    assert res.container_after == store.running[container_of("controller-2")].id
    assert store.image_of(container_of("controller-2")) == NEW_ID
    assert cluster.kinds("cleanup", "wait", "restart") == [
        ("cleanup", "galera-bundle-guard", "controller-2"),
        ("wait",),
    ]
    [entry] = entries(tmp_path, "guard-cleanup")
    assert entry["failures"] == ["galera-bundle-guard_start_0"]


def test_a_guard_failure_beside_a_running_replica_is_cleaned_and_the_replica_restarted(
    tmp_path: Path,
) -> None:
    store, cluster, res = restart_if_needed(tmp_path, OLD_ID, guard_failed=True)
    assert res.result == "ok" and res.restarted
    assert [e[0] for e in cluster.kinds("cleanup", "restart")] == ["cleanup", "restart"]
    assert store.image_of(container_of("controller-2")) == NEW_ID


# --------------------------------------------------------------------------- 5. run()


def three_nodes(config: str = "base.xml") -> tuple[dict[str, FakeStore], FakeCluster]:
    """Three nodes on the old image (the new one not pulled yet), and the cluster (the lease is
    the real one, written into its CIB)."""
    stores = {node: store_on_old(node, pulled_new=False) for node in NODES}
    return stores, cluster_of(stores, config=config)


def run(
    tmp_path: Path, cluster: FakeCluster, *, restart: bool = True
) -> tuple[list[dict], BaseException | None]:
    """``pcmkimg update mariadb --image NEW_REF --all``: the report's nodes (``--json``'s),
    and the error."""
    ctx = context(cluster, journal_dir=tmp_path)
    req = execute.UpdateRequest("mariadb", NEW_REF, every=True, restart=restart, timeout=TIMEOUT)
    try:
        outcome = execute.run(ctx, req)
    except PcmkimgError as exc:  # the tests look at the error and the report it carries
        assert isinstance(exc.report, dict)
        return exc.report["nodes"], exc  # type: ignore[index,return-value]
    assert isinstance(outcome.report, UpdateReport)
    return outcome.report.as_dict()["nodes"], None  # type: ignore[return-value]


def test_run_writes_no_lease_renewal_before_a_node_or_a_restart(tmp_path: Path) -> None:
    """The lease is renewed from its own thread (every period / 3): no step of the update
    writes it, so no CIB write of ours delays a restart's stop."""
    stores, cluster = three_nodes()
    nodes, raised = run(tmp_path, cluster)
    assert raised is None
    assert [n["result"] for n in nodes] == ["ok"] * 3
    steps = cluster.kinds("acquire", "renew", "restart", "release")
    assert steps == [
        ("acquire", f"{lease.DEFAULT_PERIOD:g}"),
        *[("restart", node) for node in NODES],
        ("release",),
    ]
    assert all(s.names[FLOATING] == NEW_ID and s.names[BACK] == OLD_ID for s in stores.values())
    assert events(tmp_path)[:4] == ["start", "pull", "pull", "pull"]
    assert events(tmp_path)[-1] == "done"


def test_a_ban_a_killed_run_left_is_removed_and_the_cluster_settles_before_the_preflight(
    tmp_path: Path,
) -> None:
    """The replica that leftover ban held off comes back when it goes: the preflight's
    baseline is taken once the cluster settled, not half-way (issue 12.14: a re-run after a
    SIGKILL with the ban in place hung in its first restart)."""
    stores, cluster = three_nodes()
    left = "cli-ban-galera-bundle-on-controller-0"
    cluster.own_bans = [left]  # what the cluster port finds (for galera-bundle) and removes
    nodes, raised = run(tmp_path, cluster)
    assert raised is None and [n["result"] for n in nodes] == ["ok"] * 3
    assert cluster.kinds("acquire", "removed-bans", "wait", "restart")[:3] == [
        ("acquire", f"{lease.DEFAULT_PERIOD:g}"),
        ("removed-bans", left),
        ("wait",),
    ]
    assert [e["removed"] for e in entries(tmp_path, "leftover-bans")] == [[left]]


def test_a_replica_still_down_is_waited_for_before_the_preflight_takes_its_baseline(
    tmp_path: Path,
) -> None:
    """The update run again right after a SIGTERM stopped a replica (the killed run removed
    its holds; Pacemaker is bringing it back): the preflight waits until the cluster has
    nothing left to do, reads it again, and the replica is in the baseline and restarted in
    its turn. Before, the first restart began while it was down."""
    stores, cluster = three_nodes()
    down = container_of("controller-1")
    stores["controller-1"].stop(down)
    wait = cluster.wait

    def pacemaker_brings_it_back(timeout: float) -> None:
        wait(timeout)
        if stores["controller-1"].image_of(down) is None:
            stores["controller-1"].start(down, OLD_ID)

    cluster.wait = pacemaker_brings_it_back  # type: ignore[method-assign]
    nodes, raised = run(tmp_path, cluster)
    assert raised is None and [n["result"] for n in nodes] == ["ok"] * 3
    assert [e[0] for e in cluster.kinds("acquire", "wait", "restart")][:4] == [
        "acquire",
        "wait",  # crm_resource --wait,
        "wait",  # then settled
        "restart",
    ]
    assert stores["controller-1"].image_of(down) == NEW_ID


def test_a_node_looks_at_the_cluster_once_before_and_once_after_its_restart(
    tmp_path: Path,
) -> None:
    """Each node's step reads the cluster's state (crm_mon) once for the check of the other
    replicas and the replica to restart, and once after the restart. It was three times."""
    stores, cluster = three_nodes()
    nodes, raised = run(tmp_path, cluster)
    assert raised is None and [n["result"] for n in nodes] == ["ok"] * 3
    assert cluster.status_reads == 3 * 2


def test_run_without_restarts_takes_and_releases_the_lease_once(tmp_path: Path) -> None:
    stores, cluster = three_nodes()
    nodes, raised = run(tmp_path, cluster, restart=False)
    assert raised is None
    assert [n["result"] for n in nodes] == ["retag-only"] * 3
    assert [e[0] for e in cluster.kinds("acquire", "renew", "restart", "release")] == [
        "acquire",
        "release",
    ]


def test_run_stops_at_the_first_failed_node_and_leaves_the_rest_untouched(tmp_path: Path) -> None:
    stores, cluster = three_nodes()
    cluster.restart_errors["controller-1"] = (timed_out(), True)
    nodes, raised = run(tmp_path, cluster)
    assert isinstance(raised, UpdateFailed)
    assert [(n["node"], n["result"]) for n in nodes] == [
        ("controller-0", "ok"),
        ("controller-1", "rolled-back"),
    ]
    assert stores["controller-0"].image_of(container_of("controller-0")) == NEW_ID
    assert stores["controller-1"].image_of(container_of("controller-1")) == OLD_ID
    assert stores["controller-2"].called("retag") == []
    assert stores["controller-2"].names[FLOATING] == OLD_ID
    assert cluster.events[-1] == ("release",)
    assert "done" not in events(tmp_path)


def test_run_refuses_when_preflight_finds_problems_and_pulls_nothing(tmp_path: Path) -> None:
    stores, cluster = three_nodes("bans.xml")
    nodes, raised = run(tmp_path, cluster)
    assert isinstance(raised, PreflightFailed)
    assert "cli-ban-galera-bundle-on-controller-1" in raised.message
    assert "`pcmkimg check`" in raised.fix
    assert nodes == []
    assert all(s.called("pull") == [] and s.called("retag") == [] for s in stores.values())
    assert [e[0] for e in cluster.events] == ["acquire", "release"]
    assert events(tmp_path) == ["start", "aborted"]  # the command journals its refusal


def test_run_retags_nowhere_when_one_pull_fails(tmp_path: Path) -> None:
    stores, cluster = three_nodes()
    denied = images.AuthError(
        "pull failed: unauthorized", "log in on the node", node="controller-1"
    )
    stores["controller-1"].fail("pull", denied)
    nodes, raised = run(tmp_path, cluster)
    assert isinstance(raised, PullsFailed)
    assert "controller-1: pull failed: unauthorized" in raised.message
    assert raised.fix == "log in on the node"
    assert nodes == []
    for node, store in stores.items():
        assert store.called("pull") == [NEW_REF], node  # every node pulled once
        assert store.called("retag") == [] and store.names[FLOATING] == OLD_ID
    assert cluster.kinds("restart", "renew") == []
    pulls = {e["node"]: e["ok"] for e in entries(tmp_path, "pull")}
    assert pulls == {"controller-0": True, "controller-1": False, "controller-2": True}
    assert cluster.events[-1] == ("release",)


# --------------------------------------------------------------------------- 6. preflight


def preflight(config: cib.Element | str, mon: str, targets: Sequence[str] = NODES) -> list[str]:
    config_el = _cib(config) if isinstance(config, str) else config
    mon_el = _mon(mon)
    cluster = plan.Cluster(config_el, mon_el, cib.cluster_status(mon_el))
    return plan.preflight_problems(cluster, BUNDLE_ID, targets)


def test_preflight_passes_on_a_healthy_cluster() -> None:
    assert preflight("base.xml", "mon-ok.xml") == []
    # A degraded monitor (OCF_DEGRADED) is shown as a failure but is not one.
    assert preflight("base.xml", "mon-degraded.xml") == []


def test_preflight_lists_leftover_cli_constraints() -> None:
    problems = preflight("bans.xml", "mon-ok.xml")
    ids = [c.id for c in cib.cli_constraints(_cib("bans.xml"))]
    assert len(problems) == len(ids) == 4
    for constraint_id, problem in zip(ids, problems):
        assert problem.startswith(f"leftover constraint {constraint_id} ")
    assert "`crm_resource --clear --resource galera-bundle --node controller-1`" in problems[0]


def test_preflight_refuses_an_unmanaged_bundle() -> None:
    config = cib.set_bundle_meta(_cib("base.xml"), BUNDLE_ID, "is-managed", "false").new_cib
    assert preflight(config, "mon-ok.xml") == [
        f"bundle {BUNDLE_ID} is unmanaged; `crm_resource --resource {BUNDLE_ID} --meta "
        "--delete-parameter is-managed` first"
    ]


def test_preflight_refuses_without_quorum_and_names_the_lost_node() -> None:
    assert preflight("base.xml", "mon-no-quorum.xml") == [
        "the cluster has no quorum",
        "target node controller-2 is no longer online and active",
    ]
    assert preflight("base.xml", "mon-no-quorum.xml", ["controller-0"]) == [
        "the cluster has no quorum"
    ]


def test_preflight_refuses_a_failed_replica_and_says_how_to_clean_it_up() -> None:
    problems = preflight("base.xml", "mon-failed-start.xml")
    assert problems == [
        "replica galera-bundle-podman-1 on controller-1 is not healthy",
        "failed start of galera-bundle-podman-1 on controller-1: User-injected result; clean "
        "it up first with `crm_resource --cleanup --resource galera-bundle-podman-1 "
        "--node controller-1`",
    ]


def test_preflight_refuses_a_target_node_that_went_away() -> None:
    assert preflight("base.xml", "mon-standby.xml") == [
        "target node controller-2 is no longer online and active"
    ]
    assert preflight("base.xml", "mon-standby.xml", ["controller-0", "controller-1"]) == []
    assert preflight("base.xml", "mon-ok.xml", ["controller-9"]) == [
        "target node controller-9 is no longer online and active"
    ]


def test_a_healed_node_whose_replica_does_not_start_is_a_failure(tmp_path: Path) -> None:
    """The guard's failure is cleaned up but the replica stays down: never "retag-only"."""
    store = store_after_update("controller-2", running_image=None)
    cluster = cluster_of({"controller-2": store}, config="guard.xml")
    cluster.extra_failures.append(guard_failure("controller-2"))
    cluster.starts_on_cleanup = False
    res = NodeResult(store.node, before=OLD_ID, after=NEW_ID, retagged=True)
    session = make_session(tmp_path, cluster, {store.node: store})
    holds = FakeHolds(cluster.events)
    with pytest.raises(RestartFailedError, match="did not start"):
        nodestep.restart_together(
            session, [step_on(store.node, res, retag=moved(store.node), holds=holds)], None
        )


def test_a_ban_left_behind_is_raised_as_it_is_without_a_rollback(tmp_path: Path) -> None:
    store = store_on_old("controller-0")
    cluster = cluster_of({"controller-0": store})
    ban = BanNotRemovedError(
        "cli-ban-galera-bundle-on-controller-0 could not be removed after an interruption: x",
        "`crm_resource --clear --resource galera-bundle --node controller-0`",
    )
    cluster.restart_errors["controller-0"] = (ban, True)
    res, raised = update(make_session(tmp_path, cluster), "controller-0")
    assert raised is ban
    assert res.result == "failed" and not res.rolled_back
    assert store.names[FLOATING] == NEW_ID  # left for the operator, with the ban's fix
    assert cluster.kinds("cleanup") == []


# --------------------------------------------------------------------------- issue 9


PREV_ID = "c" * 64


def test_a_rolled_back_attempt_leaves_the_rollback_name_where_it_was(tmp_path: Path) -> None:
    """The rollback name named an older image before the attempt: it names it again after
    the rollback (not the image the attempt failed on), and the floating name the old one."""
    store = store_on_old("controller-0")
    store.names[BACK] = PREV_ID
    cluster = cluster_of({"controller-0": store})
    cluster.restart_errors["controller-0"] = (timed_out(), True)
    res, raised = update(make_session(tmp_path, cluster), "controller-0")
    assert isinstance(raised, UpdateFailed) and res.result == "rolled-back"
    assert store.names[FLOATING] == OLD_ID and store.names[BACK] == PREV_ID
    assert store.called("restore") == [f"{FLOATING} -> {OLD_ID}"]
    retag = entries(tmp_path, "retag")[0]
    assert (retag["rollback"], retag["rollback_before"]) == (BACK, PREV_ID)


def test_a_rerun_rolls_back_to_what_the_journal_says_the_first_run_moved(tmp_path: Path) -> None:
    """An interrupted run moved the name (its journal line says from what); the re-run's
    restart fails: both names go back to before the first run."""
    store = store_after_update("controller-0", running_image=OLD_ID)
    store.known.add(PREV_ID)  # no name since the first run took the rollback name from it
    journal = Journal(tmp_path / "journal.jsonl", "run-0")
    journal.record(
        "retag",
        service="mariadb",
        node="controller-0",
        floating=FLOATING,
        before=OLD_ID,
        after=NEW_ID,
        moved=True,
        rollback=BACK,
        rollback_before=PREV_ID,
    )
    cluster = cluster_of({"controller-0": store})
    cluster.restart_errors["controller-0"] = (
        RestartFailedError("start failed", "fix it"),
        True,
    )
    res, raised = update(make_session(tmp_path, cluster), "controller-0")
    assert isinstance(raised, UpdateFailed) and res.result == "rolled-back"
    assert store.names[FLOATING] == OLD_ID and store.names[BACK] == PREV_ID


def test_a_node_is_not_touched_while_another_replica_is_down(tmp_path: Path) -> None:
    store = store_on_old("controller-0")
    # Only controller-0's store exists: the fake cluster shows replicas 1 and 2 down.
    cluster = cluster_of({"controller-0": store})
    session = make_session(tmp_path, cluster)
    session.baselines[BUNDLE_ID] = plan.Health(
        active={0: "controller-0", 1: "controller-1", 2: "controller-2"}, promoted=3
    )
    res, raised = update(session, "controller-0")
    assert isinstance(raised, PreflightFailed)
    assert "stopped before controller-0, which was not touched" in raised.message
    assert "replica 1 of the bundle (on controller-1" in raised.message
    assert store.called("retag") == [] and res.result == "pending"


def test_a_failed_start_where_the_name_was_missing_is_cleaned_up_and_started(
    tmp_path: Path,
) -> None:
    store = FakeStore("controller-2", {NEW_REF: NEW_ID})  # no floating name, no replica
    cluster = cluster_of({"controller-2": store})
    failure = cib.Failure(
        op_key="galera-bundle-podman-2_start_0",
        resource="galera-bundle-podman-2",
        task="start",
        interval_ms=0,
        node="controller-2",
        exitcode=1,
        exitstatus="error",
        exit_reason="failed to pull image cluster.common.tag/mariadb:pcmklatest",
    )
    cluster.extra_failures.append(failure)
    status = cluster.status()
    assert plan.healable(failure, BUNDLE_ID, {"controller-2"})
    assert not plan.healable(failure, BUNDLE_ID, {"controller-1"})
    read = plan.Cluster(cluster.config, cluster.mon, status)
    assert plan.preflight_problems(read, BUNDLE_ID, ["controller-2"], {"controller-2"}) == []
    assert any(
        "failed start of galera-bundle-podman-2" in p
        for p in plan.preflight_problems(read, BUNDLE_ID, ["controller-2"])
    )
    res, raised = update(make_session(tmp_path, cluster), "controller-2")
    assert raised is None and res.result == "started"
    assert ("cleanup", BUNDLE_ID, "controller-2") in cluster.events
    assert store.image_of(container_of("controller-2")) == NEW_ID


def test_a_pulled_tag_with_another_digest_is_refused_as_bad_input(tmp_path: Path) -> None:
    stores, cluster = three_nodes()
    wrong = images.DigestMismatch(
        f"{NEW_REF} has digest sha256:{'1' * 64}, not the expected sha256:{'2' * 64}",
        "check the digest",
        node="controller-1",
    )
    stores["controller-1"].fail("pull", wrong)
    nodes, raised = run(tmp_path, cluster)
    assert isinstance(raised, DigestRefused)
    assert "nothing was retagged or restarted" in raised.message
    assert "1" * 64 in raised.message and "2" * 64 in raised.message
    assert all(s.called("retag") == [] for s in stores.values())
    assert nodes == []


def test_the_report_has_the_real_downtime_beside_the_restart_step(tmp_path: Path) -> None:
    store = store_on_old("controller-0")
    cluster = cluster_of({"controller-0": store})
    res, raised = update(make_session(tmp_path, cluster), "controller-0")
    assert raised is None and res.result == "ok"
    assert res.down_seconds is not None and 0 <= res.down_seconds <= res.restart_seconds
    report = UpdateReport(BUNDLE_ID, "mariadb", NEW_REF, [res])
    assert report.as_dict()["longest_down_seconds"] == res.down_seconds
    assert "longest restart step" in report.summary()


def test_the_plan_is_what_runs_step_by_step(tmp_path: Path) -> None:
    """The run follows the plan's steps, not a second copy of their order: a plan without
    controller-1's update step leaves controller-1 alone, and the nodes go in step order."""
    stores, cluster = three_nodes()
    facts = [plan.NodeFacts(n, active=True) for n in NODES]
    full = plan.plan_update(BUNDLE, parse(NEW_REF), facts, None)
    steps = tuple(s for s in full.steps if s.nodes != ("controller-1",))
    steps = (*steps[:3], *reversed(steps[3:-1]), steps[-1])  # controller-2 before controller-0
    report = UpdateReport(BUNDLE_ID, "mariadb", NEW_REF)
    job = release.of_update(records.replace(full, steps=steps))
    execute_plan(make_session(tmp_path, cluster), job, report)
    assert [n.node for n in report.nodes] == ["controller-2", "controller-0"]
    assert stores["controller-1"].names[FLOATING] == OLD_ID
    assert [e[1] for e in cluster.kinds("restart")] == ["controller-2", "controller-0"]
    assert cluster.events[0][0] == "acquire" and cluster.events[-1] == ("release",)


# ---------------------------------------------------------------- where Pacemaker will not act


def _with_property(config: cib.Element, name: str, value: str) -> cib.Element:
    props = config.find("configuration/crm_config/cluster_property_set")
    assert props is not None
    props.append(etree.Element("nvpair", id=f"test-{name}", name=name, value=value))
    return config


def _guard_unmanaged() -> cib.Element:
    config = _cib("guard.xml")
    clone = config.find(f"configuration/resources/clone[@id='{BUNDLE_ID}-guard-clone']")
    assert clone is not None
    meta = etree.SubElement(clone, "meta_attributes", id="test-guard-meta")
    etree.SubElement(meta, "nvpair", id="test-guard-unmanaged", name="is-managed", value="false")
    return config


def _replicas_per_host(config: cib.Element) -> cib.Element:
    runtime = config.find(f"configuration/resources/bundle[@id='{BUNDLE_ID}']/podman")
    assert runtime is not None
    runtime.set("replicas-per-host", "2")
    return config


def _meta(name: str, value: str) -> Callable[[], cib.Element]:
    return lambda: cib.set_bundle_meta(_cib("base.xml"), BUNDLE_ID, name, value).new_cib


@pytest.mark.parametrize(
    ("config", "said"),
    [
        (lambda: _with_property(_cib("base.xml"), "maintenance-mode", "true"), "maintenance mode"),
        (_meta("maintenance", "true"), "is in maintenance"),
        (_meta("target-role", "Stopped"), "disabled (target-role=Stopped)"),
        (_guard_unmanaged, f"the guard {BUNDLE_ID}-guard-clone of {BUNDLE_ID} is unmanaged"),
        (lambda: _replicas_per_host(_cib("base.xml")), "replicas-per-host=2"),
    ],
    ids=["maintenance-mode", "bundle-maintenance", "disabled", "guard-unmanaged", "per-host"],
)
def test_run_refuses_what_pacemaker_will_not_carry_out_before_any_pull_or_retag(
    tmp_path: Path,
    config: Callable[[], cib.Element],
    said: str,
) -> None:
    """Issue 18 item 6: in maintenance mode the update retagged, was refused at the restart
    and rolled back (exit 6); now the preflight refuses (exit 3), nothing pulled or retagged."""
    stores, cluster = three_nodes()
    cluster.config = config()
    nodes, raised = run(tmp_path, cluster)
    assert isinstance(raised, PreflightFailed), raised
    assert said in raised.message
    assert nodes == []
    assert all(s.called("pull") == [] and s.called("retag") == [] for s in stores.values())
    assert [e[0] for e in cluster.events] == ["acquire", "release"]


def test_a_healed_guard_where_every_replica_runs_elsewhere_is_retag_only(tmp_path: Path) -> None:
    """Issue 18 item 4: the guard of a spare node (2 replicas, both running elsewhere: none
    can be placed here) refused; the update cleans it up and does not wait for a start that
    can't come (it reported exit 7, "nothing to roll back to")."""
    store = store_after_update("controller-2", running_image=None)
    stores = {n: store_on_old(n) for n in NODES[:2]} | {"controller-2": store}
    cluster = cluster_of(stores, config="guard.xml")
    runtime = cluster.config.find(f"configuration/resources/bundle[@id='{BUNDLE_ID}']/podman")
    assert runtime is not None
    runtime.set("replicas", "2")  # both run, on controller-0 and controller-1
    cluster.extra_failures.append(guard_failure("controller-2"))
    cluster.starts_on_cleanup = False
    res = NodeResult(store.node, before=OLD_ID, after=NEW_ID, retagged=True)
    session = make_session(tmp_path, cluster, {store.node: store})
    holds = FakeHolds(cluster.events)
    step = step_on(store.node, res, retag=moved(store.node), holds=holds)
    nodestep.restart_together(session, [step], None)
    assert res.result == "retag-only"
    assert ("cleanup", f"{BUNDLE_ID}-guard", "controller-2") in cluster.events
    # The cleanup ran under the holds (the pin), released right after.
    assert [e[0] for e in cluster.kinds("hold", "cleanup", "release")] == [
        "hold",
        "cleanup",
        "release",
    ]


# --------------------------------------------------------------------------- membership faults


def offline(cluster: FakeCluster, node: str) -> None:
    """``node`` as crm_mon shows a node that left the cluster (its corosync or link down)."""
    nodes = tuple(
        records.replace(n, online=False) if n.name == node else n for n in cluster.base.nodes
    )
    cluster.base = records.replace(cluster.base, nodes=nodes)


def test_a_node_that_left_the_cluster_during_its_restart_gets_its_names_back_exit_6(
    tmp_path: Path,
) -> None:
    """Issue 22 item 1: the restart timed out because the node left the cluster. Its replica
    can't be started or verified there now; its names are put back (it starts on the previous
    image when the node rejoins) and the update stops with exit 6 naming what happened,
    instead of a rollback that fails (exit 7) and a fix that retags by hand."""
    store = store_on_old("controller-0")
    cluster = cluster_of({"controller-0": store})
    cluster.restart_errors["controller-0"] = (timed_out(), True)
    offline(cluster, "controller-0")
    res, raised = update(make_session(tmp_path, cluster), "controller-0")

    assert isinstance(raised, UpdateFailed) and raised.family.__name__ == "NodeFailed"
    assert "left the cluster during its restart" in raised.message
    assert "bring controller-0 back into the cluster" in raised.fix
    assert res.result == "rolled-back" and res.rolled_back
    assert store.names[FLOATING] == OLD_ID and key(BACK) not in store.names  # as before
    # Nothing asked of a node that is not there: no cleanup, no second restart.
    assert cluster.kinds("cleanup", "restart") == [("restart", "controller-0")]
    assert events(tmp_path) == ["retag", "restart", "failed", "rolled-back"]
    assert entries(tmp_path, "rolled-back")[0]["offline"] is True


def test_no_rollback_once_the_lease_may_be_another_holders(tmp_path: Path) -> None:
    """Issue 22 item 7: a holder cut off from the others (its renewals fail) whose restart
    failed does not roll the node back: by then another pcmkimg may have taken the lease over
    and be updating that node. It stops (exit 4), the node as the journal says."""
    from pcmkimg.adapters import lease as leasing

    store = store_on_old("controller-0")
    cluster = cluster_of({"controller-0": store})
    cluster.restart_errors["controller-0"] = (timed_out(), True)
    clock = [0.0]
    keeper = leasing.Keeper(cluster, leasing.new_lease(10.0), monotonic=lambda: clock[0])
    session = make_session(tmp_path, cluster)
    session.holding = leasing.Holding(keeper)
    clock[0] = 11.0  # no renewal for longer than the period
    res, raised = update(session, "controller-0")

    assert isinstance(raised, lease.LeaseLostError), raised
    assert res.result == "failed" and not res.rolled_back
    assert store.names[FLOATING] == NEW_ID  # the name stays as the journal's retag says
    assert events(tmp_path) == ["retag", "restart", "failed", "failed"]


def test_a_check_of_the_session_refuses_a_node_before_its_first_write(tmp_path: Path) -> None:
    """The hook of the checks before a node's first write (the scheduler's simulation, a
    pending fence): it sees the node's steps before any retag, with the turn's look at the
    cluster, and a refusal leaves the node untouched."""
    store = store_on_old("controller-0")
    cluster = cluster_of({"controller-0": store})
    seen: list[tuple[str, bool, bool]] = []

    def refuse(session: Session, steps: Sequence[NodeStep], status: cib.ClusterStatus) -> None:
        seen.extend((s.node, s.retag is None, status.node(s.node) is not None) for s in steps)
        raise PreflightFailed("stopped before controller-0, which was not touched", "fix it")

    session = make_session(tmp_path, cluster)
    session.checks = (refuse,)
    res, raised = update(session, "controller-0")
    assert isinstance(raised, PreflightFailed)
    assert seen == [("controller-0", True, True)]
    assert store.called("retag") == [] and res.result == "pending"
    assert cluster.kinds("hold", "restart", "cleanup", "attribute") == []
