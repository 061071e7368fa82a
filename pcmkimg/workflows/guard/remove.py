"""``pcmkimg guard remove BUNDLE``: undo exactly what ``guard add`` did, under the update lease
(none is taken when there is nothing to undo: the CIB does not move)."""

from __future__ import annotations

from pcmkimg.adapters import lease as leasing
from pcmkimg.core import cib
from pcmkimg.records import dataclass
from pcmkimg.workflows.context import Context


@dataclass(frozen=True)
class RemoveRequest:
    """``pcmkimg guard remove BUNDLE``."""

    bundle: str


@dataclass
class RemoveReport:
    """What ``guard remove`` changed (nothing: the bundle had no guard)."""

    bundle: str
    change: cib.CibChange

    def as_dict(self) -> dict[str, object]:
        return {"changed": not self.change.empty, "description": self.change.description}

    def lines(self) -> list[str]:
        return [self.change.description if not self.change.empty else f"{self.bundle}: no guard"]


def run(ctx: Context, req: RemoveRequest) -> RemoveReport:
    """Remove the guard of ``req.bundle``: its clone, order, colocation and interleave."""
    bundle = req.bundle
    nothing = cib.remove_guard(ctx.cluster.query_cib(), bundle)
    if nothing.empty:
        return RemoveReport(bundle, nothing)
    with leasing.held(ctx.cluster, ctx.lease_period):
        return RemoveReport(bundle, ctx.cluster.update_cib(lambda c: cib.remove_guard(c, bundle)))
