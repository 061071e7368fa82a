"""``pcmkimg metrics``: the state in Prometheus' text exposition format (version 0.0.4); pure.

:func:`families` turns the ``status`` document (:func:`pcmkimg.core.statusdoc.rows`, schema
``pcmkimg-status/1``), the update lease and the journal's last updates into metric families;
:func:`render` writes them out. Names, units and suffixes follow Prometheus' naming conventions
(``_info`` for info metrics of value 1, ``_timestamp_seconds`` for a time, no ``_total``: no
metric here is a counter); the labels are few and bounded (service, bundle, node, the image
behind the floating name, one of :data:`RESULTS`), never a run id or a time.

A node whose store could not be read has ``pcmkimg_node_up{node=...} 0`` and no other metric
of its own.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from pcmkimg.records import dataclass, field

PREFIX = "pcmkimg_"
FILE_NAME = "pcmkimg.prom"
"""The file ``--textfile DIR`` writes (node_exporter's textfile collector reads ``*.prom``)."""

RESULTS = ("ok", "failed", "rolled-back", "rollback-failed", "unfinished")
"""What the last update of a service came to (``pcmkimg_last_update_result``):
``ok`` (its ``done`` line), ``rolled-back`` (it failed on a node that was rolled back),
``rollback-failed`` (the rollback failed too), ``failed`` (any other end: ``aborted``),
``unfinished`` (no end line: it runs now, or was killed)."""

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")
_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")
_TYPES = ("gauge", "counter", "untyped")

Labels = tuple[tuple[str, str], ...]


@dataclass
class Family:
    """One metric: its name, HELP text, TYPE, and samples (labels -> value)."""

    name: str
    help: str
    type: str = "gauge"
    samples: list[tuple[Labels, float]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not _NAME.match(self.name) or self.name.startswith("__"):
            raise ValueError(f"not a metric name: {self.name!r}")
        if self.type not in _TYPES:
            raise ValueError(f"not a metric type: {self.type!r}")
        if self.type == "counter" and not self.name.endswith("_total"):
            raise ValueError(f"a counter's name ends in _total: {self.name!r}")

    def add(self, value: float, **labels: str) -> None:
        for name in labels:
            if not _LABEL.match(name) or name.startswith("__"):
                raise ValueError(f"not a label name: {name!r}")
        self.samples.append((tuple(labels.items()), float(value)))


# --------------------------------------------------------------------------- the text format


def escape_label(value: str) -> str:
    """A label value as the exposition format quotes it: backslash, double quote and line
    feed escaped (``\\\\``, ``\\"``, ``\\n``); everything else as it is (UTF-8)."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def escape_help(text: str) -> str:
    """A HELP text: backslash and line feed escaped (a double quote stays)."""
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def format_value(value: float) -> str:
    """A sample value as Go's ParseFloat reads it: integers without a point, ``NaN``,
    ``+Inf``/``-Inf``, else the shortest repr."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(value)


def render(families: Iterable[Family]) -> str:
    """The exposition text: per family its HELP and TYPE lines, then one line per distinct
    label set (a repeated label set keeps its first value: Prometheus refuses duplicates).
    A family without samples is left out."""
    out: list[str] = []
    seen_names: set[str] = set()
    for fam in families:
        if fam.name in seen_names:
            raise ValueError(f"metric {fam.name} given twice")
        seen_names.add(fam.name)
        seen: set[Labels] = set()
        lines = []
        for labels, value in fam.samples:
            if labels in seen:
                continue
            seen.add(labels)
            text = ",".join(f'{k}="{escape_label(v)}"' for k, v in labels)
            lines.append(
                f"{fam.name}{{{text}}} {format_value(value)}"
                if text
                else f"{fam.name} {format_value(value)}"
            )
        if not lines:
            continue
        out.append(f"# HELP {fam.name} {escape_help(fam.help)}")
        out.append(f"# TYPE {fam.name} {fam.type}")
        out.extend(lines)
    return "".join(line + "\n" for line in out)


# --------------------------------------------------------------------------- the journal


@dataclass(frozen=True)
class LastUpdate:
    """The last update of a service in the journal: when it ended and what it came to."""

    service: str
    end: float | None
    """Unix seconds of the run's last journal line (its end; for an unfinished run, its
    latest step); None when no line of it has a readable time."""
    result: str
    """One of :data:`RESULTS`."""


def _seconds(stamp: object) -> float | None:
    """A journal time (``%Y-%m-%dT%H:%M:%S%z``) as unix seconds, None if it is not one."""
    if not isinstance(stamp, str):
        return None
    try:
        return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S%z").timestamp()
    except ValueError:
        return None


def last_updates(entries: Iterable[Mapping[str, Any]]) -> dict[str, LastUpdate]:
    """Service -> its last update run (a run with a ``start`` line), from journal entries
    oldest first (:func:`pcmkimg.adapters.journal.history`)."""
    runs: dict[str, list[Mapping[str, Any]]] = {}
    last_run: dict[str, str] = {}
    for e in entries:
        run = e.get("run")
        if not isinstance(run, str):
            continue
        if e.get("event") == "start" and isinstance(e.get("service"), str):
            last_run[e["service"]] = run
            runs[run] = []
        if run in runs:
            runs[run].append(e)
    found = {}
    for service, run in last_run.items():
        lines = runs[run]
        events = {e.get("event") for e in lines}
        if "done" in events:
            result = "ok"
        elif "aborted" not in events:
            result = "unfinished"
        elif "rollback-failed" in events:
            result = "rollback-failed"
        elif "rolled-back" in events:
            result = "rolled-back"
        else:
            result = "failed"
        times = [t for t in (_seconds(e.get("time")) for e in lines) if t is not None]
        found[service] = LastUpdate(service, times[-1] if times else None, result)
    return found


# --------------------------------------------------------------------------- the families


def _running(state: object) -> bool:
    return state not in (None, "none", "Stopped")


def families(
    doc: Mapping[str, Any],
    *,
    lease_held: bool,
    updates: Mapping[str, LastUpdate] = {},  # noqa: B006 - read only
    outdated: Mapping[str, Any] | None = None,
) -> list[Family]:
    """The metric families of a ``status`` document (``pcmkimg-status/1``), the update lease,
    the last updates and the last recorded ``outdated`` check (``pcmkimg-outdated/1`` with its
    ``checked_at``; only the document's services, in both)."""

    def fam(name: str, text: str) -> Family:
        return Family(PREFIX + name, text)

    up = fam(
        "node_up",
        "1 when pcmkimg read the node's image store, 0 when it could not "
        "(the node is offline, in standby or maintenance, or its store did not answer): "
        "its other metrics are then absent.",
    )
    service_info = fam(
        "service_info",
        "A bundle behind a floating name (always 1): its "
        "service, bundle id, floating name and guard (wired, partial or none).",
    )
    image_info = fam(
        "image_info",
        "The image behind the floating name on the node (always 1): "
        "its real names (comma-separated), digest and short image ID.",
    )
    resolves = fam(
        "floating_name_resolves",
        "1 when the floating name names an image in the "
        "node's store, else 0 (a replica started there would try to pull it).",
    )
    can_run = fam(
        "bundle_can_run",
        "1 when the bundle may run on the node, 0 when a location constraint keeps it off.",
    )
    drift = fam(
        "drift",
        "1 when the node's replica runs another image than the floating name "
        "names there (a restart would change its image), else 0.",
    )
    active = fam("replica_active", "1 when the bundle's replica is active on the node, else 0.")
    guard = fam(
        "guard_running",
        "1 when the bundle's guard (ocf:pcmkimg:floating-image) runs "
        "on the node, else 0 (also when the bundle has no guard).",
    )
    failed = fam(
        "replica_failed_operations",
        "Failed operations of the bundle's replica "
        "resources and guard recorded on the node (degraded monitors excluded); "
        "0 after a cleanup.",
    )
    lease = fam(
        "update_lease_held",
        "1 when the update lease (the ticket state "
        "pcmkimg-lease) is held or holds a value pcmkimg can't read, else 0.",
    )
    ended = fam(
        "last_update_end_timestamp_seconds",
        "When the last pcmkimg update of the "
        "service ended (its last journal line on this node), in unix seconds.",
    )
    result = fam(
        "last_update_result",
        "What the last pcmkimg update of the service in this "
        "node's journal came to: 1 for its result, 0 for the others (ok, failed, "
        "rolled-back, rollback-failed, unfinished).",
    )

    image_outdated = fam(
        "image_outdated",
        "1 when the registry now serves another image under the name the node runs "
        "behind the floating name (an update is available), 0 when it serves the node's; "
        "absent when unknown (from the last pcmkimg outdated --record).",
    )
    checked = fam(
        "outdated_check_timestamp_seconds",
        "When the last pcmkimg outdated --record ran, in unix seconds.",
    )
    complete = fam(
        "outdated_check_complete",
        "1 when every registry answered the last pcmkimg outdated --record, else 0.",
    )

    unread: dict[str, bool] = {}
    services: list[str] = []
    for s in doc.get("services", ()):
        service, bundle = s["service"], s["bundle"]
        services.append(service)
        service_info.add(
            1, service=service, bundle=bundle, floating=s["floating"], guard=s["guard"]
        )
        for n in s["nodes"]:
            node = n["node"]
            if not n["reachable"]:
                unread[node] = True
                continue
            unread.setdefault(node, False)
            where = {"service": service, "bundle": bundle, "node": node}
            f = n["floating"]
            if f is not None:
                image_info.add(
                    1,
                    **where,
                    image=",".join(sorted(f["names"])),
                    digest=f["digest"] or "",
                    image_id=f["short_id"],
                )
            resolves.add(f is not None, **where)
            can_run.add(bool(n["can_run"]), **where)
            drift.add(bool(n["drift"]), **where)
            active.add(n["role"] != "Stopped", **where)
            guard.add(_running(n["guard"]), **where)
            failed.add(sum(1 for x in n["failures"] if not x["degraded"]), **where)
    for node in sorted(unread):
        up.add(0 if unread[node] else 1, node=node)
    lease.add(1 if lease_held else 0)
    for service in sorted(set(services)):
        last = updates.get(service)
        if last is None:
            continue
        if last.end is not None:
            ended.add(last.end, service=service)
        for r in RESULTS:
            result.add(1 if r == last.result else 0, service=service, result=r)
    if outdated is not None:
        known = {(s["service"], s["bundle"]) for s in doc.get("services", ())}
        for s in outdated.get("services", ()):
            if (s.get("service"), s.get("bundle")) not in known:
                continue
            for n in s.get("nodes", ()):
                state = n.get("state")
                if state in ("current", "outdated"):
                    where = {"service": s["service"], "bundle": s["bundle"], "node": n["node"]}
                    image_outdated.add(state == "outdated", **where)
        at = outdated.get("checked_at")
        if isinstance(at, (int, float)) and not isinstance(at, bool):
            checked.add(at)
        complete.add(bool(outdated.get("complete")))
    return [
        up,
        lease,
        service_info,
        image_info,
        resolves,
        can_run,
        drift,
        active,
        guard,
        failed,
        ended,
        result,
        image_outdated,
        checked,
        complete,
    ]


def text(
    doc: Mapping[str, Any],
    *,
    lease_held: bool,
    updates: Mapping[str, LastUpdate] = {},  # noqa: B006
    outdated: Mapping[str, Any] | None = None,
) -> str:
    """:func:`render` of :func:`families`."""
    return render(families(doc, lease_held=lease_held, updates=updates, outdated=outdated))
