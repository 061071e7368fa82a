"""``pcmkimg check``: every problem that would make an update unsafe.

One read of the cluster and of the nodes' stores (:func:`pcmkimg.workflows.survey.survey`),
judged by :func:`pcmkimg.core.problems.problems`.
"""

from __future__ import annotations

from pcmkimg.core.problems import Problem, problems
from pcmkimg.records import dataclass
from pcmkimg.workflows.context import Context
from pcmkimg.workflows.survey import survey


@dataclass(frozen=True)
class CheckRequest:
    """``pcmkimg check``."""


@dataclass
class CheckReport:
    """What ``check`` found: every problem (none: an update may go ahead)."""

    problems: list[Problem]

    def as_dict(self) -> dict[str, object]:
        return {"ok": not self.problems, "problems": [p.__dict__ for p in self.problems]}


def run(ctx: Context, req: CheckRequest) -> CheckReport:
    """The problems of every bundle behind a floating name, and of the cluster."""
    return CheckReport(problems(survey(ctx)))
