"""``PCMKIMG_TRACE=1``: a line on stderr for each Pacemaker tool call and each step of a restart's
watch, with the wall-clock time (UTC, microseconds: to line up against the DC's
``/var/log/pacemaker/pacemaker.log``), the monotonic time, the call's duration and the thread
(the lease's renewals run in their own). Off (the default), nothing is formatted or written.

A line: ``pcmkimg-trace 2026-12-02T01:52:11.123456Z mono=1234.567 MainThread 0.034s rc=0
cibadmin --query``.
"""

from __future__ import annotations

import os
import sys
import time

VARIABLE = "PCMKIMG_TRACE"


def enabled() -> bool:
    """Whether tracing is on (``PCMKIMG_TRACE`` set to anything but empty or ``0``)."""
    return os.environ.get(VARIABLE, "") not in ("", "0")


def line(text: str, *, wall: float | None = None, mono: float | None = None) -> str:
    """One trace line for ``text`` (times default to now)."""
    import threading  # here: the agent's actions load this module and never trace
    from datetime import datetime, timezone

    when = datetime.fromtimestamp(time.time() if wall is None else wall, timezone.utc)
    mono = time.monotonic() if mono is None else mono
    stamp = when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return f"pcmkimg-trace {stamp} mono={mono:.3f} {threading.current_thread().name} {text}"


def note(text: str) -> None:
    """Write one trace line when tracing is on."""
    if enabled():
        print(line(text), file=sys.stderr, flush=True)
