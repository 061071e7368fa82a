"""What the update workflow does about the faults of the node's world found live (issue 22,
``tests/integration/test_faults_world_live.py``), with the fakes of its two ports."""

from __future__ import annotations

from pathlib import Path

from pcmkimg.workflows.errors import RollbackFailed
from tests.fakes import FLOATING
from tests.unit.test_execute_paths import (
    NEW_ID,
    OLD_ID,
    cluster_of,
    entries,
    events,
    make_session,
    run,
    store_on_old,
    three_nodes,
    unreachable,
    update,
)


def test_a_store_gone_after_the_retag_and_in_the_rollback_names_the_socket_and_the_rerun(
    tmp_path: Path,
) -> None:
    """The node's podman API service killed after its retag: the look at its container fails,
    and so does the rollback's restore; the node keeps the names the journal's retag line says,
    and the fix says to bring the API back and run the update again (or go back by hand)."""
    store = store_on_old("controller-0")
    cluster = cluster_of({"controller-0": store})
    error = unreachable()
    store.fail("containers", error)
    store.fail("restore", error)
    res, raised = update(make_session(tmp_path, cluster), "controller-0")

    assert isinstance(raised, RollbackFailed) and raised.__cause__ is error
    assert res.result == "rollback-failed"
    assert store.names[FLOATING] == NEW_ID  # as the retag left it
    assert entries(tmp_path, "retag")[0]["after"] == NEW_ID
    assert entries(tmp_path, "retag")[0]["before"] == OLD_ID
    assert events(tmp_path) == ["retag", "failed", "rollback-failed"]
    assert raised.fix.startswith(error.fix)
    assert "run the same command again: it finishes controller-0" in raised.fix
    assert "`podman tag cluster.common.tag/mariadb:pcmkprevious" in raised.fix


def test_a_ban_another_writer_put_back_after_a_node_is_removed_before_the_next(
    tmp_path: Path,
) -> None:
    """A stale replace of the configuration (``pcs resource update``) after controller-0's
    restart puts its ban back: it is removed before controller-1's turn, and the cluster
    settles (the replica that ban stopped comes back before the next node's checks)."""
    stores, cluster = three_nodes()
    written_back = "cli-ban-galera-bundle-on-controller-0"
    restart_replica = cluster.restart_replica

    def restart_then_written_back(bundle_id, node, timeout, *, holds=None):  # type: ignore[no-untyped-def]
        restart_replica(bundle_id, node, timeout, holds=holds)
        if node == "controller-0":
            cluster.own_bans = [written_back]

    cluster.restart_replica = restart_then_written_back  # type: ignore[method-assign]
    nodes, raised = run(tmp_path, cluster)
    assert raised is None and [n["result"] for n in nodes] == ["ok"] * 3
    steps = cluster.kinds("removed-bans", "wait", "restart")
    assert steps[:5] == [
        ("restart", "controller-0"),
        ("removed-bans", written_back),
        ("wait",),  # crm_resource --wait,
        ("wait",),  # then settled
        ("restart", "controller-1"),
    ]
    assert [e["removed"] for e in entries(tmp_path, "leftover-bans")] == [[written_back]]
