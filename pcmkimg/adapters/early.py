"""Work started in a thread before its answer is needed (:class:`Early`), so that the tools
and the nodes' stores answer while Python imports and parses.

``pcmkimg status`` and ``check`` read the cluster (:func:`pcmkimg.adapters.runner.read_early`)
and the stores behind local sockets (:meth:`pcmkimg.adapters.storeview.StoreView.read_early`)
this way, right after their options (docs/benchmarks.md, budget 5).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Early(Generic[T]):
    """``work()`` running in a daemon thread from the moment this is made. :meth:`take` waits
    for it and gives its answer, or raises what it raised, once: later calls give None (the
    caller then asks afresh), so that an answer read early is never given twice."""

    def __init__(self, work: Callable[[], T], name: str) -> None:
        self._answer: list[object] = []
        self._lock = threading.Lock()
        self._taken = False
        self._thread = threading.Thread(target=self._run, args=(work,), name=name, daemon=True)
        self._thread.start()

    def _run(self, work: Callable[[], T]) -> None:
        try:
            self._answer.append(work())
        except BaseException as exc:  # handed to take()
            self._answer.append(exc)

    def take(self) -> T | None:
        with self._lock:
            if self._taken:
                return None
            self._taken = True
        self._thread.join()  # interruptible: a signal handler's exception ends it
        answer = self._answer[0]
        if isinstance(answer, BaseException):
            raise answer
        return answer  # type: ignore[return-value]
