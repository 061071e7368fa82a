"""The update lease in the live CIB: take it, keep it, release it (see :mod:`pcmkimg.core.lease`
for what it is and when it lapses).

Each change is the cluster port's compare-and-swap (``cluster.update_cib(edit)``, see
:class:`pcmkimg.adapters.pacemaker.Pacemaker`) applied to the pure claim of the core.
:func:`held` is what the commands use: it takes the lease inside its cleanup scope, renews it
from a background thread (:class:`Keeper`) for as long as the block runs, and releases it on
every exit path.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Protocol

from pcmkimg.adapters.signals import signals_held, sigterm_raises
from pcmkimg.core import cib
from pcmkimg.core import commands as cmd
from pcmkimg.core.lease import (
    _FIX_DELETE,
    DEFAULT_PERIOD,
    Lease,
    LeaseError,
    LeaseHeld,
    LeaseLostError,
    LeaseUnreadableError,
    Observation,
    check_period,
    check_quorum,
    claim,
    erase,
    holds,
    observe,
    read,
    write,
)
from pcmkimg.errors import LeftBehind, PcmkimgError

log = logging.getLogger(__name__)

POLL = 1.0  # seconds between two looks at a lease held by another process


class CibWriter(Protocol):
    """What the lease needs of the cluster port: its compare-and-swap of the CIB."""

    def update_cib(self, edit: Callable[[cib.Element], cib.CibChange]) -> cib.CibChange: ...


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def new_lease(
    period: float = DEFAULT_PERIOD,
    *,
    host: str | None = None,
    pid: int | None = None,
    clock: Callable[[], float] = time.time,
) -> Lease:
    """Our lease, not taken yet: a fresh token (``clock`` only stamps ``renewed``)."""
    return Lease(
        host=host or socket.gethostname(),
        pid=os.getpid() if pid is None else pid,
        token=secrets.token_hex(8),
        period=check_period(period),
        renewed=float(int(clock())),
    )


def acquire(
    cluster: CibWriter,
    period: float = DEFAULT_PERIOD,
    *,
    mine: Lease | None = None,
    watch: bool = False,
    say: Callable[[str], None] | None = None,
    host: str | None = None,
    pid: int | None = None,
    clock: Callable[[], float] = time.time,
    monotonic: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] | None = None,
) -> Lease:
    """Take the lease, or take over one that lapsed. :class:`LeaseHeld` when it is held.

    A lease of another process lapses once this process has seen it unchanged for longer than
    its period (by ``monotonic``, our own clock). With ``watch`` we keep looking (every
    :data:`POLL` seconds) until it lapses (taken over) or changes (its holder is alive: refused
    at once); without, a lease held by another live-looking process is refused on first sight.
    ``clock`` only stamps the value for people (the holder's wall clock, never compared).
    """
    if mine is None:
        mine = new_lease(period, host=host, pid=pid, clock=clock)
    seen: Observation | None = None

    def edit(config: cib.Element) -> cib.CibChange:
        nonlocal seen
        check_quorum(config, "the update lease was not taken")
        current = read(config)
        now = monotonic()
        if current is not None and not current.same_holder(mine):
            seen = observe(seen, current, now)
        return claim(config, mine, now, pid_alive, seen)

    announced = False
    while True:
        try:
            cluster.update_cib(edit)
            return mine
        except LeaseHeld as exc:
            if not watch or (exc.seen is not None and exc.seen.changes):
                raise
            if say is not None and not announced:
                announced = True
                say(
                    f"the update lease is held by pid {exc.holder.pid} on {exc.holder.host}: "
                    f"watching it for up to {exc.holder.period:g}s (a holder that died stops "
                    "blocking once its lease stays unrenewed that long)"
                )
            (sleep or time.sleep)(min(POLL, exc.holder.period / 4))


def renew(
    cluster: CibWriter,
    lease: Lease,
    *,
    clock: Callable[[], float] = time.time,
) -> Lease:
    """Renew our lease (its counter moves on); :class:`LeaseLostError` if it is not ours."""
    renewed = lease.next_renewal(clock())

    def edit(config: cib.Element) -> cib.CibChange:
        if holds(config, lease):
            # Without quorum the renewal would land in this partition only: not a renewal
            # (the keeper retries; a period without one ends the run before its next node).
            check_quorum(config, "the update lease was not renewed")
            return write(config, renewed)
        try:
            found = read(config)
            now = f" (now held by pid {found.pid} on {found.host})" if found else " (gone)"
        except LeaseUnreadableError as exc:
            now = f" (the lease now holds {exc.text!r})"
        raise LeaseLostError(
            "the update lease is no longer ours" + now,
            f"another update may be running: check with {cmd.quoted(cmd.status())}, then re-run",
        )

    cluster.update_cib(edit)
    return renewed


def release(cluster: CibWriter, lease: Lease) -> bool:
    """Delete the lease if it carries our token. False when it did not (nothing deleted)."""
    released = True

    def edit(config: cib.Element) -> cib.CibChange:
        nonlocal released
        if not holds(config, lease):
            released = False
            return cib.make_change(config, config, "lease not ours: nothing to release")
        released = True
        return erase(config)

    cluster.update_cib(edit)
    return released


class Keeper:
    """Renews a lease from a daemon thread every ``lease.renew_every`` seconds until stopped.

    The thread only writes the lease; the main thread asks :meth:`check` at safe points (no
    CIB access: a restart is never delayed by it). A renewal that fails for a reason other than
    the lease being gone is retried sooner; once no renewal landed for a whole period, or the
    lease turned out to be someone else's, :meth:`check` raises :class:`LeaseLostError`.
    """

    def __init__(
        self,
        cluster: CibWriter,
        lease: Lease,
        *,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cluster = cluster
        self.current = lease
        self.clock = clock
        self.monotonic = monotonic
        self.last_renewed = monotonic()
        self.lost: LeaseLostError | None = None
        self._stop = threading.Event()
        self._wake = threading.Event()  # a wait ends early: stopped
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="pcmkimg-lease", daemon=True)

    def start(self) -> Keeper:
        self._thread.start()
        return self

    def _wait(self) -> float:
        """Seconds until the next renewal is to be written (0: now)."""
        return self.current.renew_every - (self.monotonic() - self.last_renewed)

    def _run(self) -> None:
        retry_at = 0.0
        while not self._stop.is_set():
            wait = max(self._wait(), retry_at - self.monotonic())
            if wait > 0:
                self._wake.wait(wait)
                self._wake.clear()
                continue
            try:
                with self._lock:
                    if self._stop.is_set():
                        return
                    # From before the write: a reader may see the new value from the moment
                    # it lands, and takes over a period after that at the earliest.
                    started = self.monotonic()
                    self.current = renew(self.cluster, self.current, clock=self.clock)
                    self.last_renewed = started
                retry_at = 0.0
            except LeaseLostError as exc:
                self.lost = exc
                log.error("%s", exc.one_line())
                return
            except PcmkimgError as exc:
                log.warning("could not renew the update lease (retrying): %s", exc.one_line())
                retry_at = self.monotonic() + self.current.renew_every / 3
            except Exception:  # a bug must not end the renewals silently while we hold it
                log.exception("renewing the update lease")
                retry_at = self.monotonic() + self.current.renew_every / 3

    def check(self) -> None:
        """:class:`LeaseLostError` when the lease is no longer safely ours."""
        if self.lost is not None:
            raise self.lost
        quiet = self.monotonic() - self.last_renewed
        if quiet > self.current.period:
            raise LeaseLostError(
                f"the update lease could not be renewed for {quiet:.0f}s (its period is "
                f"{self.current.period:g}s): another pcmkimg may have taken it over",
                f"check with {cmd.quoted(cmd.status())} that the cluster can be reached, "
                "then re-run",
            )

    def stop(self, timeout: float = 30.0) -> None:
        """No renewal after this returns (one in flight finishes first)."""
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            acquired = self._lock.acquire(timeout=timeout)
            if acquired:
                self._lock.release()


class Holding:
    """What :func:`held` gives the block: the lease as renewed so far, and :meth:`check`."""

    def __init__(self, keeper: Keeper) -> None:
        self._keeper = keeper

    @property
    def lease(self) -> Lease:
        return self._keeper.current

    @property
    def host(self) -> str:
        return self.lease.host

    @property
    def pid(self) -> int:
        return self.lease.pid

    @property
    def token(self) -> str:
        return self.lease.token

    @property
    def period(self) -> float:
        return self.lease.period

    def check(self) -> None:
        self._keeper.check()


@contextlib.contextmanager
def held(
    cluster: CibWriter,
    period: float,
    *,
    say: Callable[[str], None] | None = None,
    watch: bool = True,
    clock: Callable[[], float] = time.time,
) -> Iterator[Holding]:
    """Hold the lease for a block, renewed in the background; released on every exit path
    (SIGINT, SIGTERM, SIGHUP and SIGQUIT too). ``period``: ``[lease] period`` (the context's).

    A lease held by another process is watched for up to one period (``watch``): taken over if
    it stays unchanged that long, refused at once when it changes. The lease is taken inside
    the cleanup scope: an interruption during or right after its CIB write removes it again
    (if it carries our token).
    """
    with sigterm_raises():
        mine = new_lease(period, clock=clock)
        keeper: Keeper | None = None
        maybe_written = False
        first: BaseException | None = None
        try:
            try:
                maybe_written = True
                acquire(cluster, mine=mine, watch=watch, say=say, clock=clock)
            except LeaseError:
                # Held, or a value we cannot read: refused before any write of ours.
                maybe_written = False
                raise
            keeper = Keeper(cluster, mine, clock=clock).start()
            yield Holding(keeper)
        except BaseException as exc:
            first = exc
            raise
        finally:
            with signals_held():
                if keeper is not None:
                    keeper.stop()
                if maybe_written:
                    _release_or_raise(cluster, mine, first)


def _release_or_raise(cluster: CibWriter, mine: Lease, first: BaseException | None) -> None:
    try:
        release(cluster, mine)
    except PcmkimgError as exc:
        before = ""
        if first is not None:
            said = first.one_line() if isinstance(first, PcmkimgError) else first
            before = f" (after: {said or type(first).__name__})"
        # Never let an interruption or another error hide a lease left behind.
        raise LeftBehind(
            f"the update lease could not be released: {exc.message}{before}",
            f"{_FIX_DELETE} once no pcmkimg runs",
        ) from exc
