"""``pcmkimg status`` and ``pcmkimg check``: what runs where, and what would stop an update.

``gather`` does the I/O (one CIB read, one crm_mon, the node stores in parallel); ``rows``
and ``problems`` are pure functions of what it gathered.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from pcmkimg.adapters import podman as images
from pcmkimg.adapters import storeview
from pcmkimg.core import cib, lease, naming, plan, restart
from pcmkimg.core import commands as cmd
from pcmkimg.core.errors import UnknownService
from pcmkimg.core.plan import Cluster, node_facts_of
from pcmkimg.errors import PcmkimgError
from pcmkimg.records import dataclass, field
from pcmkimg.workflows.context import Context

SCHEMA_ID = "pcmkimg-status/1"


@dataclass(frozen=True)
class NodeView:
    """What one node's store said: the floating name, the containers, or why it can't say."""

    node: str
    resolved: images.Resolved | None = None
    containers: tuple[images.Container, ...] = ()
    error: str | None = None
    socket_down: bool = False
    """The node's local podman API socket does not answer (the guard falls back there)."""


@dataclass(frozen=True)
class Service:
    service: str
    bundle: cib.Bundle
    floating: str
    nodes: list[plan.NodeFacts]
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


def gather(
    cluster: Cluster, stores: images.Stores | storeview.StoreViews, services: list[Service]
) -> Gathered:
    """Ask every node's store about every service, in parallel: one image list and one
    container list per node, looked up in memory (not one call per service and node)."""
    out = Gathered(cluster, services)
    nodes = sorted({f.name for s in services for f in s.nodes if f.ready})

    def ask(
        store: images.Store | storeview.StoreView,
    ) -> tuple[dict[str, images.Resolution], tuple]:  # type: ignore[type-arg]
        named = {name: image for image in store.named_images() for name in image.names}
        resolved: dict[str, images.Resolution] = {}
        for s in services:
            image = named.get(s.floating)
            if image is not None:
                resolved[s.floating] = images.Resolved(store.node, s.floating, image)
            elif s.qualified:
                resolved[s.floating] = images.Unresolved(store.node, s.floating)
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
                down = isinstance(answer, images.SocketDown)
                out.views[key] = NodeView(fact.name, error=msg, socket_down=down)
            else:
                resolved, containers = answer
                found = resolved[service.floating]
                out.views[key] = NodeView(
                    fact.name,
                    found if isinstance(found, images.Resolved) else None,
                    tuple(containers),
                )
    return out


#: naming.is_scheme_name, once per distinct name: the same names recur on every node.
_is_scheme_name = functools.lru_cache(maxsize=65536)(naming.is_scheme_name)


def _image(resolved: images.Resolved | None) -> dict[str, object] | None:
    if resolved is None:
        return None
    return {
        "image_id": resolved.id,
        "short_id": resolved.id[:12],
        "names": sorted(n for n in resolved.other_names if not _is_scheme_name(n)),
        "digest": resolved.digest,
        "created": resolved.created.isoformat() if resolved.created else None,
    }


def _running(view: NodeView, replica: cib.ReplicaStatus | None) -> dict[str, str] | None:
    """The replica's container as the node's store reports it, if it runs there."""
    if replica is None or not replica.active:
        return None
    for c in view.containers:
        if c.name.lstrip("/") == replica.container_id:
            return {"name": replica.container_id, "id": c.id, "image_id": c.image_id}
    return None


def _guard_ids(s: Service) -> list[str]:
    return [s.bundle.guard.primitive_id] if s.bundle.guard else []


def rows(g: Gathered) -> dict[str, object]:
    """The documented ``status --json`` document (schema ``pcmkimg-status/1``)."""
    services = []
    for s in g.services:
        guard = s.bundle.guard
        guard_state = "none" if guard is None else "wired" if s.bundle.guard_wired else "partial"
        guard_nodes = cib.clone_instances(g.cluster.mon, guard.clone_id) if guard else {}
        containers = {r.node: r for r in g.cluster.status.replicas_of(s.bundle.id) if r.node}
        # Every replica's failures, on the node where they happened: a failed start leaves
        # the replica stopped there (or running elsewhere), so "the replica on this node"
        # would miss it.
        failed = g.cluster.status.bundle_failures(s.bundle.id, _guard_ids(s))
        node_rows = []
        for fact in s.nodes:
            view = g.views[(s.bundle.id, fact.name)]
            replica = containers.get(fact.name)
            running = _running(view, replica)
            failures = [
                {
                    "operation": f.task,
                    "resource": f.resource,
                    "exitcode": f.exitcode,
                    "exitstatus": f.exitstatus,
                    "reason": f.exit_reason,
                    "degraded": f.degraded,
                }
                for host, f in failed
                if host == fact.name
            ]
            floating = _image(view.resolved)
            drift = bool(running and floating and running["image_id"] != floating["image_id"])
            node_rows.append(
                {
                    "node": fact.name,
                    "reachable": view.error is None,
                    "error": view.error,
                    "can_run": fact.can_run,
                    "floating": floating,
                    "container": running,
                    "drift": drift,
                    "role": replica.role if replica and replica.active else "Stopped",
                    "guard": guard_nodes.get(fact.name, "Stopped") if guard else "none",
                    "failures": failures,
                }
            )
        services.append(
            {
                "service": s.service,
                "bundle": s.bundle.id,
                "floating": s.floating,
                "guard": guard_state,
                "interleave": s.bundle.interleave,
                "nodes": node_rows,
            }
        )
    st = g.cluster.status
    return {
        "schema": SCHEMA_ID,
        "cluster": {"quorum": st.have_quorum, "dc": st.dc},
        "services": services,
    }


def table(doc: dict) -> list[str]:  # type: ignore[type-arg]
    """The human form of :func:`rows`."""
    lines = []
    for s in doc["services"]:
        lines.append(
            f"{s['service']}  bundle {s['bundle']}  floating {s['floating']}  guard {s['guard']}"
        )
        head = ("NODE", "ROLE", "GUARD", "IMAGE BEHIND FLOATING NAME", "ID", "RUNNING", "")
        body = []
        for n in s["nodes"]:
            f = n["floating"]
            c = n["container"]
            if not n["reachable"]:
                real, short = f"unreachable: {n['error']}", "-"
            elif f is None:
                real, short = "MISSING (a restart here would fail)", "-"
            else:
                real = ", ".join(f["names"]) or "(no other name)"
                if f["digest"]:
                    real += f" {f['digest'][:19]}"
                short = f["short_id"]
            running = c["image_id"][:12] if c else "-"
            notes = []
            if n["drift"]:
                notes.append("DRIFT: container runs another image")
            for fail in n["failures"]:
                kind = "degraded" if fail["degraded"] else "failed"
                notes.append(
                    f"{kind} {fail['operation']} of {fail['resource']}: "
                    f"{fail['reason'] or fail['exitstatus']}"
                )
            body.append((n["node"], n["role"], n["guard"], real, short, running, "; ".join(notes)))
        widths = [max(len(str(r[i])) for r in [head, *body]) for i in range(6)]
        for r in [head, *body]:
            cells = [str(r[i]).ljust(widths[i]) for i in range(6)]
            lines.append("  " + "  ".join(cells) + ("  " + r[6] if r[6] else ""))
    if not doc["services"]:
        lines.append("no bundle runs behind a floating name")
    return lines


@dataclass(frozen=True)
class Problem:
    kind: str
    message: str


def _unreachable(node: str, view: NodeView) -> Problem:
    if view.socket_down:
        return Problem(
            "podman-socket",
            f"{node}: the podman API socket does not answer: pcmkimg can't read or change this "
            "node's store, and the guard there falls back to the slower podman command; fix: "
            f"{cmd.shown(cmd.enable_podman_socket())} on {node}",
        )
    return Problem("unreachable", f"{node}: {view.error}")


def _drift(s: Service, view: NodeView, replica: cib.ReplicaStatus | None) -> list[Problem]:
    """The replica on this node runs another image than its floating name names there."""
    running = _running(view, replica)
    if running is None or view.resolved is None or running["image_id"] == view.resolved.id:
        return []
    names = sorted(n for n in view.resolved.other_names if not _is_scheme_name(n))
    image = names[0] if names else "REF"
    return [
        Problem(
            "drift",
            f"{running['name']} on {view.node} runs image {running['image_id'][:12]}, but "
            f"{s.floating} names {view.resolved.id[:12]} there: a restart would change its "
            f"image; fix: {cmd.shown(cmd.update(view.node, s.service, image))} restarts it "
            "onto that image",
        )
    ]


def _failures(g: Gathered, s: Service) -> list[Problem]:
    """Failed operations of the bundle's replicas and guard on any node (degraded monitors,
    which are successes, are left to ``status``)."""
    found = []
    guard = s.bundle.guard
    for host, f in g.cluster.status.bundle_failures(s.bundle.id, _guard_ids(s)):
        if f.degraded:
            continue
        target = guard.primitive_id if guard and f.resource == guard.primitive_id else s.bundle.id
        where = f.node if host in (None, f.node) else f"{f.node} (on {host})"
        found.append(
            Problem(
                "failed",
                f"{f.task} of {f.resource} failed on {where}: {f.exit_reason or f.exitstatus}"
                f" (rc {f.exitcode}); fix the cause, then: "
                f"{cmd.shown(cmd.cleanup(target, f.node))}",
            )
        )
    return found


def problems(g: Gathered) -> list[Problem]:
    """Everything ``check`` reports; pure."""
    found: list[Problem] = []
    config = g.cluster.config
    for s in g.services:
        if s.bundle.guard is None:
            found.append(
                Problem(
                    "no-guard",
                    f"bundle {s.bundle.id} has no guard: a node "
                    "without the floating name would try to pull it; fix: "
                    f"{cmd.shown(cmd.guard_add(s.bundle.id))}",
                )
            )
        elif not s.bundle.guard_wired:
            found.append(
                Problem(
                    "guard-incomplete",
                    f"the guard of {s.bundle.id} is only "
                    f"partly wired; fix: {cmd.shown(cmd.guard_add(s.bundle.id))}",
                )
            )
        if not s.bundle.interleave:
            found.append(
                Problem(
                    "no-interleave",
                    f"bundle {s.bundle.id} lacks interleave=true: "
                    "a guard failure on one node would restart every replica; "
                    f"fix: {cmd.shown(cmd.set_interleave(s.bundle.id))}",
                )
            )
        for fact in s.nodes:
            view = g.views[(s.bundle.id, fact.name)]
            if not fact.can_run:
                continue
            if not fact.ready:
                found.append(
                    Problem(
                        "node-not-ready",
                        f"{fact.name} is {fact.why_not_ready}: an update can't restart its replica",
                    )
                )
            elif view.error is not None:
                found.append(_unreachable(fact.name, view))
            elif view.resolved is None:
                found.append(
                    Problem(
                        "unresolved",
                        f"{s.floating} does not resolve on "
                        f"{fact.name}, where {s.bundle.id} may run; fix: "
                        f"{cmd.shown(cmd.update(fact.name, s.service))}",
                    )
                )
            else:
                found.extend(_drift(s, view, g.cluster.status.replica_on(s.bundle.id, fact.name)))
        found.extend(_failures(g, s))
    stickiness = cib.rsc_defaults(config).get("resource-stickiness", "0")
    if stickiness.strip() in ("0", "", "+0", "-0"):
        found.append(
            Problem(
                "stickiness",
                "resource-stickiness is 0: any change in the cluster can move replicas "
                "between nodes (pcmkimg's own restarts pin them; a node's failover or return "
                "does not); fix: "
                f"{cmd.shown(cmd.stickiness_infinity())}",
            )
        )
    for ban in cib.cli_constraints(config):
        found.append(
            Problem(
                "leftover-ban",
                f"leftover constraint {ban.id}; fix: "
                f"{cmd.shown(cmd.clear_ban(ban.resource, ban.node))}",
            )
        )
    pins = [(restart.pin_id(b), f"of {b}") for b in restart.pinned_bundles(config)]
    if restart.defaults_pinned(config):
        pins.append((restart.DEFAULTS_PIN, "in rsc_defaults"))
    for pid, where in pins:
        found.append(
            Problem(
                "leftover-pin",
                f"leftover pin {pid} {where} (a killed restart's; it expires with its "
                "lifetime, the next update removes it); fix: "
                f"{cmd.shown(cmd.delete_meta_set(pid))}",
            )
        )
    try:
        held = lease.read(config)
    except lease.LeaseUnreadableError as exc:
        held = None
        found.append(
            Problem("lease-unreadable", f"{exc.message}; fix: {lease.unreadable_fix(exc)}")
        )
    if held is not None:
        found.append(
            Problem(
                "lease-held",
                f"the update lease is held by pid {held.pid} on "
                f"{held.host} (renewal {held.renewals} at {held.renewed_text} by its clock; "
                f"it lapses {held.period:g}s after the last renewal)",
            )
        )
    unique: dict[tuple[str, str], Problem] = {}
    for p in found:
        unique.setdefault((p.kind, p.message), p)
    return list(unique.values())


# --------------------------------------------------------------------------- the commands


@dataclass(frozen=True)
class StatusRequest:
    """``pcmkimg status [SERVICE...]``."""

    services: tuple[str, ...] = ()


@dataclass(frozen=True)
class CheckRequest:
    """``pcmkimg check``."""


@dataclass
class StatusReport:
    """What ``status`` found: the document of :data:`SCHEMA_ID`, and its table."""

    doc: dict[str, object]

    def lines(self) -> list[str]:
        return table(self.doc)


@dataclass
class CheckReport:
    """What ``check`` found: every problem (none: an update may go ahead)."""

    problems: list[Problem]

    def as_dict(self) -> dict[str, object]:
        return {"ok": not self.problems, "problems": [p.__dict__ for p in self.problems]}


def run(ctx: Context, req: StatusRequest | CheckRequest) -> StatusReport | CheckReport:
    """One read of the cluster and of the nodes' stores (read-only views), then the status
    document or the list of problems."""
    cluster = ctx.cluster.read_cluster()
    services = req.services if isinstance(req, StatusRequest) else ()
    found = floating_bundles(cluster, ctx.scheme, services)
    with ctx.open_views() as views:
        gathered = gather(cluster, views, found)
    if isinstance(req, StatusRequest):
        return StatusReport(rows(gathered))
    return CheckReport(problems(gathered))
