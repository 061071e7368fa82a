"""The update lease: one pcmkimg update at a time in the whole cluster.

The lease is the cluster property ``pcmkimg-lease`` (a ``crm_config`` nvpair, so every node and
every operator sees it), e.g.
``host=ctl0;pid=4242;token=9f..;period=30;renewals=17;renewed=2026-05-01T10:00:00Z``.

It works like a Kubernetes Lease. Its holder renews it from a background thread every third of
its ``period`` for as long as it lives; each renewal bumps ``renewals``, so the value changes.
A reader never compares clocks across nodes: it judges a lease by how long it has *itself*
seen the same value, on its own monotonic clock (an :class:`Observation`). A value that stayed
the same for longer than the lease's period belongs to a holder that stopped renewing (killed,
or its node died): it may be taken over. ``renewed`` is the holder's wall clock, shown to
people and never used for a decision. A holder that died on the reader's own host is seen at
once (its pid is gone).

Taking it is a compare-and-swap: read the CIB, decide, and write with ``cibadmin --patch``,
whose source version is the version we read. Pacemaker applies a patch only to a CIB of exactly
that version, so of two processes that read the same CIB only the first write lands; the other
gets :class:`~pcmkimg.adapters.errors.CibChangedError`, reads again, and now sees the
winner's lease. The same holds for a takeover: the value the reader watched is still the value
it replaces, or its write does not land.

Pure: the value, the observation, the claim and its staleness; taking, renewing and releasing
it in the live CIB is :mod:`pcmkimg.adapters.lease`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timezone

from pcmkimg.core import cib
from pcmkimg.core import commands as cmd
from pcmkimg.errors import NoLease, Refused

PROPERTY = "pcmkimg-lease"
log = logging.getLogger(__name__)

DEFAULT_PERIOD = 30.0  # seconds
MIN_PERIOD = 0.1  # short periods are for tests
MAX_PERIOD = 3600.0
RENEWALS_PER_PERIOD = 3  # the holder renews every period / 3: two renewals may fail in a row
_TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
_FIX_DELETE = cmd.quoted(cmd.delete_property(PROPERTY))
_ONCE_NONE_RUNS = "once no pcmkimg runs"
FIX_UNREADABLE = f"{cmd.shown(cmd.delete_property(PROPERTY))} {_ONCE_NONE_RUNS}"
"""What to do about a lease value we cannot read, as ``check`` lists it."""


class LeaseError(NoLease):
    """Base of the lease errors that refuse or stop an update (taking the lease, renewing it);
    a lease left behind after the run is :class:`~pcmkimg.errors.LeftBehind`."""


class LeaseHeld(LeaseError):
    """Another live process holds the lease."""

    def __init__(self, holder: Lease, seen: Observation | None = None, now: float = 0.0) -> None:
        self.holder = holder
        self.seen = seen
        period = f"{holder.period:g}s"
        if seen is not None and seen.changes:
            state = (
                f"it was renewed while we watched, so its holder is alive; it lapses {period} "
                "after its holder stops renewing it"
            )
        elif seen is not None:
            left = max(0.0, holder.period - (now - seen.since))
            state = (
                f"seen unchanged for {now - seen.since:.0f}s; it lapses in {left:.0f}s unless "
                f"its holder renews it (it lapses {period} after the last renewal)"
            )
        else:
            state = f"it lapses {period} after its holder stops renewing it"
        super().__init__(
            f"another pcmkimg holds the update lease: pid {holder.pid} on host {holder.host} "
            f"(renewal {holder.renewals}, last renewed {holder.renewed_text} by that host's "
            f"clock); {state}",
            f"wait for it to finish and run the command again; a holder that died stops "
            f"blocking {period} after its last renewal. Only if you know no pcmkimg runs: "
            f"{_FIX_DELETE}",
        )


class LeaseUnreadableError(LeaseError):
    """The lease property holds something we cannot read (made by hand, or another pcmkimg).

    Held, as far as we can tell (exit 4): nobody takes a lease over a value it cannot judge.
    """

    def __init__(self, text: str, why: str) -> None:
        self.text = text
        super().__init__(
            f"the cluster property {PROPERTY} holds {text!r}, {why}: no pcmkimg takes the "
            "update lease while it is there",
            f"{_FIX_DELETE} {_ONCE_NONE_RUNS}",
        )


class LeaseLostError(LeaseError):
    """Our lease is gone or belongs to someone else now (it lapsed and was taken over)."""


class LeaseNoQuorumError(LeaseError, Refused):
    """The partition this process sees has no quorum: a lease written there is not seen by the
    nodes that have it (nor a renewal), and may be lost when the partitions merge."""


def check_quorum(config: cib.Element, what: str) -> None:
    """:class:`LeaseNoQuorumError` when the CIB (its ``<cib>`` element, as the DC of this
    partition keeps it) says ``have-quorum="0"``: ``what`` (taking or renewing the lease) is
    not done. A CIB without the attribute (a file, a cluster that never judged it) passes."""
    if config.get("have-quorum") in ("0", "false"):
        raise LeaseNoQuorumError(
            f"{what}: this node's partition of the cluster has no quorum (the other nodes "
            "can't see the lease here)",
            "restore quorum (bring nodes back online, check the network), then retry",
        )


@dataclass(frozen=True)
class Lease:
    host: str
    pid: int
    token: str
    period: float = DEFAULT_PERIOD  # seconds; a reader may take it over after this long unchanged
    renewals: int = 0  # bumped by every renewal: a changed value is a live holder
    renewed: float = 0.0  # Unix time of the last renewal by the HOLDER's clock: shown, never judged

    @property
    def renewed_text(self) -> str:
        return datetime.fromtimestamp(self.renewed, timezone.utc).strftime(_TIME_FORMAT)

    @property
    def renew_every(self) -> float:
        return self.period / RENEWALS_PER_PERIOD

    def encode(self) -> str:
        return (
            f"host={self.host};pid={self.pid};token={self.token};period={self.period:g};"
            f"renewals={self.renewals};renewed={self.renewed_text}"
        )

    def same_holder(self, other: Lease) -> bool:
        return (self.host, self.pid, self.token) == (other.host, other.pid, other.token)

    def next_renewal(self, wall: float) -> Lease:
        """This lease renewed at ``wall`` (the holder's clock): the counter moves on."""
        return replace(self, renewals=self.renewals + 1, renewed=float(int(wall)))


@dataclass(frozen=True)
class Observation:
    """What a reader saw of a lease: the value, since when (the READER's monotonic clock), and
    how often it saw it change."""

    value: str
    since: float
    changes: int = 0


def observe(previous: Observation | None, current: Lease, now: float) -> Observation:
    """The observation after reading ``current`` at ``now`` (the reader's monotonic clock)."""
    value = current.encode()
    if previous is None:
        return Observation(value, now)
    if previous.value == value:
        return previous
    return Observation(value, now, previous.changes + 1)


def decode(text: str) -> Lease:
    """Parse a lease value; :class:`LeaseUnreadableError` when it is not one of ours."""
    try:
        fields = dict(part.split("=", 1) for part in text.split(";"))
        stamp = datetime.strptime(fields["renewed"], _TIME_FORMAT).replace(tzinfo=timezone.utc)
        lease = Lease(
            fields["host"],
            int(fields["pid"]),
            fields["token"],
            float(fields["period"]),
            int(fields["renewals"]),
            stamp.timestamp(),
        )
    except (KeyError, ValueError):
        raise LeaseUnreadableError(
            text, "which is not a pcmkimg lease (or one of an older pcmkimg)"
        ) from None
    if not lease.host or not lease.token or lease.pid <= 0 or lease.renewals < 0:
        raise LeaseUnreadableError(text, "a lease that misses its holder")
    if not MIN_PERIOD <= lease.period <= MAX_PERIOD:
        raise LeaseUnreadableError(
            text, f"a lease whose period is outside {MIN_PERIOD:g} to {MAX_PERIOD:g} seconds"
        )
    return lease


def read(config: cib.Element) -> Lease | None:
    """The lease in a CIB, if any; :class:`LeaseUnreadableError` when it is not one we can read."""
    text = cib.cluster_properties(config).get(PROPERTY)
    return decode(text) if text else None


def holds(config: cib.Element, mine: Lease) -> bool:
    """Whether the lease in a CIB is ``mine`` (an unreadable value is not)."""
    try:
        found = read(config)
    except LeaseUnreadableError:
        return False
    return found is not None and found.same_holder(mine)


def is_stale(
    lease: Lease,
    seen: Observation | None,
    now: float,
    host: str,
    alive: Callable[[int], bool],
) -> bool:
    """Seen unchanged by us for longer than its period (``now`` and ``seen`` on our own
    monotonic clock), or held by a process of this host that is gone."""
    if lease.host == host and not alive(lease.pid):
        return True
    return seen is not None and seen.value == lease.encode() and now - seen.since > lease.period


def claim(
    config: cib.Element,
    mine: Lease,
    now: float,
    alive: Callable[[int], bool],
    seen: Observation | None = None,
) -> cib.CibChange:
    """The change that writes ``mine``; :class:`LeaseHeld` if a live lease is there.

    Our own lease (same holder and token) is renewed. ``seen`` is what this reader has
    observed of the lease so far (see :func:`observe`).
    """
    current = read(config)
    if current is not None and not current.same_holder(mine):
        if not is_stale(current, seen, now, mine.host, alive):
            raise LeaseHeld(current, seen, now)
        log.warning("taking over the lapsed lease of pid %s on %s", current.pid, current.host)
    return cib.set_cluster_property(config, PROPERTY, mine.encode())


def check_period(period: float) -> float:
    if not MIN_PERIOD <= period <= MAX_PERIOD:
        raise ValueError(f"a lease period of {period!r}s is outside {MIN_PERIOD:g}..{MAX_PERIOD:g}")
    return float(period)


# --------------------------------------------------------------------------- when to renew

LATEST_RENEWAL = 1.5
"""While a restart runs, a renewal that falls due waits for a moment when it costs the
cluster nothing, at most until this many renewal intervals since the last one (half a
period): a reader still sees it renewed at least once a period with one interval to spare."""

LOOK = 0.25
"""Seconds between two looks at the cluster while a renewal waits (see :func:`renewal_wait`):
each is a crm_mon, next to the restart's own watch; a start or a stop of a bundle's replica
lasts longer than that."""


def renewal_wait(since: float, renew_every: float, *, quiet: bool, busy: bool | None) -> float:
    """Seconds to wait before writing the next renewal, ``since`` seconds after the last one.

    Every lease write is a change of ``crm_config``: the DC's controller re-reads its options,
    and a scheduler run it starts meanwhile finds that read pending and waits a second
    (Pacemaker's ``do_pe_invoke_callback``; blocking on 2.1 and 3.0.0-3.0.1, a timer since
    3.0.2). A write that reaches an idle DC keeps it from acting on anything for that second;
    one that reaches it while a start or a stop is in flight costs nothing: the options are
    read again before that action ends (docs/benchmarks.md). So outside a restart (not
    ``quiet``) a renewal is written every ``renew_every``; during one, once due, only while
    ``busy`` (:func:`action_in_flight`; None: not looked at yet, the caller looks and asks
    again), and at the latest :data:`LATEST_RENEWAL` intervals after the last one, whatever
    the cluster does.
    """
    due = renew_every - since
    if due > 0:
        return due
    if not quiet or busy or since >= LATEST_RENEWAL * renew_every:
        return 0.0
    return min(LOOK, LATEST_RENEWAL * renew_every - since)


def action_in_flight(mon: cib.Element) -> bool:
    """Whether ``crm_mon --output-as=xml`` shows a start or a stop in flight (a resource
    Starting or Stopping: Pacemaker records the pending operation)."""
    return any(
        el.get("role") in ("Starting", "Stopping") for el in mon.iterfind(".//resource[@role]")
    )
