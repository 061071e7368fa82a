"""``pcmkimg status [SERVICE...]``: what runs behind each floating name on each node.

One read of the cluster and of the nodes' stores (:func:`pcmkimg.workflows.survey.survey`),
then the document of :mod:`pcmkimg.core.statusdoc`.
"""

from __future__ import annotations

from pcmkimg.core.statusdoc import rows, table
from pcmkimg.records import dataclass
from pcmkimg.workflows.context import Context
from pcmkimg.workflows.survey import survey


@dataclass(frozen=True)
class StatusRequest:
    """``pcmkimg status [SERVICE...]``."""

    services: tuple[str, ...] = ()


@dataclass
class StatusReport:
    """What ``status`` found: the document of :data:`pcmkimg.core.statusdoc.SCHEMA_ID`, and
    its table."""

    doc: dict[str, object]

    def lines(self) -> list[str]:
        return table(self.doc)


def run(ctx: Context, req: StatusRequest) -> StatusReport:
    """The status document of the services asked (all by default)."""
    return StatusReport(rows(survey(ctx, req.services)))
