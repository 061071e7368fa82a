"""Rules of the update lease (pure: a CIB fixture, the reader's own clock and a pid check)."""

from __future__ import annotations

import pytest

from pcmkimg.adapters import lease as leasing
from pcmkimg.core import cib, lease
from tests import fixtures

BASE = fixtures.cib("base.xml")
NOW = 1_800_000_000.0  # the holder's wall clock, shown only
MONO = 500.0  # the reader's monotonic clock


def with_lease(value: str) -> cib.Element:
    return cib.set_ticket_attribute(BASE, lease.TICKET, lease.ATTRIBUTE, value).new_cib


def with_legacy(value: str, config: cib.Element = BASE) -> cib.Element:
    """An older pcmkimg's lease: the cluster property."""
    return cib.set_cluster_property(config, lease.LEGACY_PROPERTY, value).new_cib


def make(
    host: str = "h1", pid: int = 100, token: str = "t1", period: float = 30, renewals: int = 0
) -> lease.Lease:
    return lease.Lease(host, pid, token, period, renewals, NOW)


def test_round_trip() -> None:
    held = make(renewals=3)
    assert held.encode() == (
        "host=h1;pid=100;token=t1;period=30;renewals=3;renewed=2027-01-15T08:00:00Z"
    )
    assert lease.decode(held.encode()) == held
    assert lease.read(with_lease(held.encode())) == held
    assert lease.read(BASE) is None


@pytest.mark.parametrize(
    "text",
    [
        "garbage",
        "host=h;pid=x;token=t;period=30;renewals=0;renewed=2027-01-15T08:01:00Z",
        "host=;pid=1;token=t;period=30;renewals=0;renewed=2027-01-15T08:01:00Z",
        "host=h;pid=1;token=t;period=30;renewals=-1;renewed=2027-01-15T08:01:00Z",
        "host=h;pid=1;token=t;period=99999;renewals=0;renewed=2027-01-15T08:01:00Z",
        "host=h;pid=1;token=t;expires=2027-01-15T08:01:00Z",  # an older pcmkimg's lease
        "{json}",
    ],
)
def test_unreadable(text: str) -> None:
    with pytest.raises(lease.LeaseUnreadableError, match="ticket state .* --cleanup"):
        lease.read(with_lease(text))
    with pytest.raises(lease.LeaseUnreadableError, match="cluster property .* --delete"):
        lease.read(with_legacy(text))


def test_free_cib_is_claimed() -> None:
    mine = make()
    change = lease.claim(BASE, mine, MONO, alive=lambda _pid: True)
    assert lease.read(change.new_cib) == mine
    assert change.base_version == cib.cib_version(BASE)


def test_a_lease_first_seen_is_held_with_its_identity() -> None:
    other = make(host="h2", pid=7, token="t2")
    seen = lease.observe(None, other, MONO)
    with pytest.raises(lease.LeaseHeld) as info:
        lease.claim(with_lease(other.encode()), make(), MONO, lambda _pid: False, seen)
    text = info.value.one_line()
    assert "pid 7 on host h2" in text and "2027-01-15T08:00:00Z" in text
    assert "lapses in 30s" in text and "--cleanup" in text and info.value.holder == other


def test_seen_unchanged_for_longer_than_its_period_it_is_taken_over() -> None:
    other = make(host="h2", token="t2")
    seen = lease.observe(None, other, MONO)
    config = with_lease(other.encode())
    with pytest.raises(lease.LeaseHeld):
        lease.claim(config, make(), MONO + 30, lambda _pid: True, seen)
    change = lease.claim(config, make(), MONO + 30.1, lambda _pid: True, seen)
    assert lease.read(change.new_cib) == make()


def test_a_renewal_restarts_the_observation_and_counts_as_a_change() -> None:
    other = make(host="h2", token="t2")
    seen = lease.observe(None, other, MONO)
    assert lease.observe(seen, other, MONO + 10) is seen
    later = lease.observe(seen, other.next_renewal(NOW + 10), MONO + 20)
    assert later.since == MONO + 20 and later.changes == 1
    renewed = other.next_renewal(NOW + 10)
    with pytest.raises(lease.LeaseHeld, match="renewed while we watched"):
        lease.claim(with_lease(renewed.encode()), make(), MONO + 45, lambda _p: True, later)


def test_dead_holder_on_this_host_is_taken_over_but_not_on_another_host() -> None:
    other = make(host="h1", pid=4242, token="t2")
    dead = lambda _pid: False  # noqa: E731
    assert lease.read(lease.claim(with_lease(other.encode()), make(), MONO, dead).new_cib) == make()
    remote = make(host="h2", pid=4242, token="t2")
    with pytest.raises(lease.LeaseHeld):
        lease.claim(with_lease(remote.encode()), make(), MONO, dead)
    alive = lambda _pid: True  # noqa: E731
    with pytest.raises(lease.LeaseHeld):
        lease.claim(with_lease(other.encode()), make(), MONO, alive)


def test_own_lease_is_renewed() -> None:
    mine = make()
    later = mine.next_renewal(NOW + 10)
    change = lease.claim(with_lease(mine.encode()), later, MONO, alive=lambda _pid: True)
    assert lease.read(change.new_cib) == later


def test_the_lease_is_a_ticket_state_in_the_status_section() -> None:
    change = lease.claim(BASE, make(), MONO, alive=lambda _pid: True)
    assert cib.ticket_state(change.new_cib, "pcmkimg-lease") == {
        "id": "pcmkimg-lease",
        "lease": make().encode(),
    }
    paths = {c.get("path", "") for c in cib.patch_changes(change.patch)}
    assert paths == {"/cib", "/cib/status"}  # the version (num_updates), the ticket state
    assert cib.cib_version(change.new_cib) == cib.cib_version(BASE)._replace(num_updates=1)
    assert lease.LEGACY_PROPERTY not in cib.cluster_properties(change.new_cib)
    assert lease.read(lease.erase(change.new_cib).new_cib) is None


def test_an_older_pcmkimgs_property_blocks_and_is_deleted_by_the_takeover() -> None:
    other = make(host="h2", pid=7, token="t2")
    config = with_legacy(other.encode())
    assert lease.read(config) == other
    assert not lease.holds(config, other)  # renew and release look at the ticket state only
    seen = lease.observe(None, other, MONO)
    with pytest.raises(lease.LeaseHeld, match="--type crm_config --name pcmkimg-lease --delete"):
        lease.claim(config, make(), MONO + 30, lambda _pid: True, seen)
    change = lease.claim(config, make(), MONO + 30.1, lambda _pid: True, seen)
    assert lease.read(change.new_cib) == make() and lease.holds(change.new_cib, make())
    assert lease.LEGACY_PROPERTY not in cib.cluster_properties(change.new_cib)
    ops = sorted(
        (c.get("operation"), c.get("path", "")[:11]) for c in cib.patch_changes(change.patch)
    )
    assert ops == [("create", "/cib/status"), ("delete", "/cib/config"), ("modify", "/cib")]


def test_an_older_pcmkimgs_property_next_to_a_ticket_blocks_unless_dead_here() -> None:
    ours, theirs = make(), make(host="h2", pid=7, token="t2")
    config = with_legacy(theirs.encode(), with_lease(ours.encode()))
    assert lease.read(config) == ours and lease.holds(config, ours)
    with pytest.raises(lease.LeaseHeld, match="pid 7 on host h2"):
        lease.claim(config, ours.next_renewal(NOW + 10), MONO, lambda _pid: True)
    here = make(pid=7, token="t2")  # a dead pcmkimg of this host
    config = with_legacy(here.encode(), with_lease(ours.encode()))
    change = lease.claim(config, ours, MONO, lambda pid: pid != 7)
    assert lease.LEGACY_PROPERTY not in cib.cluster_properties(change.new_cib)


def test_pid_alive() -> None:
    import os

    assert leasing.pid_alive(os.getpid())
    assert not leasing.pid_alive(2**22 + 12345)  # above pid_max
