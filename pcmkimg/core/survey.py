"""What ``status``, ``check``, ``metrics`` and ``outdated`` read, as plain records: the bundles
behind a floating name, and what each node's store says of each (:class:`Gathered`); pure.

:func:`pcmkimg.workflows.survey.gather` fills them from one read of the cluster and the nodes'
stores; :mod:`pcmkimg.core.statusdoc` and :mod:`pcmkimg.core.problems` judge them.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from pcmkimg.core import cib, naming
from pcmkimg.core import commands as cmd
from pcmkimg.core.errors import UnknownService
from pcmkimg.core.images import Container, Resolved
from pcmkimg.core.plan import Cluster, NodeFacts, node_facts_of
from pcmkimg.records import dataclass, field


@dataclass(frozen=True)
class NodeView:
    """What one node's store said: the floating name, the containers, or why it can't say."""

    node: str
    resolved: Resolved | None = None
    containers: tuple[Container, ...] = ()
    error: str | None = None
    socket_down: bool = False
    """The node's local podman API socket does not answer (the guard falls back there)."""


@dataclass(frozen=True)
class Service:
    service: str
    bundle: cib.Bundle
    floating: str
    nodes: list[NodeFacts]
    qualified: bool = True
    """The floating name has a registry part: a store lists it under that very name (a
    short name is left to podman's own lookup)."""


@dataclass
class Gathered:
    cluster: Cluster
    services: list[Service]
    views: dict[tuple[str, str], NodeView] = field(default_factory=dict)  # (bundle, node)


def floating_bundles(
    cluster: Cluster, scheme: naming.Scheme, wanted: Sequence[str] = ()
) -> list[Service]:
    """Bundles behind a floating name (all, or those named by service or bundle id)."""
    chosen = []
    for bundle in cib.bundles(cluster.config):
        name = naming.as_floating(bundle.image, scheme)
        if name is None:
            continue
        if wanted and bundle.id not in wanted and name.service not in wanted:
            continue
        chosen.append((bundle, name))
    facts = node_facts_of(cluster, [bundle for bundle, _ in chosen])
    found = [
        Service(name.service, b, b.image, facts[b.id], qualified=name.ref.domain is not None)
        for b, name in chosen
    ]
    if wanted:
        known = {s.service for s in found} | {s.bundle.id for s in found}
        missing = [w for w in wanted if w not in known]
        if missing:
            raise UnknownService(
                f"no bundle behind a floating name for: {', '.join(missing)}",
                f"run {cmd.quoted(cmd.status())} without arguments to list them",
            )
    return found


#: naming.is_scheme_name, once per distinct name: the same names recur on every node.
_is_scheme_name = functools.lru_cache(maxsize=65536)(naming.is_scheme_name)


def real_names(resolved: Resolved) -> list[str]:
    """The other names of the image behind the floating name that are not the scheme's."""
    return sorted(n for n in resolved.other_names if not _is_scheme_name(n))


def running_container(view: NodeView, replica: cib.ReplicaStatus | None) -> dict[str, str] | None:
    """The replica's container as the node's store reports it, if it runs there."""
    if replica is None or not replica.active:
        return None
    for c in view.containers:
        if c.name.lstrip("/") == replica.container_id:
            return {"name": replica.container_id, "id": c.id, "image_id": c.image_id}
    return None


def guard_ids(s: Service) -> list[str]:
    """The guard's primitive id, if the bundle has a guard (whose failures are the bundle's)."""
    return [s.bundle.guard.primitive_id] if s.bundle.guard else []
