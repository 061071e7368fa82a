"""Signals, so that no cleanup is skipped: SIGTERM raises :class:`Terminated` where we hold
resources (a ban, the lease), and a cleanup that runs holds SIGINT and SIGTERM until it is done.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Iterator

log = logging.getLogger(__name__)


class Terminated(BaseException):
    """SIGTERM arrived while a handler of ours was installed.

    A ``BaseException`` like ``KeyboardInterrupt``: ``except Exception`` does not swallow it,
    ``finally`` blocks run. The CLI should exit ``128 + signum``.
    """

    def __init__(self, signum: int = signal.SIGTERM) -> None:
        self.signum = signum
        super().__init__(f"terminated by signal {signum}")


@contextlib.contextmanager
def sigterm_raises() -> Iterator[None]:
    """For the duration, SIGTERM raises :class:`Terminated` (so ``finally`` blocks run).

    Only in the main thread, and not when SIGTERM is ignored. The previous handler comes back.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    if previous == signal.SIG_IGN:
        yield
        return

    def handler(signum: int, _frame: object) -> None:
        raise Terminated(signum)

    signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Hold SIGINT and SIGTERM while a cleanup runs; deliver them again afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []

    def hold(signum: int, _frame: object) -> None:
        pending.append(signum)

    previous = {s: signal.signal(s, hold) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    except BaseException:
        # An error of the cleanup itself (a ban left behind, say) is what the user must see:
        # a signal that came meanwhile must not replace it.
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if pending:
            log.warning("signal %s during cleanup: reporting the cleanup's error", pending[0])
        raise
    for signum, handler in previous.items():
        signal.signal(signum, handler)
    for held in dict.fromkeys(pending):
        signal.raise_signal(held)
