"""``pcmkimg rollback``: the floating name back to the rollback image on one node.

The same node step as an update (:class:`~pcmkimg.workflows.update.Updater`), to the image kept
under the rollback name: a retag (a swap: the rollback name then keeps the image it replaced)
and a restart of that node's replica, checked and rolled back on failure like any update.
"""

from __future__ import annotations

from pcmkimg.adapters import lease as leasing
from pcmkimg.adapters import pacemaker
from pcmkimg.adapters import podman as images
from pcmkimg.adapters.journal import Journal
from pcmkimg.core import commands as cmd
from pcmkimg.core import naming, plan
from pcmkimg.errors import PcmkimgError
from pcmkimg.workflows.update import NodeResult, UpdateFailed, Updater


def rollback(
    runner: pacemaker.Runner,
    stores: images.Stores,
    jrnl: Journal,
    scheme: naming.Scheme,
    service: str,
    node: str,
    timeout: float,
    say: plan.Say,
) -> tuple[plan.BundleRef, NodeResult, str]:
    """Roll ``service`` back on ``node``: (the bundle, the node's result, the image ID)."""
    cluster = pacemaker.read_cluster(runner)
    bundle = plan.find_bundle(cluster, service, scheme)
    plan.choose_nodes(bundle, plan.node_facts(cluster, bundle.id), [node])
    back = naming.rollback_name(bundle.service, scheme)
    with leasing.held(runner, say=say) as held:  # renewed in the background until released
        target = stores.get(node).resolve(back)
        if not isinstance(target, images.Resolved):
            raise plan.PreflightFailed(
                f"{back} does not exist on {node}: there is nothing to roll back to",
                f"use {cmd.shown(cmd.update(node, bundle.service))}",
            )

        updater = Updater(runner, stores, jrnl, say, timeout, holding=held)
        updater.baseline = plan.health(_without_leftover_bans(updater, bundle).status, bundle.id)
        res = NodeResult(node)
        updater.record("rollback", service=bundle.service, node=node, to=target.id)
        try:
            updater.update_node(bundle, res, back, target.id, True)
        except UpdateFailed as exc:
            cause = exc.__cause__
            said = cause.message if isinstance(cause, PcmkimgError) else exc.message
            raise UpdateFailed(
                f"rollback of {bundle.service} on {node} failed, and {node} was put back on "
                f"the image it ran before: {said}",
                f"the image under {back} does not start on {node}; update the node to a "
                "working image instead"
                if isinstance(cause, pacemaker.RestartFailedError)
                else exc.fix,
            ) from exc
    return bundle, res, target.id


def _without_leftover_bans(updater: Updater, bundle: plan.BundleRef) -> plan.Cluster:
    """The cluster read under the lease, once the bans an earlier, killed restart of
    ``bundle`` left are gone and the cluster has settled (the update's preflight does the
    same): the rollback's baseline."""
    cluster = pacemaker.read_cluster(updater.runner)
    left = pacemaker.remove_own_bans(updater.runner, bundle.id, cluster.config)
    if not left:
        return cluster
    for cid in left:
        updater.say(f"removed {cid}, left behind by an earlier restart")
    pacemaker.settle(updater.runner, updater.timeout)
    updater.record("leftover-bans", service=bundle.service, removed=left)
    return pacemaker.read_cluster(updater.runner)
