"""The ``status`` document (schema ``pcmkimg-status/1``, :file:`pcmkimg/status_schema.json`)
of what :mod:`pcmkimg.core.survey` gathered, and its table for a person; pure."""

from __future__ import annotations

from pcmkimg.core import cib
from pcmkimg.core.images import Resolved
from pcmkimg.core.survey import Gathered, guard_ids, real_names, running_container

SCHEMA_ID = "pcmkimg-status/1"


def _image(resolved: Resolved | None) -> dict[str, object] | None:
    if resolved is None:
        return None
    return {
        "image_id": resolved.id,
        "short_id": resolved.id[:12],
        "names": real_names(resolved),
        "digest": resolved.digest,
        "created": resolved.created.isoformat() if resolved.created else None,
    }


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
        failed = g.cluster.status.bundle_failures(s.bundle.id, guard_ids(s))
        node_rows = []
        for fact in s.nodes:
            view = g.views[(s.bundle.id, fact.name)]
            replica = containers.get(fact.name)
            running = running_container(view, replica)
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
