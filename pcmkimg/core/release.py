"""A release: several services moved to new images together, node by node (pure).

The release file (``pcmkimg update --images FILE``) has one service per line::

    # service = image reference [digest]
    galera   = registry.example.com:8787/rhosp17/openstack-mariadb:17.1.3
    rabbitmq = registry.example.com:8787/rhosp17/openstack-rabbitmq:17.1.3 sha256:0f3c...

Blank lines and lines starting with ``#`` are skipped; the same lines are accepted on the
command line as ``SERVICE=REF`` arguments. Every line is checked before anything happens: a
malformed reference, a service named twice, a floating or rollback name as the image, or a
digest that contradicts the reference's own is bad input (naming the service).

:func:`plan_release` orders the nodes (as a single-service update does, over every bundle of the
release: nodes with active replicas first, those that host a promoted instance last, nodes
without a replica last; among the nodes hosting promoted instances, the order that moves
promotions the fewest times: :func:`order_promoted`) and, on each node, the services: a bundle
ordered after another one of the release (an ``rsc_order`` between them) comes after it. The
node's replicas restart together, and Pacemaker restarts them in that order, each once.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Mapping, Sequence

from pcmkimg.core import cib, naming, plan
from pcmkimg.core.errors import (
    InvalidReference,
    NodeNotReady,
    ReleaseFileError,
    UnknownNode,
)
from pcmkimg.core.reference import (
    Reference,
    parse,
)
from pcmkimg.records import dataclass, field


@dataclass(frozen=True)
class Entry:
    """One service of a release: the image it moves to (and the digest it must have)."""

    service: str
    image: Reference
    digest: str | None = None
    where: str = ""
    """Where it was read (``FILE:LINE`` or ``argument N``), for messages."""


def parse_line(text: str, where: str) -> Entry | None:
    """One line of a release file (None for a blank or comment line)."""
    line = text.strip()
    if not line or line.startswith("#"):
        return None
    service, sep, rest = line.partition("=")
    service = service.strip()
    words = rest.split()
    if not sep or not service or not 1 <= len(words) <= 2:
        raise ReleaseFileError(
            f"{where}: {text.strip()!r} is not 'SERVICE = IMAGE [DIGEST]'",
            "write one service per line, e.g. galera = REGISTRY/NS/IMAGE:TAG",
        )
    try:
        image = parse(words[0])
        digest = words[1] if len(words) == 2 else None
        if digest is not None:
            parse(f"x@{digest}")
    except InvalidReference as exc:
        raise ReleaseFileError(f"{where}: service {service}: {exc.message}", exc.fix) from exc
    if digest is not None and image.digest is not None and image.digest != digest:
        raise ReleaseFileError(
            f"{where}: service {service}: {words[0]} is pinned to {image.digest}, the line asks "
            f"for {digest}",
            "give one digest, or the same digest in both",
        )
    return Entry(service, image, digest, where)


def parse_release(lines: Sequence[tuple[str, str]], scheme: naming.Scheme) -> list[Entry]:
    """The entries of a release, from (text, where) pairs; every line checked, every service
    once, no floating or rollback name as an image."""
    entries: list[Entry] = []
    seen: dict[str, str] = {}
    for text, where in lines:
        entry = parse_line(text, where)
        if entry is None:
            continue
        if entry.service in seen:
            raise ReleaseFileError(
                f"{where}: service {entry.service} is named twice (also at {seen[entry.service]})",
                "name each service once",
            )
        if naming.classify(entry.image, scheme) is not None:
            raise ReleaseFileError(
                f"{where}: service {entry.service}: {entry.image} is a floating or rollback "
                "name, not a real image",
                "give the registry reference of the image to run",
            )
        seen[entry.service] = where
        entries.append(entry)
    if not entries:
        raise ReleaseFileError("the release names no service", "give SERVICE=REF, or --images FILE")
    return entries


@dataclass(frozen=True)
class Item:
    """One service of a planned release: its bundle and its image."""

    bundle: plan.BundleRef
    entry: Entry


@dataclass(frozen=True)
class NodeTurn:
    """One node's turn: the services whose bundle may run there, in restart order."""

    node: str
    services: tuple[str, ...]
    restart: tuple[str, ...] = ()
    """Those of them with an active replica here (the others are retagged only)."""
    promoted: tuple[str, ...] = ()
    """Those whose promoted instance runs here (it is restarted: the promotion moves)."""


@dataclass(frozen=True)
class PromotionMove:
    """A promoted instance that a node's turn restarts: its promotion moves off ``node`` to
    another replica of the bundle. ``again``: the nodes restarted after it that run a
    replica of the bundle, where Pacemaker may put the promotion and so move it again."""

    service: str
    node: str
    again: tuple[str, ...] = ()

    @property
    def worst(self) -> int:
        """The most times this promotion may move during the release."""
        return 1 + len(self.again)

    def as_dict(self) -> dict[str, object]:
        return {"service": self.service, "node": self.node, "may_move_again_on": list(self.again)}

    def text(self) -> str:
        later = f", and may move again on {', '.join(self.again)}" if self.again else ""
        return f"{self.service}'s promotion moves off {self.node}{later}"


def promotion_moves(
    order: Sequence[str],
    active: Mapping[str, Collection[str]],
    promoted: Mapping[str, Collection[str]],
) -> list[PromotionMove]:
    """The promotions that the turns of ``order`` move: a service promoted on a node (of
    ``promoted``: service -> nodes) whose replica restarts in its turn moves off it, and may
    move again on each later node of ``order`` where the service has an active replica
    (``active``: service -> nodes)."""
    moves = []
    for i, node in enumerate(order):
        for service, nodes in promoted.items():
            if node in nodes:
                later = tuple(n for n in order[i + 1 :] if n in active.get(service, ()))
                moves.append(PromotionMove(service, node, later))
    return moves


MAX_PERMUTED = 6
"""The most nodes with promoted instances whose order is searched (6! = 720 orders); beyond
that they keep their order by name."""


def order_promoted(
    nodes: Sequence[str],
    active: Mapping[str, Collection[str]],
    promoted: Mapping[str, Collection[str]],
) -> list[str]:
    """``nodes`` (those that host promoted instances, restarted last: the nodes restarted
    before them are already updated) in the order that moves promotions the fewest times in
    the worst case (:func:`promotion_moves`): a promotion restarted away from a node should
    land on a node already updated, not on one restarted after it. Among equal orders, the
    given one (the first in the order of ``nodes``)."""
    if len(nodes) > MAX_PERMUTED:
        return list(nodes)
    best = list(nodes)
    cost = sum(m.worst for m in promotion_moves(best, active, promoted))
    for candidate in itertools.permutations(nodes):
        worst = sum(m.worst for m in promotion_moves(candidate, active, promoted))
        if worst < cost:
            best, cost = list(candidate), worst
    return best


@dataclass(frozen=True)
class ReleasePlan:
    items: tuple[Item, ...]
    turns: tuple[NodeTurn, ...]
    restart: bool = True
    pulls: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """node -> the distinct references pulled there (each once)."""
    promotions: tuple[PromotionMove, ...] = ()
    """The promotions the release moves, in the order of the turns."""

    @property
    def targets(self) -> tuple[str, ...]:
        return tuple(t.node for t in self.turns)

    def item(self, service: str) -> Item:
        return next(i for i in self.items if i.bundle.service == service)

    def lines(self) -> list[str]:
        out = [
            "release: " + ", ".join(f"{i.bundle.service} -> {i.entry.image}" for i in self.items)
        ]
        out.append(" 1. take the cluster-wide update lease")
        out.append(
            " 2. check every bundle: quorum, target nodes online, other replicas healthy, no "
            "leftover ban, nothing Pacemaker would not carry out"
        )
        pulls = "; ".join(f"{n}: {', '.join(refs)}" for n, refs in self.pulls.items())
        out.append(f" 3. pull, each reference once per node, before any restart: {pulls}")
        for n, turn in enumerate(self.turns, 4):
            how = []
            for service in turn.services:
                if service in turn.restart and self.restart:
                    move = self.promotion(service, turn.node)
                    role = f" (promoted: {move.text()})" if move else ""
                    how.append(f"{service} retag+restart{role}")
                else:
                    how.append(f"{service} retag only")
            out.append(
                f"{n:>2}. {turn.node}: retag every service, then restart its replicas in order, "
                f"unless already on the new image: {'; '.join(how)}; roll back the node's "
                "services on failure"
            )
        out.append(f"{len(self.turns) + 4:>2}. release the update lease")
        if self.restart:
            moved = "; ".join(m.text() for m in self.promotions) or "none"
            out.append(f"promotions that move (unless the replica already runs its image): {moved}")
        return out

    def promotion(self, service: str, node: str) -> PromotionMove | None:
        return next((m for m in self.promotions if (m.service, m.node) == (service, node)), None)


def restart_order(
    services: Sequence[str], bundles: Mapping[str, str], config: cib.Element
) -> list[str]:
    """``services`` (by name; ``bundles``: service -> bundle id) so that a bundle ordered after
    another of them (an ``rsc_order`` first -> then, both of them) comes after it; otherwise
    in the given order. A cycle keeps the given order for the services in it."""
    ids = {bundles[s]: s for s in services}
    after: dict[str, set[str]] = {s: set() for s in services}
    for order in cib.order_constraints(config):
        first, then = ids.get(order.first), ids.get(order.then)
        if first and then and first != then:
            after[then].add(first)
    done: list[str] = []
    pending = list(services)
    while pending:
        ready = [s for s in pending if after[s] <= set(done)] or pending[:1]
        done.append(ready[0])
        pending.remove(ready[0])
    return done


def plan_release(
    cluster: plan.Cluster,
    entries: Sequence[Entry],
    nodes: Sequence[str] | None,
    scheme: naming.Scheme,
    *,
    restart: bool = True,
) -> ReleasePlan:
    """The release's plan on ``nodes`` (None: every node that can run one of its bundles).

    Raises :class:`~pcmkimg.core.errors.UnknownService` for a service that no bundle runs
    behind a floating name, :class:`~pcmkimg.core.errors.UnknownNode` /
    :class:`~pcmkimg.core.errors.NodeNotReady` for the nodes (every problem at once)."""
    items = tuple(Item(plan.find_bundle(cluster, e.service, scheme), e) for e in entries)
    bundles = {i.bundle.service: i.bundle.id for i in items}
    configs = [cib.bundle(cluster.config, i.bundle.id) for i in items]
    facts = plan.node_facts_of(cluster, configs)
    by_node: dict[str, dict[str, plan.NodeFacts]] = {}
    for item in items:
        for fact in facts[item.bundle.id]:
            by_node.setdefault(fact.name, {})[item.bundle.service] = fact
    if nodes is None:
        chosen = [n for n, per in by_node.items() if any(f.can_run for f in per.values())]
    else:
        chosen = list(dict.fromkeys(nodes))
    problems = []
    for name in chosen:
        per = by_node.get(name)
        if per is None:
            problems.append(f"{name!r} is not a cluster node")
        elif not any(f.can_run for f in per.values()):
            problems.append(f"no bundle of the release can run on {name}")
    if problems:
        known = ", ".join(sorted(by_node)) or "none"
        raise UnknownNode("; ".join(problems), f"cluster nodes: {known}")
    not_ready = [f for n in chosen for f in list(by_node[n].values())[:1] if not f.ready]
    if not_ready:
        raise NodeNotReady(
            "; ".join(f"{f.name} is {f.why_not_ready or 'not ready'}" for f in not_ready),
            "bring the node online and out of standby/maintenance, or leave it out",
        )
    if not chosen:
        raise UnknownNode("no node can run a bundle of the release", "check the bundles")

    def rank(node: str) -> tuple[int, str]:
        per = by_node[node].values()
        if any(f.active for f in per):
            return (1 if any(f.promoted for f in per) else 0, node)
        return (2 if any(f.failed_start for f in per) else 3, node)

    order = sorted(chosen, key=rank)
    services = [i.bundle.service for i in items]
    facts_of = [(n, s, by_node[n].get(s)) for n in order for s in services]
    active = {s: {n for n, t, f in facts_of if t == s and f and f.active} for s in services}
    promoted = {s: {n for n, t, f in facts_of if t == s and f and f.promoted} for s in services}
    last = [n for n in order if rank(n)[0] == 1]
    if last:
        at = order.index(last[0])
        order[at : at + len(last)] = order_promoted(last, active, promoted)
    turns = []
    pulls: dict[str, tuple[str, ...]] = {}
    for node in order:
        per = by_node[node]
        here = [i.bundle.service for i in items if per[i.bundle.service].can_run]
        ordered = restart_order(here, bundles, cluster.config)
        turns.append(
            NodeTurn(
                node,
                tuple(ordered),
                tuple(s for s in ordered if per[s].active or per[s].failed_start),
                tuple(s for s in ordered if per[s].promoted),
            )
        )
        refs = [str(i.entry.image) for i in items if i.bundle.service in here]
        pulls[node] = tuple(dict.fromkeys(refs))
    moves = promotion_moves(order, active, promoted)
    return ReleasePlan(items, tuple(turns), restart, pulls, tuple(moves))


def of_update(the_plan: plan.Plan) -> ReleasePlan:
    """A single service's update plan as what runs it: the release of that one service, its
    node steps in the order of the plan's ``update`` steps, its pull on the pull step's
    nodes (what ``--dry-run`` prints is what runs)."""
    bundle = the_plan.bundle
    ref = the_plan.ref or parse(the_plan.image)
    service = (bundle.service,)
    turns = tuple(
        NodeTurn(step.nodes[0], service, service if step.restart else ())
        for step in the_plan.steps
        if step.kind == "update"
    )
    pulled = next((step.nodes for step in the_plan.steps if step.kind == "pull"), ())
    item = Item(bundle, Entry(bundle.service, ref, the_plan.digest))
    return ReleasePlan((item,), turns, the_plan.restart, {n: (str(ref),) for n in pulled})
