"""The rules of a replica restart, on CIB and crm_mon data: may it go ahead, and what failed.

Pure: :mod:`pcmkimg.adapters.pacemaker` reads the cluster, runs ``crm_resource --restart`` and
asks these rules before (:func:`check_restartable`) and after (:func:`new_failures`). Here, not
in :mod:`pcmkimg.core.plan`, because they are the restart's own preconditions and its verdict,
whoever asks for a restart.
"""

from __future__ import annotations

from collections.abc import Iterable

from pcmkimg.core import cib
from pcmkimg.core import commands as cmd
from pcmkimg.errors import Refused


class RestartRefusedError(Refused):
    """A replica restart was refused before touching anything (the reason says why)."""


class RestartNoQuorumError(RestartRefusedError):
    """A replica restart was refused: the cluster (partition) has no quorum."""


def check_restartable(
    config: cib.Element, state: cib.ClusterStatus, bundle_id: str, node: str
) -> cib.ReplicaStatus:
    """The replica of ``bundle_id`` on ``node`` if a restart may go ahead; else raise."""
    bundle = cib.bundle(config, bundle_id)
    where = f"restart of {bundle_id} on {node} refused"
    if not state.have_quorum:
        raise RestartNoQuorumError(
            f"{where}: the cluster has no quorum",
            "restore quorum (bring nodes back online), then retry",
        )
    if cib.is_true(cib.cluster_properties(config).get("maintenance-mode")):
        raise RestartRefusedError(
            f"{where}: the cluster is in maintenance mode",
            f"leave maintenance mode ({cmd.quoted(cmd.leave_maintenance_mode())}) first",
        )
    if not bundle.is_managed:
        raise RestartRefusedError(
            f"{where}: the bundle is unmanaged", f"{cmd.quoted(cmd.manage(bundle_id))} first"
        )
    if (bundle.target_role or "").lower() == "stopped":
        raise RestartRefusedError(
            f"{where}: the bundle is disabled (target-role=Stopped)",
            f"{cmd.quoted(cmd.enable(bundle_id))} first, or leave it stopped",
        )
    known = state.node(node)
    if known is None:
        names = ", ".join(n.name for n in state.nodes) or "none"
        raise RestartRefusedError(f"{where}: no node {node!r} (nodes: {names})", "check the name")
    for flag, fix in (
        ("standby", f"{cmd.quoted(cmd.node_unstandby(node))} first"),
        ("maintenance", f"{cmd.quoted(cmd.node_unmaintenance(node))} first"),
    ):
        if getattr(known, flag):
            raise RestartRefusedError(f"{where}: the node is in {flag}", fix)
    if not known.usable:
        raise RestartRefusedError(
            f"{where}: the node is not online and ready", "bring the node online, then retry"
        )
    replica = state.replica_on(bundle_id, node)
    if replica is None or not replica.active:
        raise RestartRefusedError(
            f"{where}: no active replica of {bundle_id} on {node}",
            f"start it first ({cmd.quoted(cmd.cleanup(bundle_id, node))})",
        )
    if replica.failed:
        raise RestartRefusedError(
            f"{where}: the replica has failed (crm_mon shows a failed operation)",
            f"fix the cause, then {cmd.quoted(cmd.cleanup(bundle_id, node))}",
        )
    if not replica.managed:
        raise RestartRefusedError(
            f"{where}: the replica is unmanaged", f"{cmd.quoted(cmd.manage(bundle_id))} first"
        )
    return replica


def new_failures(
    before: Iterable[cib.Failure],
    after: Iterable[cib.Failure],
    bundle: cib.Bundle,
    replica: cib.ReplicaStatus,
    node: str,
) -> list[cib.Failure]:
    """Real (not degraded) failures of this replica in ``after`` that are not in ``before``.

    A failure is the same one when its :attr:`~pcmkimg.core.cib.Failure.key` is (operation,
    node, call id, last-rc-change): a repeated failure of one operation gets a new call id, so
    it counts as new. The order of either list does not matter.
    """
    seen = {f.key for f in before}
    inner = bundle.primitive.id if bundle.primitive else None
    guest = f"{bundle.id}-{replica.replica}"
    return [
        f
        for f in after
        if f.key not in seen
        and not f.degraded
        and f.node in (node, guest)
        and (f.resource.startswith(f"{bundle.id}-") or f.resource == inner)
    ]
