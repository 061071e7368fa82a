"""Rules of the update lease (pure: a CIB fixture, a clock and a pid check)."""

from __future__ import annotations

import pytest

from pcmkimg.adapters import lease as leasing
from pcmkimg.core import cib, lease
from tests import fixtures

BASE = fixtures.cib("base.xml")
NOW = 1_800_000_000.0


def with_lease(value: str) -> cib.Element:
    return cib.set_cluster_property(BASE, lease.PROPERTY, value).new_cib


def make(
    host: str = "h1", pid: int = 100, token: str = "t1", expires: float = NOW + 60
) -> lease.Lease:
    return lease.Lease(host, pid, token, expires)


def test_round_trip() -> None:
    held = make()
    assert held.encode() == "host=h1;pid=100;token=t1;expires=2027-01-15T08:01:00Z"
    assert lease.decode(held.encode()) == held
    assert lease.read(with_lease(held.encode())) == held
    assert lease.read(BASE) is None


@pytest.mark.parametrize(
    "text",
    [
        "garbage",
        "host=h;pid=x;token=t;expires=2027-01-15T08:01:00Z",
        "host=;pid=1;token=t;expires=2027-01-15T08:01:00Z",
        "{json}",
    ],
)
def test_unreadable(text: str) -> None:
    with pytest.raises(lease.LeaseUnreadableError, match="--delete"):
        lease.read(with_lease(text))


def test_free_cib_is_claimed() -> None:
    mine = make()
    change = lease.claim(BASE, mine, NOW, alive=lambda _pid: True)
    assert lease.read(change.new_cib) == mine
    assert change.base_version == cib.cib_version(BASE)


def test_live_lease_of_another_holder_is_refused_with_its_identity() -> None:
    other = make(host="h2", pid=7, token="t2")
    with pytest.raises(lease.LeaseHeldError) as info:
        lease.claim(with_lease(other.encode()), make(), NOW, alive=lambda _pid: False)
    text = info.value.one_line()
    assert "pid 7 on host h2" in text and "2027-01-15T08:01:00Z" in text and "60s" in text
    assert "--delete" in text and info.value.holder == other


def test_expired_lease_is_taken_over() -> None:
    other = make(host="h2", token="t2", expires=NOW - 1)
    change = lease.claim(with_lease(other.encode()), make(), NOW, alive=lambda _pid: True)
    assert lease.read(change.new_cib) == make()


def test_dead_holder_on_this_host_is_taken_over_but_not_on_another_host() -> None:
    other = make(host="h1", pid=4242, token="t2")
    dead = lambda _pid: False  # noqa: E731
    assert lease.read(lease.claim(with_lease(other.encode()), make(), NOW, dead).new_cib) == make()
    remote = make(host="h2", pid=4242, token="t2")
    with pytest.raises(lease.LeaseHeldError):
        lease.claim(with_lease(remote.encode()), make(), NOW, dead)
    alive = lambda _pid: True  # noqa: E731
    with pytest.raises(lease.LeaseHeldError):
        lease.claim(with_lease(other.encode()), make(), NOW, alive)


def test_own_lease_is_renewed() -> None:
    mine = make()
    later = make(expires=NOW + 600)
    change = lease.claim(with_lease(mine.encode()), later, NOW, alive=lambda _pid: True)
    assert lease.read(change.new_cib) == later


def test_pid_alive() -> None:
    import os

    assert leasing.pid_alive(os.getpid())
    assert not leasing.pid_alive(2**22 + 12345)  # above pid_max
