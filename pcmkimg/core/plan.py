"""Update planning: a pure function from cluster facts to a list of steps.

``pcmkimg update --dry-run`` prints the plan; :mod:`pcmkimg.workflows.update` runs it. Nothing
here does I/O. Whether a node's replica restarts is decided per node when
the step runs, from the image IDs it finds there (a restart happens only when
the running container does not use the target image), so a re-run after an
interruption finishes the job and an update to the same image restarts nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Literal

from pcmkimg.core import cib, naming, restart
from pcmkimg.core import commands as cmd
from pcmkimg.core.errors import NodeNotReady, UnknownNode, UnknownService
from pcmkimg.core.reference import Reference
from pcmkimg.records import dataclass, field

Say = Callable[[str], None]
"""Where a workflow says what it does (stderr in the CLI)."""


@dataclass(frozen=True)
class BundleRef:
    """The bundle an update is about."""

    id: str
    service: str
    floating: str
    """Its floating name, as the CIB writes it."""
    containers: Sequence[str] = ()
    name: naming.FloatingName | None = None
    """The floating name parsed once, where the bundle was found."""

    @property
    def ref(self) -> Reference:
        """The floating name as a reference (parsed at most once: where the bundle was found)."""
        return self.name.ref if self.name is not None else naming.parse(self.floating)


@dataclass(frozen=True)
class NodeFacts:
    """What the planner knows of one node, from the CIB and crm_mon."""

    name: str
    ready: bool = True  # online, not standby, not maintenance
    can_run: bool = True  # not banned from the bundle by a location constraint
    active: bool = False  # a replica of the bundle runs here
    promoted: bool = False
    why_not_ready: str = ""
    failed_start: bool = False  # a start of its replica (or its guard) failed here; none runs


@dataclass(frozen=True)
class Health:
    """The replicas of a bundle that are active (replica number -> node), and how many of
    them are promoted."""

    active: Mapping[int, str]
    promoted: int


def before_node_problems(start: Health, now: Health, node: str) -> list[str]:
    """Why ``node`` may not be touched now: a replica that was active when the update started
    (other than the one on ``node``) is not active, or fewer instances are promoted."""
    problems = [
        f"replica {number} of the bundle (on {where} when the update started) is not active"
        for number, where in sorted(start.active.items())
        if where != node and number not in now.active
    ]
    if now.promoted < start.promoted:
        problems.append(
            f"{now.promoted} promoted instance(s), {start.promoted} when the update started"
        )
    return problems


def after_restart_problems(
    start: Health, now: Health, number: int, node: str, updated: Collection[str]
) -> list[str]:
    """Why the restart of replica ``number`` on ``node`` did not end well: it is not active,
    or it came back on a node that this update has not given the new image, or fewer
    instances are promoted than when the update started."""
    problems = []
    where = now.active.get(number)
    if where is None:
        problems.append(f"replica {number} is not active after its restart on {node}")
    elif where != node and where not in updated:
        problems.append(
            f"replica {number} moved from {node} to {where}, which does not have the new image"
        )
    problems += [
        f"replica {other} moved from {was} to {now.active[other]} during the restart on {node}"
        for other, was in sorted(start.active.items())
        if other != number and now.active.get(other, was) != was
    ]
    if now.promoted < start.promoted:
        problems.append(
            f"{now.promoted} promoted instance(s) after the restart on {node}, "
            f"{start.promoted} before the update"
        )
    return problems


StepKind = Literal["lease", "preflight", "pull", "update", "release"]
"""What a step does; :func:`pcmkimg.core.release.of_update` turns the steps into what runs."""


@dataclass(frozen=True)
class Step:
    kind: StepKind
    nodes: tuple[str, ...] = ()
    detail: str = ""
    restart: bool = False  # this step may restart a replica


@dataclass(frozen=True)
class Plan:
    bundle: BundleRef
    image: str
    """The image to run, as given (with the digest if any)."""
    targets: tuple[str, ...]
    """The nodes, in the order their steps run."""
    steps: tuple[Step, ...] = field(default_factory=tuple)
    ref: Reference | None = None
    """The image to run, parsed once."""
    digest: str | None = None
    restart: bool = True
    """False with ``--no-restart``: retag only."""

    def lines(self) -> list[str]:
        out = [f"update {self.bundle.service} (bundle {self.bundle.id}) to {self.image}"]
        for i, step in enumerate(self.steps, 1):
            out.append(f"{i:>2}. {step.detail}")
        return out


def match_bundle(
    bundles: Sequence[tuple[str, str]], service: str, scheme: naming.Scheme
) -> BundleRef:
    """The bundle of ``service``: by bundle id, or by the service of its floating name.

    ``bundles`` are (bundle id, image) pairs from the CIB.
    """
    matches = []
    for bundle_id, image in bundles:
        found = _classify(image, scheme)
        if found is None:
            if service == bundle_id:  # its image is a real name: never retag that
                raise UnknownService(
                    f"bundle {bundle_id} runs {image or 'no image'}, which is not a floating name",
                    f"move it to one first: pcmkimg migrate {bundle_id}",
                )
            continue
        if service in (bundle_id, found.service):
            matches.append(BundleRef(bundle_id, found.service, image, name=found))
    if len(matches) == 1:
        return matches[0]
    known = sorted(f"{b} ({i})" for b, i in bundles if _classify(i, scheme) is not None)
    if not matches:
        raise UnknownService(
            f"no bundle runs service {service!r} behind a floating name",
            "name a bundle id or a service; bundles with floating names: "
            + (", ".join(known) or "none (see pcmkimg migrate)"),
        )
    raise UnknownService(
        f"service {service!r} matches several bundles: {', '.join(m.id for m in matches)}",
        "name the bundle id instead",
    )


def _classify(image: str, scheme: naming.Scheme) -> naming.FloatingName | None:
    return naming.as_floating(image, scheme)


def order_nodes(facts: Sequence[NodeFacts]) -> list[NodeFacts]:
    """Nodes with an active replica first, the promoted replica last among them; then nodes
    where a replica's start failed (the update starts it there); nodes without a replica
    last. A new image that fails is found, and rolled back, on the first node whose replica
    restarts, before any other node was given it: a restart never moves a replica to another
    node, so no node needs the new image before its own turn."""

    def rank(f: NodeFacts) -> tuple[int, str]:
        if f.active:
            return (1 if f.promoted else 0, f.name)
        return (2 if f.failed_start else 3, f.name)

    return sorted(facts, key=rank)


def choose_nodes(
    bundle: BundleRef, facts: Sequence[NodeFacts], nodes: Sequence[str] | None
) -> list[NodeFacts]:
    """The nodes an update (or a rollback) of ``bundle`` works on: ``nodes`` (None: every node
    that can run it). Raises UnknownNode or NodeNotReady, listing every problem at once."""
    by_name = {f.name: f for f in facts}
    problems: list[str] = []
    if nodes is None:
        chosen = [f for f in facts if f.can_run]
    else:
        chosen = []
        for name in dict.fromkeys(nodes):
            fact = by_name.get(name)
            if fact is None:
                problems.append(f"{name!r} is not a cluster node")
            elif not fact.can_run:
                problems.append(f"bundle {bundle.id} can never run on {name}")
            else:
                chosen.append(fact)
    if problems:
        runnable = ", ".join(sorted(f.name for f in facts if f.can_run)) or "none"
        raise UnknownNode("; ".join(problems), f"nodes that can run {bundle.id}: {runnable}")
    not_ready = [f for f in chosen if not f.ready]
    if not_ready:
        raise NodeNotReady(
            "; ".join(f"{f.name} is {f.why_not_ready or 'not ready'}" for f in not_ready),
            "bring the node online and out of standby/maintenance, or leave it out",
        )
    if not chosen:
        raise UnknownNode(f"no node can run bundle {bundle.id}", "check its location constraints")
    return chosen


def plan_update(
    bundle: BundleRef,
    target: Reference,
    facts: Sequence[NodeFacts],
    nodes: Sequence[str] | None,
    *,
    digest: str | None = None,
    restart: bool = True,
) -> Plan:
    """The steps of an update of ``bundle`` to ``target`` on ``nodes`` (None: every node).

    Raises UnknownNode or NodeNotReady, listing every problem at once.
    """
    chosen = choose_nodes(bundle, facts, nodes)
    ordered = order_nodes(chosen)
    names = tuple(f.name for f in ordered)
    ref = str(target) + (f" (digest {digest})" if digest else "")
    steps = [
        Step("lease", detail="take the cluster-wide update lease"),
        Step(
            "preflight",
            names,
            "check: quorum, target nodes online, other replicas healthy, no leftover ban, "
            "nothing Pacemaker would not carry out (maintenance, unmanaged or disabled bundle "
            "or guard, replicas-per-host > 1) (and again before each node: every other replica "
            "active, as many promoted)",
        ),
        Step("pull", names, f"pull {ref} on {', '.join(names)} (in parallel, before any restart)"),
    ]
    for fact in ordered:
        if fact.failed_start and restart:
            how = (
                "retag, then clean up the replica's failed start here so that it starts on the "
                "new image (refused unless the floating name is missing here); roll back on "
                "failure"
            )
        elif not fact.active:
            how = "retag only: no replica runs here now, a later start uses the new image"
        elif not restart:
            how = "retag only (--no-restart)"
        else:
            role = "promoted replica, " if fact.promoted else ""
            how = (
                f"retag, then restart the {role}replica unless it already runs that image, "
                "wait until healthy; roll back on failure"
            )
        steps.append(
            Step(
                "update",
                (fact.name,),
                f"{fact.name}: {bundle.floating} -> {target}; {how}",
                restart=(fact.active or fact.failed_start) and restart,
            )
        )
    steps.append(Step("release", detail="release the update lease"))
    return Plan(bundle, str(target), names, tuple(steps), target, digest, restart)


# --------------------------------------------------------------------------- facts


@dataclass(frozen=True)
class Cluster:
    """One consistent read of the CIB and crm_mon."""

    config: cib.Element
    mon: cib.Element
    status: cib.ClusterStatus

    @property
    def members(self) -> list[str]:
        return [n.name for n in self.status.nodes if n.kind == "member"]


def find_bundle(cluster: Cluster, service: str, scheme: naming.Scheme) -> BundleRef:
    """The bundle of ``service`` in the snapshot (see :func:`match_bundle`), with its
    replicas' container resources."""
    pairs = [(b.id, b.image) for b in cib.bundles(cluster.config)]
    ref = match_bundle(pairs, service, scheme)
    containers = tuple(r.container_id for r in cluster.status.replicas_of(ref.id))
    return BundleRef(ref.id, ref.service, ref.floating, containers, ref.name)


def node_facts(cluster: Cluster, bundle_id: str) -> list[NodeFacts]:
    return node_facts_of(cluster, [cib.bundle(cluster.config, bundle_id)])[bundle_id]


def node_facts_of(cluster: Cluster, bundles: Sequence[cib.Bundle]) -> dict[str, list[NodeFacts]]:
    """:func:`node_facts` of each of ``bundles`` (bundle id -> facts), with what they share
    (the members, the bans, the failed starts) read once: linear in the bundles."""
    banned = cib.all_banned_nodes(cluster.config)
    starts = [f for f in cluster.status.real_failures if f.task == "start"]
    # Hosts only: crm_mon can list a bundle replica's implicit guest node as a member, and so
    # can the CIB's <nodes> section (attributes set on a guest node land there): a node that
    # is a replica's guest node is never a host. Pacemaker Remote nodes (an ocf:pacemaker:remote
    # connection) run bundles too; their stores are reached as pcmkimg.conf says.
    configured = cib.nodes(cluster.config)
    guests = {r.guest for r in cluster.status.replicas if r.guest}
    guests |= {n.uname for n in configured if n.kind == "guest"}
    hosts_by_kind = {
        kind: {n.uname for n in configured if n.kind == kind} - guests
        for kind in ("member", "remote")
    }
    hosts = [n for n in cluster.status.nodes if n.name in hosts_by_kind.get(n.kind, ())]
    found: dict[str, list[NodeFacts]] = {}
    for bundle in bundles:
        bundle_id, guard = bundle.id, bundle.guard
        refused = {
            f.node
            for f in starts
            if cib.is_replica_resource(bundle_id, f.resource)
            or (guard and f.resource == guard.primitive_id)
        }
        # A failed start here is healed by a start here only while a replica runs nowhere.
        spare = sum(r.active for r in cluster.status.replicas_of(bundle_id)) < bundle.replicas
        never = banned.get(bundle_id, set())
        facts = found[bundle_id] = []
        for node in hosts:
            replica = cluster.status.replica_on(bundle_id, node.name)
            why = (
                "offline"
                if not node.online
                else "in standby"
                if node.standby
                else "in maintenance"
                if node.maintenance
                else ""
            )
            facts.append(
                NodeFacts(
                    name=node.name,
                    ready=not why,
                    can_run=node.name not in never,
                    active=bool(replica and replica.active),
                    promoted=bool(replica and replica.role == "Promoted"),
                    why_not_ready=why,
                    failed_start=node.name in refused
                    and not (replica and replica.active)
                    and spare,
                )
            )
    return found


def healable(failure: cib.Failure, bundle_id: str, missing: Collection[str]) -> bool:
    """A failed start of a replica of ``bundle_id`` on a node where the floating name was
    missing: the update heals it (the retag gives the node the name, then the failure is
    cleaned up). A failure of any other cause still refuses the update."""
    return (
        failure.node in missing
        and failure.task == "start"
        and cib.is_replica_resource(bundle_id, failure.resource)
    )


def preflight_problems(
    cluster: Cluster, bundle_id: str, targets: Sequence[str], missing: Collection[str] = ()
) -> list[str]:
    """Why an update of ``bundle_id`` on ``targets`` may not start now (empty: it may).

    ``missing``: target nodes where the floating name does not resolve; a failed start of the
    bundle there is healed by the update, not a reason to refuse it.
    """
    problems = []
    if not cluster.status.have_quorum:
        problems.append("the cluster has no quorum")
    for ban in cib.cli_constraints(cluster.config):
        problems.append(
            f"leftover constraint {ban.id} ({ban.resource} on {ban.node}); clear it with "
            + cmd.quoted(cmd.clear_ban(ban.resource, ban.node))
        )
    bundle = cib.bundle(cluster.config, bundle_id)
    for problem, fix in restart.restart_blockers(cluster.config, bundle):
        problems.append(f"{problem}; {fix}")
    for replica in cluster.status.replicas_of(bundle_id):
        if replica.failed or (replica.node and not replica.active):
            problems.append(f"replica {replica.container_id} on {replica.node} is not healthy")
    for failure in cluster.status.failures_of(
        [bundle_id, *(r.container_id for r in cluster.status.replicas_of(bundle_id))]
    ):
        if not failure.degraded and not healable(failure, bundle_id, missing):
            problems.append(
                f"failed {failure.task} of {failure.resource} on {failure.node}: "
                f"{failure.exit_reason or failure.exitstatus}; clean it up first with "
                + cmd.quoted(cmd.cleanup(failure.resource, failure.node))
            )
    for name in targets:
        node = cluster.status.node(name)
        if node is None or not node.usable:
            problems.append(f"target node {name} is no longer online and active")
    return problems


def health(status: cib.ClusterStatus, bundle_id: str) -> Health:
    replicas = status.replicas_of(bundle_id)
    return Health(
        active={r.replica: r.node for r in replicas if r.active and r.node},
        promoted=sum(1 for r in replicas if r.active and r.role == "Promoted"),
    )
