"""The update lease in the live CIB: take it, renew it, release it (see :mod:`pcmkimg.core.lease`
for what it is and when it is stale).

Each change is the pacemaker adapter's compare-and-swap (:func:`update_cib`) applied to the pure
claim of the core.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import replace

from pcmkimg.adapters.pacemaker import Runner, update_cib
from pcmkimg.adapters.signals import signals_held, sigterm_raises
from pcmkimg.core import cib
from pcmkimg.core import commands as cmd
from pcmkimg.core.lease import (
    _FIX_DELETE,
    DEFAULT_TTL,
    PROPERTY,
    Lease,
    LeaseLostError,
    LeaseNotReleasedError,
    claim,
    read,
)
from pcmkimg.errors import PcmkimgError


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def acquire(
    runner: Runner,
    ttl: float = DEFAULT_TTL,
    *,
    host: str | None = None,
    pid: int | None = None,
    clock: Callable[[], float] = time.time,
) -> Lease:
    """Take the lease (or take over a stale one). :class:`LeaseHeldError` when it is held."""
    mine = Lease(
        host=host or socket.gethostname(),
        pid=os.getpid() if pid is None else pid,
        token=secrets.token_hex(8),
        expires=float(int(clock() + ttl)),
    )
    update_cib(runner, lambda config: claim(config, mine, clock(), pid_alive))
    return mine


def renew(
    runner: Runner,
    lease: Lease,
    ttl: float = DEFAULT_TTL,
    *,
    clock: Callable[[], float] = time.time,
) -> Lease:
    """Push our lease's expiry to ``now + ttl``; :class:`LeaseLostError` if it is not ours."""
    renewed = replace(lease, expires=float(int(clock() + ttl)))

    def edit(config: cib.Element) -> cib.CibChange:
        found = read(config)
        if found is None or not found.same_holder(lease):
            raise LeaseLostError(
                "the update lease is no longer ours"
                + (f" (now held by pid {found.pid} on {found.host})" if found else " (gone)"),
                f"another update may be running: check with {cmd.quoted(cmd.status())}, "
                "then re-run",
            )
        return cib.set_cluster_property(config, PROPERTY, renewed.encode())

    update_cib(runner, edit)
    return renewed


def release(runner: Runner, lease: Lease) -> bool:
    """Delete the lease if it is still ours. False when it was not (nothing deleted)."""
    released = True

    def edit(config: cib.Element) -> cib.CibChange:
        nonlocal released
        found = read(config)
        if found is None or not found.same_holder(lease):
            released = False
            return cib.make_change(config, config, "lease not ours: nothing to release")
        released = True
        return cib.delete_cluster_property(config, PROPERTY)

    update_cib(runner, edit)
    return released


@contextlib.contextmanager
def held(runner: Runner, ttl: float = DEFAULT_TTL) -> Iterator[Lease]:
    """Hold the lease for a block; released on every exit path (SIGINT and SIGTERM too)."""
    with sigterm_raises():
        lease = acquire(runner, ttl)
        first: BaseException | None = None
        try:
            yield lease
        except BaseException as exc:
            first = exc
            raise
        finally:
            with signals_held():
                try:
                    release(runner, lease)
                except PcmkimgError as exc:
                    before = ""
                    if first is not None:
                        said = first.one_line() if isinstance(first, PcmkimgError) else first
                        before = f" (after: {said or type(first).__name__})"
                    # Never let an interruption or another error hide a lease left behind.
                    raise LeaseNotReleasedError(
                        f"the update lease could not be released: {exc.message}{before}",
                        f"{_FIX_DELETE} once no pcmkimg runs",
                    ) from exc
