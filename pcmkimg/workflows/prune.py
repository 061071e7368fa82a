"""``pcmkimg prune``: old images of a service out of the node stores, under the lease.

Under the lease, so that an update's freshly pulled image is never pruned before its retag.
"""

from __future__ import annotations

from pcmkimg.adapters import lease as leasing
from pcmkimg.core import plan
from pcmkimg.core.errors import NodesUnreachable, UnknownNode
from pcmkimg.core.images import Pruned
from pcmkimg.records import dataclass, field
from pcmkimg.workflows.context import Context
from pcmkimg.workflows.update import one_of


@dataclass(frozen=True)
class PruneRequest:
    """``pcmkimg prune SERVICE (--node N... | --all) [--keep N]``."""

    service: str
    nodes: tuple[str, ...] = ()
    every: bool = False
    keep: int = 1


@dataclass
class PruneReport:
    """What was pruned on each node, and the nodes that could not be pruned."""

    pruned: dict[str, Pruned] = field(default_factory=dict)
    failed: dict[str, BaseException] = field(default_factory=dict)

    def as_dict(self) -> dict[str, object]:
        return {n: r.__dict__ for n, r in self.pruned.items()}

    def lines(self) -> list[str]:
        return [
            f"{n}: removed {len(r.removed)}, kept {len(r.kept)}, protected {len(r.protected)}"
            for n, r in self.pruned.items()
        ]

    def error(self) -> NodesUnreachable | None:
        """The error of the nodes that could not be pruned (None: every node was), with the
        report of the others."""
        if not self.failed:
            return None
        error = NodesUnreachable(
            "; ".join(f"{n}: {e}" for n, e in self.failed.items()),
            "reach those nodes, then prune them again (the others were pruned)",
        )
        error.report = self.as_dict()
        return error


def run(ctx: Context, req: PruneRequest) -> PruneReport:
    """Prune ``req.service`` on its nodes (every cluster node with ``every``)."""
    one_of(req.nodes, req.every)
    cluster = ctx.cluster.read_cluster()
    bundle = plan.find_bundle(cluster, req.service, ctx.scheme)
    known = [f.name for f in plan.node_facts(cluster, bundle.id)]
    unknown = [n for n in req.nodes if n not in known]
    if unknown:
        raise UnknownNode(
            f"not cluster nodes: {', '.join(unknown)}", f"cluster nodes: {', '.join(known)}"
        )
    targets = known if req.every else list(req.nodes)
    with ctx.open_stores() as stores, leasing.held(ctx.cluster, ctx.lease_period):
        results = stores.each(targets, lambda s: s.prune(bundle.service, keep=req.keep))
    return PruneReport(
        pruned={n: r for n, r in results.items() if isinstance(r, Pruned)},
        failed={n: r for n, r in results.items() if isinstance(r, BaseException)},
    )
