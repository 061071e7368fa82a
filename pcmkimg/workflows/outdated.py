"""``pcmkimg outdated [SERVICE...]``: which nodes lag behind what the registry serves now.

It reads what ``status`` reads, the same way (:func:`pcmkimg.workflows.survey.survey`: one
read of the cluster, one image list per node, read-only), takes each node's image behind the
floating name (its real names and ``RepoDigests``), asks the registry once per distinct
reference through the registry port (skopeo, in parallel, a deadline per registry) and judges
each node (:mod:`pcmkimg.core.outdated`). It changes nothing, except with ``record``: then
every node's state is written as the transient node attribute ``pcmkimg-outdated:SERVICE``
(``crm_mon -A`` shows it), the document into the state directory (``outdated.json``, which
``pcmkimg metrics`` reads), and with ``textfile`` the metrics into ``DIR/pcmkimg.prom``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from pcmkimg.adapters import journal, textfile
from pcmkimg.core import outdated as O
from pcmkimg.core.survey import Gathered
from pcmkimg.errors import PcmkimgError, Unreachable
from pcmkimg.records import dataclass, field
from pcmkimg.workflows.context import Context
from pcmkimg.workflows.survey import survey

DEFAULT_TIMEOUT = 30.0


@dataclass(frozen=True)
class OutdatedRequest:
    """``pcmkimg outdated [SERVICE...] [--timeout S] [--record [--textfile DIR]]``."""

    services: tuple[str, ...] = ()
    timeout: float = DEFAULT_TIMEOUT
    """Seconds each registry gets for all the references asked of it."""
    record: bool = False
    textfile: Path | None = None


@dataclass
class OutdatedReport:
    """The document (schema ``pcmkimg-outdated/1``), and what recording could not do."""

    doc: dict[str, Any]
    record_errors: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        return O.lines(self.doc)

    @property
    def outdated(self) -> bool:
        return bool(self.doc["outdated"])

    @property
    def complete(self) -> bool:
        return bool(self.doc["complete"])

    @property
    def finding(self) -> str | None:
        """What the exit code says (the CLI maps it): a registry not asked comes before an
        update available; None: every node runs what its registry serves."""
        if not self.complete:
            return "registry-unasked"
        if self.outdated:
            return "outdated"
        return None


class RecordFailed(Unreachable):
    """The check ran, but its result could not be recorded everywhere."""


def _images(g: Gathered) -> list[O.ServiceImages]:
    found = []
    for s in g.services:
        nodes = []
        for fact in s.nodes:
            view = g.views[(s.bundle.id, fact.name)]
            r = view.resolved
            if view.error is not None:
                nodes.append(O.NodeImage(fact.name, error=view.error))
            elif r is None:
                nodes.append(O.NodeImage(fact.name))
            else:
                names = O.real_names(r.other_names)
                nodes.append(O.NodeImage(fact.name, names, tuple(r.repo_digests), r.id))
        found.append(O.ServiceImages(s.service, s.bundle.id, s.floating, tuple(nodes)))
    return found


def _record(ctx: Context, req: OutdatedRequest, g: Gathered, doc: dict) -> list[str]:  # type: ignore[type-arg]
    """The attributes, the state file and the textfile; what failed, one line each."""
    errors = []
    for node, service, state in O.node_states(doc):
        if state == "unreachable":
            continue  # its store was not read: the node may be down, its attribute with it
        try:
            ctx.cluster.set_node_attribute(node, O.attribute_name(service), state)
        except PcmkimgError as exc:
            errors.append(f"{node}: attribute {O.attribute_name(service)}: {exc.one_line()}")
    journal.write_state(ctx.journal_dir, O.RECORD_FILE, {**doc, "checked_at": time.time()})
    if req.textfile is not None:
        from pcmkimg.workflows import metrics

        text = metrics.exposition(ctx, g)
        textfile.write_atomic(req.textfile, metrics.M.FILE_NAME, text)
    return errors


def run(ctx: Context, req: OutdatedRequest) -> OutdatedReport:
    """Gather, ask the registries, judge; record when asked."""
    if req.textfile is not None:
        textfile.check_dir(req.textfile)  # before anything is read: bad input is exit 2
    if req.record:
        journal.ensure_dir(ctx.journal_dir)
    gathered = survey(ctx, req.services)
    services = _images(gathered)
    refs = O.references(n for s in services for n in s.nodes)
    answers = ctx.open_registry().served(refs, req.timeout) if refs else {}
    doc = O.document(services, answers)
    report = OutdatedReport(doc)
    if req.record:
        report.record_errors = _record(ctx, req, gathered, doc)
    return report
