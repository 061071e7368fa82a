"""The state in ``crm_mon --output-as=xml``: nodes, replicas, failures."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

from pcmkimg.core.cib.xml import Element, _int, is_true
from pcmkimg.records import dataclass

DEGRADED_EXITCODES = frozenset({190, 191})  # OCF_DEGRADED, OCF_DEGRADED_PROMOTED
_ROLE_ALIASES = {"Master": "Promoted", "Slave": "Unpromoted"}


# --------------------------------------------------------------------------- status

_REPLICA_SUFFIX = re.compile(r"-(?:(?:docker|podman|rkt)-\d+|\d+|ip-[0-9A-Fa-f.:]+)")


def is_replica_resource(bundle_id: str, resource: str) -> bool:
    """Whether ``resource`` is one of the resources Pacemaker makes for the replicas of
    ``bundle_id``: ``B-RUNTIME-N`` (container), ``B-N`` (remote connection), ``B-ip-ADDR``.
    Exactly: the guard ``B-guard`` and another bundle ``B-x`` are not."""
    return resource.startswith(f"{bundle_id}-") and bool(
        _REPLICA_SUFFIX.fullmatch(resource, len(bundle_id))
    )


@dataclass(frozen=True)
class ReplicaStatus:
    bundle_id: str
    replica: int
    container_id: str  # e.g. "galera-bundle-podman-0"
    node: str | None  # where the container runs
    role: str  # inner resource's role (container's when no inner), "Stopped" if not running
    container_role: str
    active: bool
    failed: bool
    managed: bool
    blocked: bool
    resources: tuple[str, ...] = ()
    """Every resource of the replica: container, ip, remote connection, inner primitive."""
    guest: str | None = None
    """The replica's guest node (its remote connection's id) when it has an inner primitive."""


FailureKey = tuple[str, str, str, str]


@dataclass(frozen=True)
class Failure:
    op_key: str
    resource: str
    task: str
    interval_ms: int
    node: str
    exitcode: int
    exitstatus: str
    exit_reason: str
    call_id: str = ""
    """The executor's call id of the failed operation (``call``)."""
    last_rc_change: str = ""
    """When the result last changed (``last-rc-change``), as crm_mon prints it."""

    @property
    def degraded(self) -> bool:
        """OCF_DEGRADED(_PROMOTED): success shown as a failure; not a real failure."""
        return self.exitcode in DEGRADED_EXITCODES

    @property
    def key(self) -> FailureKey:
        """What identifies this failure among crm_mon's: (op_key, node, call id,
        last-rc-change). The same operation failing again gets a new call id."""
        return (self.op_key, self.node, self.call_id, self.last_rc_change)


@dataclass(frozen=True)
class NodeStatus:
    name: str
    id: str
    kind: str
    online: bool
    standby: bool
    maintenance: bool
    pending: bool
    unclean: bool
    shutdown: bool
    is_dc: bool

    @property
    def usable(self) -> bool:
        """Online and able to run resources."""
        return (
            self.online
            and not (self.standby or self.maintenance or self.pending or self.unclean)
            and not self.shutdown
        )


@dataclass(frozen=True)
class ClusterStatus:
    have_quorum: bool
    dc: str | None
    nodes: tuple[NodeStatus, ...]
    replicas: tuple[ReplicaStatus, ...]
    failures: tuple[Failure, ...]

    # The lookups are dictionaries made once, on first use (linear in the replicas, where a
    # scan per bundle and node was quadratic); the status itself never changes.

    @functools.cached_property
    def _nodes_by_name(self) -> dict[str, NodeStatus]:
        found: dict[str, NodeStatus] = {}
        for n in self.nodes:
            found.setdefault(n.name, n)
        return found

    @functools.cached_property
    def _replicas_by_bundle(self) -> dict[str, list[ReplicaStatus]]:
        found: dict[str, list[ReplicaStatus]] = {}
        for r in self.replicas:
            found.setdefault(r.bundle_id, []).append(r)
        return found

    @functools.cached_property
    def _replica_by_node(self) -> dict[tuple[str, str | None], ReplicaStatus]:
        found: dict[tuple[str, str | None], ReplicaStatus] = {}
        for r in self.replicas:
            found.setdefault((r.bundle_id, r.node), r)
        return found

    @functools.cached_property
    def _failures_by_resource(self) -> dict[str, list[tuple[int, Failure]]]:
        """resource -> (position in :attr:`failures`, failure), in crm_mon's order."""
        found: dict[str, list[tuple[int, Failure]]] = {}
        for i, f in enumerate(self.failures):
            found.setdefault(f.resource, []).append((i, f))
        return found

    def node(self, name: str) -> NodeStatus | None:
        return self._nodes_by_name.get(name)

    def replicas_of(self, bundle_id: str) -> list[ReplicaStatus]:
        return list(self._replicas_by_bundle.get(bundle_id, ()))

    def replica_on(self, bundle_id: str, node: str) -> ReplicaStatus | None:
        return self._replica_by_node.get((bundle_id, node))

    @property
    def real_failures(self) -> list[Failure]:
        return [f for f in self.failures if not f.degraded]

    @property
    def degraded(self) -> list[Failure]:
        return [f for f in self.failures if f.degraded]

    def failures_of(self, resource_ids: Iterable[str], node: str | None = None) -> list[Failure]:
        wanted = set(resource_ids)
        return [
            f for f in self.failures if f.resource in wanted and (node is None or f.node == node)
        ]

    def bundle_failures(
        self, bundle_id: str, also: Iterable[str] = ()
    ) -> list[tuple[str | None, Failure]]:
        """(host, failure) of every failure of the bundle and of any resource of any of its
        replicas (container, ip, remote connection, inner primitive), and of ``also`` (e.g. the
        guard), whether or not a replica is active on that node now: a container whose start
        failed is stopped there and its replica may run elsewhere or nowhere. The host is the
        node where it failed; for a failure on a replica's guest node (the inner primitive), the
        node where that replica's container runs, None when it runs nowhere."""
        replicas = self.replicas_of(bundle_id)
        wanted = {bundle_id, *also, *(rid for r in replicas for rid in r.resources)}
        wanted |= {r.container_id for r in replicas}
        hosts: dict[str, str | None] = {
            r.guest: (r.node if r.active else None) for r in replicas if r.guest
        }
        by_resource = self._failures_by_resource
        found = sorted(pair for rid in wanted for pair in by_resource.get(rid, ()))
        return [(hosts[f.node] if f.node in hosts else f.node, f) for _, f in found]


def _role(value: str | None) -> str:
    role = value or "Stopped"
    return _ROLE_ALIASES.get(role, role)


def _replica(bundle_el: Element, replica_el: Element) -> ReplicaStatus:
    bundle_id = bundle_el.get("id", "")
    number = _int(replica_el.get("id"), -1)
    runtime = bundle_el.get("type", "podman")
    container_id = f"{bundle_id}-{runtime}-{number}"
    resources = replica_el.findall("resource")
    container = next((r for r in resources if r.get("id") == container_id), None)
    if container is None:  # unknown naming: the resource whose agent is the runtime's
        container = next(
            (r for r in resources if r.get("resource_agent", "").endswith(f":{runtime}")), None
        )
    inner = next(
        (
            r
            for r in resources
            if r is not container
            and r.get("id") != f"{bundle_id}-{number}"
            and not r.get("id", "").startswith(f"{bundle_id}-ip-")
        ),
        None,
    )
    node_el = container.find("node") if container is not None else None
    active = container is not None and is_true(container.get("active"))
    remote = next((r for r in resources if r.get("resource_agent") == "ocf:pacemaker:remote"), None)
    container_role = _role(container.get("role") if container is not None else None)
    role = container_role if inner is None or not active else _role(inner.get("role"))
    return ReplicaStatus(
        bundle_id=bundle_id,
        replica=number,
        container_id=container.get("id", container_id) if container is not None else container_id,
        node=node_el.get("name") if node_el is not None else None,
        role=role if active else "Stopped",
        container_role=container_role,
        active=active,
        failed=any(is_true(r.get("failed")) for r in resources),
        managed=all(is_true(r.get("managed", "true")) for r in resources),
        blocked=any(is_true(r.get("blocked")) for r in resources),
        resources=tuple(r.get("id", "") for r in resources if r.get("id")),
        guest=remote.get("id") if remote is not None and inner is not None else None,
    )


def _failure(el: Element) -> Failure:
    op_key = el.get("op_key", el.get("id", ""))
    task = el.get("task", "")
    interval = _int(el.get("interval"), 0)
    suffix = f"_{task}_{interval}"
    resource = op_key[: -len(suffix)] if task and op_key.endswith(suffix) else op_key
    if resource == op_key and op_key.count("_") >= 2:
        resource = op_key.rsplit("_", 2)[0]
    return Failure(
        op_key=op_key,
        resource=resource,
        task=task,
        interval_ms=interval,
        node=el.get("node", ""),
        exitcode=_int(el.get("exitcode"), -1),
        exitstatus=el.get("exitstatus", ""),
        exit_reason=el.get("exitreason", ""),
        call_id=el.get("call", ""),
        last_rc_change=el.get("last-rc-change", ""),
    )


def cluster_status(mon: Element) -> ClusterStatus:
    """The state in ``crm_mon --output-as=xml`` (see :func:`parse_crm_mon`)."""
    dc_el = mon.find("summary/current_dc")
    dc = None
    quorum = False
    if dc_el is not None and is_true(dc_el.get("present")):
        dc = dc_el.get("name")
        quorum = is_true(dc_el.get("with_quorum"))
    node_list = tuple(
        NodeStatus(
            name=el.get("name", ""),
            id=el.get("id", ""),
            kind=el.get("type", "member"),
            online=is_true(el.get("online")),
            standby=is_true(el.get("standby")),
            maintenance=is_true(el.get("maintenance")),
            pending=is_true(el.get("pending")),
            unclean=is_true(el.get("unclean")),
            shutdown=is_true(el.get("shutdown")),
            is_dc=is_true(el.get("is_dc")),
        )
        for el in mon.findall("nodes/node")
    )
    replicas = tuple(
        _replica(bundle_el, replica_el)
        for bundle_el in mon.iterfind("resources//bundle")
        for replica_el in bundle_el.findall("replica")
    )
    failures = tuple(_failure(el) for el in mon.findall("failures/failure"))
    return ClusterStatus(
        have_quorum=quorum, dc=dc, nodes=node_list, replicas=replicas, failures=failures
    )


def clone_instances(mon: Element, clone_id: str) -> dict[str, str]:
    """Node -> role of each active instance of a clone, from ``crm_mon --output-as=xml``."""
    found: dict[str, str] = {}
    clones = (c for c in mon.iterfind("resources/clone") if c.get("id") == clone_id)
    for res in (r for c in clones for r in c.iterfind("resource")):
        for node in res.iterfind("node"):
            if res.get("active") == "true":
                found[node.get("name", "")] = _role(res.get("role"))
    return found
