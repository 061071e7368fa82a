"""``pcmkimg prune``: old images of a service out of the node stores, under the lease.

Under the lease, so that an update's freshly pulled image is never pruned before its retag.
"""

from __future__ import annotations

from collections.abc import Sequence

from pcmkimg.adapters import lease as leasing
from pcmkimg.adapters import pacemaker
from pcmkimg.adapters import podman as images
from pcmkimg.core import naming, plan


def prune(
    runner: pacemaker.Runner,
    stores: images.Stores,
    scheme: naming.Scheme,
    service: str,
    nodes: Sequence[str] | None,
    keep: int,
) -> tuple[dict[str, images.Pruned], dict[str, BaseException]]:
    """Prune ``service`` on ``nodes`` (None: every cluster node): (pruned, failed) by node."""
    cluster = pacemaker.read_cluster(runner)
    bundle = plan.find_bundle(cluster, service, scheme)
    known = [f.name for f in plan.node_facts(cluster, bundle.id)]
    unknown = [n for n in nodes or () if n not in known]
    if unknown:
        raise plan.UnknownNode(
            f"not cluster nodes: {', '.join(unknown)}", f"cluster nodes: {', '.join(known)}"
        )
    targets = known if nodes is None else list(nodes)
    with leasing.held(runner):
        results = stores.each(targets, lambda s: s.prune(bundle.service, keep=keep))
    pruned = {n: r for n, r in results.items() if isinstance(r, images.Pruned)}
    failed = {n: r for n, r in results.items() if isinstance(r, BaseException)}
    return pruned, failed
