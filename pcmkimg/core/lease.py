"""The update lease: one pcmkimg update at a time in the whole cluster.

The lease is the cluster property ``pcmkimg-lease`` (a ``crm_config`` nvpair, so every node and
every operator sees it), e.g. ``host=ctl0;pid=4242;token=9f..;expires=2026-05-01T10:00:00Z``.

Taking it is a compare-and-swap: read the CIB, decide, and write with ``cibadmin --patch``,
whose source version is the version we read. Pacemaker applies a patch only to a CIB of exactly
that version, so of two processes that read the same CIB only the first write lands; the other
gets :class:`~pcmkimg.adapters.pacemaker.CibChangedError`, reads again, and now sees the
winner's lease.

A lease is stale, and may be taken over, once it expired (by the reader's clock: keep the
nodes' clocks in sync) or when its holder ran on this host and its pid is gone. A holder that
works longer than the TTL renews it. Pure: the value, the claim and its staleness; taking,
renewing and releasing it in the live CIB is :mod:`pcmkimg.adapters.lease`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone

from pcmkimg.core import cib
from pcmkimg.core import commands as cmd
from pcmkimg.errors import LeaseHeld, LeftBehind

PROPERTY = "pcmkimg-lease"
log = logging.getLogger(__name__)

DEFAULT_TTL = 900.0  # seconds
_TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
_FIX_DELETE = cmd.quoted(cmd.delete_property(PROPERTY))


class LeaseError(LeaseHeld):
    """Base of the lease errors."""


class LeaseNotReleasedError(LeftBehind):
    """Our lease is still in the CIB: a person has to remove it."""


class LeaseHeldError(LeaseError):
    """Another live process holds the lease."""

    def __init__(self, holder: Lease, now: float) -> None:
        self.holder = holder
        left = max(0, int(holder.expires - now))
        super().__init__(
            f"another pcmkimg update holds the lease: pid {holder.pid} on host {holder.host}, "
            f"until {holder.expires_text} ({left}s from now)",
            f"wait for it to finish; if that process is gone on another host, remove the lease "
            f"with {_FIX_DELETE}",
        )


class LeaseUnreadableError(LeaseError):
    """The lease property holds something we cannot read (made by hand, or a newer pcmkimg)."""


class LeaseLostError(LeaseError):
    """Our lease is gone or belongs to someone else now (it expired and was taken over)."""


@dataclass(frozen=True)
class Lease:
    host: str
    pid: int
    token: str
    expires: float  # Unix time, whole seconds

    @property
    def expires_text(self) -> str:
        return datetime.fromtimestamp(self.expires, timezone.utc).strftime(_TIME_FORMAT)

    def encode(self) -> str:
        return f"host={self.host};pid={self.pid};token={self.token};expires={self.expires_text}"

    def same_holder(self, other: Lease) -> bool:
        return (self.host, self.pid, self.token) == (other.host, other.pid, other.token)


def decode(text: str) -> Lease:
    """Parse a lease value; :class:`LeaseUnreadableError` when it is not one of ours."""
    try:
        fields = dict(part.split("=", 1) for part in text.split(";"))
        stamp = datetime.strptime(fields["expires"], _TIME_FORMAT).replace(tzinfo=timezone.utc)
        lease = Lease(fields["host"], int(fields["pid"]), fields["token"], stamp.timestamp())
    except (KeyError, ValueError):
        raise LeaseUnreadableError(
            f"the cluster property {PROPERTY} holds {text!r}, which is not a pcmkimg lease",
            f"if no pcmkimg update runs, remove it with {_FIX_DELETE}",
        ) from None
    if not lease.host or not lease.token or lease.pid <= 0:
        raise LeaseUnreadableError(f"the lease {text!r} misses its holder", _FIX_DELETE)
    return lease


def read(config: cib.Element) -> Lease | None:
    """The lease in a CIB, if any."""
    text = cib.cluster_properties(config).get(PROPERTY)
    return decode(text) if text else None


def is_stale(lease: Lease, now: float, host: str, alive: Callable[[int], bool]) -> bool:
    """Expired, or held by a process of this host that is gone."""
    return lease.expires <= now or (lease.host == host and not alive(lease.pid))


def claim(
    config: cib.Element,
    mine: Lease,
    now: float,
    alive: Callable[[int], bool],
) -> cib.CibChange:
    """The change that writes ``mine``; :class:`LeaseHeldError` if a live lease is there.

    Our own lease (same holder and token) is renewed.
    """
    current = read(config)
    if current is not None and not current.same_holder(mine):
        if not is_stale(current, now, mine.host, alive):
            raise LeaseHeldError(current, now)
    return cib.set_cluster_property(config, PROPERTY, mine.encode())


def ttl_for(timeout: float) -> float:
    """A TTL long enough for one restart (crm_resource --restart, then --wait) and its
    rollback, when the lease is renewed before each of them."""
    return max(DEFAULT_TTL, 4 * timeout + 120)
