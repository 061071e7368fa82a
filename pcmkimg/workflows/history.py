"""``pcmkimg history``: the update journal, oldest first."""

from __future__ import annotations

from typing import Any

from pcmkimg.adapters import journal
from pcmkimg.records import dataclass, field
from pcmkimg.workflows.context import Context


@dataclass(frozen=True)
class HistoryRequest:
    """``pcmkimg history [SERVICE] [--limit N]``."""

    service: str | None = None
    limit: int = 50


@dataclass
class HistoryReport:
    """The last ``limit`` journal entries (of the service), oldest first."""

    entries: list[dict[str, Any]] = field(default_factory=list)

    def lines(self) -> list[str]:
        """One line per entry: time, run id, event, then the other fields sorted by name (as
        stored: the caller makes them printable)."""
        lines = []
        for e in self.entries:
            rest = {k: v for k, v in e.items() if k not in ("time", "run", "event")}
            detail = " ".join(f"{k}={v}" for k, v in sorted(rest.items()))
            lines.append(f"{e.get('time')} {e.get('run')} {e.get('event')} {detail}")
        return lines


def run(ctx: Context, req: HistoryRequest) -> HistoryReport:
    """Read the journal under ``ctx.journal_dir`` (torn or corrupted lines are skipped)."""
    return HistoryReport(list(journal.history(ctx.journal_dir, req.service))[-req.limit :])
