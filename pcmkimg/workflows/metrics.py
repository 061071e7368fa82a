"""``pcmkimg metrics [--textfile DIR]``: the state in Prometheus' text format.

The state is ``status``'s, read the same way (:func:`pcmkimg.workflows.survey.survey`: one
read of the cluster, the nodes' stores through read-only views), plus the update lease, the
journal's last update per service and the last recorded ``outdated`` check;
:mod:`pcmkimg.core.metrics` renders it. With ``textfile`` the text replaces
``DIR/pcmkimg.prom`` atomically (node_exporter's textfile collector), else the caller prints it.
"""

from __future__ import annotations

from pathlib import Path

from pcmkimg.adapters import journal, textfile
from pcmkimg.core import lease, outdated, plan
from pcmkimg.core import metrics as M
from pcmkimg.core.statusdoc import rows
from pcmkimg.core.survey import Gathered
from pcmkimg.records import dataclass
from pcmkimg.workflows.context import Context
from pcmkimg.workflows.survey import survey


@dataclass(frozen=True)
class MetricsRequest:
    """``pcmkimg metrics [--textfile DIR]``."""

    textfile: Path | None = None


@dataclass
class MetricsReport:
    """The exposition text, and the file it was written to (None: for stdout)."""

    text: str
    path: Path | None = None


def _lease_held(cluster: plan.Cluster) -> bool:
    """Held, or a value pcmkimg can't read (which every command takes as held)."""
    try:
        return lease.read(cluster.config) is not None
    except lease.LeaseUnreadableError:
        return True


def exposition(ctx: Context, gathered: Gathered) -> str:
    """The text of what ``status`` gathered, the lease, this node's journal and the last
    recorded ``outdated`` check."""
    updates = M.last_updates(journal.history(ctx.journal_dir))
    recorded = journal.read_state(ctx.journal_dir, outdated.RECORD_FILE)
    return M.text(
        rows(gathered),
        lease_held=_lease_held(gathered.cluster),
        updates=updates,
        outdated=recorded,
    )


def run(ctx: Context, req: MetricsRequest) -> MetricsReport:
    """Read as ``status`` does, render, and write the textfile when asked."""
    if req.textfile is not None:
        textfile.check_dir(req.textfile)  # before the cluster is read: bad input is exit 2
    text = exposition(ctx, survey(ctx))
    if req.textfile is None:
        return MetricsReport(text)
    return MetricsReport(text, textfile.write_atomic(req.textfile, M.FILE_NAME, text))
