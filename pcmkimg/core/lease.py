"""The update lease: one pcmkimg update at a time in the whole cluster.

The lease is the attribute ``lease`` of the ticket state ``pcmkimg-lease`` in the CIB's status
section (``/cib/status/tickets/ticket_state``, as booth keeps its leases; every node and every
operator sees it: ``crm_ticket --ticket pcmkimg-lease --query-xml``), e.g.
``host=ctl0;pid=4242;token=9f..;period=30;renewals=17;renewed=2026-05-01T10:00:00Z``. No
``rsc_ticket`` constraint names the ticket: it constrains nothing. A write of it is a status
change: unlike a change of ``crm_config`` (where older pcmkimg versions kept it, as the cluster
property ``pcmkimg-lease``), it does not make the DC's controller re-read its options, which
stalled it for a second (docs/benchmarks.md). An older pcmkimg's property is still read (it
blocks as a lease does; a lapsed one is taken over, the property deleted in the same change).

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
from datetime import datetime, timezone

from pcmkimg import LEASE_TICKET
from pcmkimg.core import cib
from pcmkimg.core import commands as cmd
from pcmkimg.errors import NoLease, Refused
from pcmkimg.records import dataclass, replace

TICKET = LEASE_TICKET
"""The ticket state that holds the lease."""
ATTRIBUTE = "lease"
"""Its attribute that holds the encoded lease."""
LEGACY_PROPERTY = "pcmkimg-lease"
"""The cluster property where pcmkimg kept the lease before: read, deleted by a takeover."""
log = logging.getLogger(__name__)

DEFAULT_PERIOD = 30.0  # seconds
MIN_PERIOD = 0.1  # short periods are for tests
MAX_PERIOD = 3600.0
RENEWALS_PER_PERIOD = 3  # the holder renews every period / 3: two renewals may fail in a row
_TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
_FIX_DELETE = cmd.quoted(cmd.delete_ticket(TICKET))
_FIX_DELETE_LEGACY = cmd.quoted(cmd.delete_property(LEGACY_PROPERTY))
_ONCE_NONE_RUNS = "once no pcmkimg runs"


class LeaseError(NoLease):
    """Base of the lease errors that refuse or stop an update (taking the lease, renewing it);
    a lease left behind after the run is :class:`~pcmkimg.errors.LeftBehind`."""


class LeaseHeld(LeaseError):
    """Another live process holds the lease."""

    def __init__(
        self,
        holder: Lease,
        seen: Observation | None = None,
        now: float = 0.0,
        *,
        legacy: bool = False,
    ) -> None:
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
            f"{_FIX_DELETE_LEGACY if legacy else _FIX_DELETE}",
        )


class LeaseUnreadableError(LeaseError):
    """The lease holds something we cannot read (made by hand, or another pcmkimg).

    Held, as far as we can tell (exit 4): nobody takes a lease over a value it cannot judge.
    """

    def __init__(self, text: str, why: str, *, legacy: bool = False) -> None:
        self.text = text
        self.legacy = legacy
        where = (
            f"the cluster property {LEGACY_PROPERTY} (an older pcmkimg's lease)"
            if legacy
            else f"the ticket state {TICKET} (its {ATTRIBUTE} attribute)"
        )
        super().__init__(
            f"{where} holds {text!r}, {why}: no pcmkimg takes the update lease while it is there",
            f"{_FIX_DELETE_LEGACY if legacy else _FIX_DELETE} {_ONCE_NONE_RUNS}",
        )


def unreadable_fix(exc: LeaseUnreadableError) -> str:
    """What to do about a lease value we cannot read, as ``check`` lists it."""
    argv = cmd.delete_property(LEGACY_PROPERTY) if exc.legacy else cmd.delete_ticket(TICKET)
    return f"{cmd.shown(argv)} {_ONCE_NONE_RUNS}"


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


def decode(text: str, *, legacy: bool = False) -> Lease:
    """Parse a lease value; :class:`LeaseUnreadableError` when it is not one of ours
    (``legacy``: the value of an older pcmkimg's property)."""
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
            text, "which is not a pcmkimg lease (or one of an older pcmkimg)", legacy=legacy
        ) from None
    if not lease.host or not lease.token or lease.pid <= 0 or lease.renewals < 0:
        raise LeaseUnreadableError(text, "a lease that misses its holder", legacy=legacy)
    if not MIN_PERIOD <= lease.period <= MAX_PERIOD:
        raise LeaseUnreadableError(
            text,
            f"a lease whose period is outside {MIN_PERIOD:g} to {MAX_PERIOD:g} seconds",
            legacy=legacy,
        )
    return lease


def read_ticket(config: cib.Element) -> Lease | None:
    """The lease in the ticket state, if any (the status section: a CIB read without it has
    none); :class:`LeaseUnreadableError` when it is not one we can read."""
    state = cib.ticket_state(config, TICKET)
    text = state.get(ATTRIBUTE) if state is not None else None
    return decode(text) if text else None


def read_legacy(config: cib.Element) -> Lease | None:
    """An older pcmkimg's lease, the cluster property ``pcmkimg-lease``, if any."""
    text = cib.cluster_properties(config).get(LEGACY_PROPERTY)
    return decode(text, legacy=True) if text else None


def read(config: cib.Element) -> Lease | None:
    """The lease in a CIB, if any: the ticket state's, else an older pcmkimg's cluster
    property; :class:`LeaseUnreadableError` when it is not one we can read."""
    found = read_ticket(config)
    return found if found is not None else read_legacy(config)


def holds(config: cib.Element, mine: Lease) -> bool:
    """Whether the lease in the ticket state is ``mine`` (an unreadable value is not; we never
    hold an older pcmkimg's property)."""
    try:
        found = read_ticket(config)
    except LeaseUnreadableError:
        return False
    return found is not None and found.same_holder(mine)


def write(config: cib.Element, lease: Lease) -> cib.CibChange:
    """The change that writes ``lease`` into the ticket state; an older pcmkimg's property, if
    any, goes in the same change."""
    legacy = LEGACY_PROPERTY if LEGACY_PROPERTY in cib.cluster_properties(config) else None
    return cib.set_ticket_attribute(config, TICKET, ATTRIBUTE, lease.encode(), drop_property=legacy)


def erase(config: cib.Element) -> cib.CibChange:
    """The change that deletes the ticket state (the lease's release)."""
    return cib.delete_ticket_state(config, TICKET)


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
    observed of the lease so far (see :func:`observe`): of the ticket state's, else of an
    older pcmkimg's property. An older pcmkimg's property next to a ticket state (both
    written, by two versions) is judged without an observation: it blocks unless its holder
    is a process of this host that is gone. The property goes with our write.
    """
    ticket = read_ticket(config)
    legacy = read_legacy(config)
    current = ticket if ticket is not None else legacy
    if current is not None and not current.same_holder(mine):
        if not is_stale(current, seen, now, mine.host, alive):
            raise LeaseHeld(current, seen, now, legacy=ticket is None)
        log.warning("taking over the lapsed lease of pid %s on %s", current.pid, current.host)
    if ticket is not None and legacy is not None and not legacy.same_holder(mine):
        if not is_stale(legacy, None, now, mine.host, alive):
            raise LeaseHeld(legacy, None, now, legacy=True)
    return write(config, mine)


def check_period(period: float) -> float:
    if not MIN_PERIOD <= period <= MAX_PERIOD:
        raise ValueError(f"a lease period of {period!r}s is outside {MIN_PERIOD:g}..{MAX_PERIOD:g}")
    return float(period)
