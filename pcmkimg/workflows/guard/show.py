"""``pcmkimg guard show BUNDLE``: what is wired (read-only)."""

from __future__ import annotations

from pcmkimg.core import cib
from pcmkimg.core import commands as cmd
from pcmkimg.records import dataclass
from pcmkimg.workflows.context import Context


@dataclass(frozen=True)
class ShowRequest:
    """``pcmkimg guard show BUNDLE``."""

    bundle: str


@dataclass
class ShowReport:
    """The bundle as the CIB has it: its guard (or none), the constraints, interleave."""

    bundle: cib.Bundle

    def as_dict(self) -> dict[str, object]:
        b = self.bundle
        doc: dict[str, object] = {
            "bundle": b.id,
            "interleave": b.interleave,
            "wired": b.guard_wired,
        }
        doc["guard"] = None if b.guard is None else dict(b.guard.__dict__)
        return doc

    def lines(self) -> list[str]:
        b, g = self.bundle, self.bundle.guard
        if g is None:
            return [f"{b.id}: no guard ({cmd.shown(cmd.guard_add(b.id))})"]
        return [
            f"{b.id}: guard {'wired' if b.guard_wired else 'PARTLY wired'}",
            f"  clone {g.clone_id} (interleave={str(g.clone_interleave).lower()}) of "
            f"{g.primitive_id} image={g.image}",
            f"  order {g.order_id or 'MISSING'}; colocation {g.colocation_id or 'MISSING'}; "
            f"bundle interleave={str(b.interleave).lower()}",
        ]


def run(ctx: Context, req: ShowRequest) -> ShowReport:
    """Read the bundle's guard from the CIB."""
    return ShowReport(cib.bundle(ctx.cluster.query_cib(), req.bundle))
