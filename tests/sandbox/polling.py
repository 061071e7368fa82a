"""A look at the sandbox taken again and again in a thread while a block runs (an update
watched from outside): the subclass says what one look is (:meth:`Polling.sample`)."""

from __future__ import annotations

import threading
from typing import Self


class Polling:
    """Calls :meth:`sample` every :attr:`interval` seconds in a daemon thread from the
    block's start to its end; with :attr:`before` / :attr:`after`, once more on the calling
    thread first / last (the state before the block, and after it)."""

    interval: float
    before = False
    after = False
    join_timeout = 60.0

    def sample(self) -> None:
        raise NotImplementedError

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)

    def __enter__(self) -> Self:
        self._stop = threading.Event()
        if self.before:
            self.sample()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=self.join_timeout)
        if self.after:
            self.sample()
