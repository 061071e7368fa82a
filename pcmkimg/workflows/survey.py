"""The read that ``status``, ``check``, ``metrics`` and ``outdated`` share: one read of the
cluster, the bundles behind a floating name, and the nodes' stores asked in parallel through
read-only views (:mod:`pcmkimg.core.survey` holds what it gathers)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Union

from pcmkimg.core.errors import SocketDown
from pcmkimg.core.images import Resolved, Unresolved
from pcmkimg.core.plan import Cluster
from pcmkimg.core.survey import Gathered, NodeView, Service, floating_bundles
from pcmkimg.errors import PcmkimgError
from pcmkimg.workflows.context import Context

if TYPE_CHECKING:
    from pcmkimg.adapters.storeview import StoreView, StoreViews


def gather(cluster: Cluster, stores: StoreViews, services: list[Service]) -> Gathered:
    """Ask every node's store about every service, in parallel: one image list and one
    container list per node, looked up in memory (not one call per service and node)."""
    out = Gathered(cluster, services)
    nodes = sorted({f.name for s in services for f in s.nodes if f.ready})

    def ask(store: StoreView) -> tuple[dict[str, Union[Resolved, Unresolved]], tuple[Any, ...]]:
        named = {name: image for image in store.named_images() for name in image.names}
        resolved: dict[str, Union[Resolved, Unresolved]] = {}
        for s in services:
            image = named.get(s.floating)
            if image is not None:
                resolved[s.floating] = Resolved(store.node, s.floating, image)
            elif s.qualified:
                resolved[s.floating] = Unresolved(store.node, s.floating)
            else:  # a short name: podman's lookup (localhost/, search registries) decides
                resolved[s.floating] = store.resolve(s.floating)
        return resolved, store.containers(running_only=True)

    answers = stores.each(nodes, ask)
    for service in services:
        for fact in service.nodes:
            answer = answers.get(fact.name)
            key = (service.bundle.id, fact.name)
            if answer is None:
                out.views[key] = NodeView(fact.name, error=fact.why_not_ready or "not queried")
            elif isinstance(answer, Exception):
                msg = answer.one_line() if isinstance(answer, PcmkimgError) else str(answer)
                down = isinstance(answer, SocketDown)
                out.views[key] = NodeView(fact.name, error=msg, socket_down=down)
            else:
                resolved, containers = answer
                found = resolved[service.floating]
                out.views[key] = NodeView(
                    fact.name,
                    found if isinstance(found, Resolved) else None,
                    tuple(containers),
                )
    return out


def survey(ctx: Context, services: Sequence[str] = ()) -> Gathered:
    """One read of the cluster, then of the nodes' stores (read-only views): everything
    about the bundles behind a floating name (all, or those named by service or bundle id)."""
    cluster = ctx.cluster.read_cluster()
    found = floating_bundles(cluster, ctx.scheme, services)
    with ctx.open_views() as views:
        return gather(cluster, views, found)
