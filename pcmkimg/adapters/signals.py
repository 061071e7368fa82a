"""Signals, so that no cleanup is skipped: SIGTERM, SIGHUP (an ssh session that drops) and
SIGQUIT raise :class:`Terminated` where we hold resources (a ban, the lease), and a cleanup that
runs holds them and SIGINT until it is done.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Iterator

log = logging.getLogger(__name__)

TERMINATING: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
"""The signals handled as SIGTERM: each raises :class:`Terminated` carrying its number."""

HELD: tuple[signal.Signals, ...] = (signal.SIGINT, *TERMINATING)


class Terminated(BaseException):
    """SIGTERM, SIGHUP or SIGQUIT arrived while a handler of ours was installed.

    A ``BaseException`` like ``KeyboardInterrupt``: ``except Exception`` does not swallow it,
    ``finally`` blocks run. The CLI exits ``128 + signum``.
    """

    def __init__(self, signum: int = signal.SIGTERM) -> None:
        self.signum = signum
        super().__init__(f"terminated by {signal.Signals(signum).name}")

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name


@contextlib.contextmanager
def sigterm_raises() -> Iterator[None]:
    """For the duration, SIGTERM, SIGHUP and SIGQUIT raise :class:`Terminated` (so ``finally``
    blocks run).

    Only in the main thread, and not for a signal that is ignored (``nohup`` ignores SIGHUP:
    it stays ignored). The previous handlers come back.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, _frame: object) -> None:
        raise Terminated(signum)

    previous = {}
    for signum in TERMINATING:
        before = signal.getsignal(signum)
        if before == signal.SIG_IGN:
            continue
        previous[signum] = before
        signal.signal(signum, handler)
    try:
        yield
    finally:
        for signum, before in previous.items():
            signal.signal(signum, before)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Hold SIGINT, SIGTERM, SIGHUP and SIGQUIT while a cleanup runs; deliver them again
    afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []

    def hold(signum: int, _frame: object) -> None:
        pending.append(signum)

    previous = {}
    for signum in HELD:
        before = signal.getsignal(signum)
        if before == signal.SIG_IGN:
            continue
        previous[signum] = signal.signal(signum, hold)
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
