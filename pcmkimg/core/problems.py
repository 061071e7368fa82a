"""What ``check`` reports: every problem that would make an update unsafe, judged from what
:mod:`pcmkimg.core.survey` gathered and the CIB; pure."""

from __future__ import annotations

from pcmkimg.core import cib, lease, restart
from pcmkimg.core import commands as cmd
from pcmkimg.core.survey import (
    Gathered,
    NodeView,
    Service,
    guard_ids,
    real_names,
    running_container,
)
from pcmkimg.records import dataclass


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
    running = running_container(view, replica)
    if running is None or view.resolved is None or running["image_id"] == view.resolved.id:
        return []
    names = real_names(view.resolved)
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
    for host, f in g.cluster.status.bundle_failures(s.bundle.id, guard_ids(s)):
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
