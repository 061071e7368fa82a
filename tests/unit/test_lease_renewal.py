"""The lease, Kubernetes-Lease style (issue 12, items 4 and 5), on a CIB held in memory.

The cluster port is tests.fakes.FakeCluster: its ``update_cib`` applies each change to one
CIB element (one change at a time), so that the real acquire/renew/release/held/Keeper code
runs, with real threads and short periods.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from pcmkimg.adapters import lease as leasing
from pcmkimg.adapters.errors import ConfigError
from pcmkimg.core import cib, lease
from tests import fakes

HOUR = 3600.0


def current(cluster: fakes.FakeCluster) -> lease.Lease | None:
    """The lease in the cluster's CIB now."""
    return lease.read(cluster.config)


def writes(cluster: fakes.FakeCluster) -> list[tuple[str, ...]]:
    """Every change of the CIB so far (the lease's: acquire, renew, release)."""
    return cluster.kinds("acquire", "renew", "release", "cib")


@pytest.fixture
def fake() -> fakes.FakeCluster:
    return fakes.FakeCluster({})


@pytest.mark.parametrize("skew", [-HOUR, HOUR])
def test_a_holder_whose_clock_is_an_hour_off_keeps_its_lease(
    fake: fakes.FakeCluster, skew: float
) -> None:
    """The reader never compares the holder's clock with its own: a lease it has not yet seen
    unchanged for a whole period is held, whatever time the holder's clock shows."""
    holder = leasing.acquire(fake, 60, host="node-a", clock=lambda: time.time() + skew)
    with pytest.raises(lease.LeaseHeld) as info:
        leasing.acquire(fake, 60, host="node-b")
    assert info.value.holder.token == holder.token
    assert current(fake) is not None and current(fake).token == holder.token


def test_a_renewing_holder_with_a_skewed_clock_never_loses_its_lease_to_a_watcher(
    fake: fakes.FakeCluster,
) -> None:
    """A holder an hour behind renews from its thread; a second process on another host
    watches for longer than the period and is refused, never takes the lease over."""
    with leasing.held(fake, 0.6, clock=lambda: time.time() - HOUR) as holding:
        for _ in range(3):  # three watches of more than a period each
            started = time.monotonic()
            with pytest.raises(lease.LeaseHeld) as info:
                leasing.acquire(fake, 0.6, host="node-b", watch=True)
            assert info.value.seen is not None and info.value.seen.changes >= 1
            assert time.monotonic() - started < 0.6  # refused on the first renewal it saw
            assert current(fake) is not None and current(fake).token == holding.token
        time.sleep(0.7)
        holding.check()  # still ours, renewed all along
        assert holding.lease.renewals >= 3
    assert current(fake) is None


def test_a_dead_holder_on_another_host_stops_blocking_within_one_period(
    fake: fakes.FakeCluster,
) -> None:
    dead = leasing.acquire(fake, 0.5, host="node-a", pid=4242)  # never renewed: it died
    said: list[str] = []
    started = time.monotonic()
    mine = leasing.acquire(fake, 0.5, host="node-b", watch=True, say=said.append)
    waited = time.monotonic() - started
    assert 0.5 < waited < 1.0
    assert current(fake) == mine and mine.token != dead.token
    assert len(said) == 1 and "pid 4242 on node-a" in said[0] and "up to 0.5s" in said[0]


def test_the_refusal_names_the_holder_and_when_the_lease_lapses(fake: fakes.FakeCluster) -> None:
    leasing.acquire(fake, 40, host="node-a", pid=4242)
    with pytest.raises(lease.LeaseHeld) as info:
        leasing.acquire(fake, 40, host="node-b")
    text = info.value.one_line()
    assert "pid 4242 on host node-a" in text
    assert "it lapses in 40s unless its holder renews it" in text
    assert "stops blocking 40s after its last renewal" in text and "--cleanup" in text


def test_the_value_changes_on_every_renewal_and_round_trips(fake: fakes.FakeCluster) -> None:
    mine = leasing.acquire(fake, 30, host="node-a", pid=7, clock=lambda: 1_800_000_000.0)
    assert mine.encode() == (
        f"host=node-a;pid=7;token={mine.token};period=30;renewals=0;renewed=2027-01-15T08:00:00Z"
    )
    again = leasing.renew(fake, mine, clock=lambda: 1_800_000_000.0)
    assert again.renewals == 1 and again.encode() != mine.encode()
    assert lease.decode(again.encode()) == again == current(fake)


def test_the_keeper_renews_in_the_background_and_stops_before_the_release(
    fake: fakes.FakeCluster,
) -> None:
    with leasing.held(fake, 0.3) as holding:
        time.sleep(0.5)
        assert holding.lease.renewals >= 2
        assert current(fake) == holding.lease
    done = len(writes(fake))
    assert writes(fake)[-1] == ("release",)
    time.sleep(0.3)
    assert len(writes(fake)) == done  # no renewal after the release


def test_a_lease_taken_over_is_lost_for_its_holder(fake: fakes.FakeCluster) -> None:
    with leasing.held(fake, 0.3) as holding:
        other = lease.Lease("node-b", 9, "theirs", 30.0)
        fake.update_cib(
            lambda c: cib.set_ticket_attribute(c, lease.TICKET, lease.ATTRIBUTE, other.encode())
        )
        time.sleep(0.3)
        with pytest.raises(lease.LeaseLostError, match="held by pid 9 on node-b"):
            holding.check()
    assert current(fake) == other  # theirs is not released by us


def test_a_holder_whose_partition_lost_quorum_does_not_renew_and_stops(
    fake: fakes.FakeCluster,
) -> None:
    """Issue 22 item 7: a holder cut off from the others can still write its own partition's
    CIB, which the others never see. Without quorum (``have-quorum="0"`` on the ``<cib>``
    element) a renewal is not written; once a period passed without one, the holder stops
    before its next node instead of acting beside the node that takes the lease over."""
    with pytest.raises(lease.LeaseLostError, match="could not be renewed"):
        with leasing.held(fake, 0.3) as holding:
            fake.config.set("have-quorum", "0")
            before = current(fake)
            time.sleep(0.5)
            assert current(fake) == before  # no renewal landed
            holding.check()
    assert current(fake) is None  # released: it was still ours


def test_the_lease_is_not_taken_without_quorum_exit_3(fake: fakes.FakeCluster) -> None:
    fake.config.set("have-quorum", "0")
    with pytest.raises(lease.LeaseNoQuorumError, match="no quorum") as info:
        leasing.acquire(fake, 30)
    assert info.value.family.__name__ == "Refused"
    assert current(fake) is None and not writes(fake)


def test_an_interruption_right_after_the_lease_write_removes_it(fake: fakes.FakeCluster) -> None:
    """Ctrl-C as the lease's CIB patch returns: the CLI then says "cleaned up", so it is."""

    def interrupt_once(cluster: fakes.FakeCluster) -> None:
        cluster.after_update = None
        raise KeyboardInterrupt

    fake.after_update = interrupt_once
    with pytest.raises(KeyboardInterrupt):
        with leasing.held(fake, 30):
            pytest.fail("the block must not run")
    assert current(fake) is None


def test_an_interruption_while_watching_leaves_the_other_holders_lease(
    fake: fakes.FakeCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    theirs = leasing.acquire(fake, 30, host="node-a", pid=4242)

    def interrupt(_: float) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(time, "sleep", interrupt)
    with pytest.raises(KeyboardInterrupt):
        with leasing.held(fake, 30):
            pytest.fail("the block must not run")
    assert current(fake) == theirs


@pytest.mark.parametrize("text", ["garbage", "host=h;pid=1;token=t;expires=2027-01-15T08:01:00Z"])
def test_an_unreadable_lease_is_held_exit_4_and_nothing_is_written(
    fake: fakes.FakeCluster, text: str
) -> None:
    from pcmkimg import cli

    fake.config = cib.set_ticket_attribute(fake.config, lease.TICKET, lease.ATTRIBUTE, text).new_cib
    with pytest.raises(lease.LeaseUnreadableError) as info:
        with leasing.held(fake, 30):
            pytest.fail("the block must not run")
    assert cli.exit_code(info.value) == cli.LEASE_HELD
    assert repr(text) in info.value.message
    assert info.value.fix == "`crm_ticket --ticket pcmkimg-lease --cleanup` once no pcmkimg runs"
    assert writes(fake) == []
    assert cib.ticket_state(fake.config, lease.TICKET) == {"id": lease.TICKET, "lease": text}


def test_our_lease_overwritten_by_an_unreadable_value_is_lost_not_left_behind(
    fake: fakes.FakeCluster,
) -> None:
    with leasing.held(fake, 30) as holding:
        fake.config = cib.set_ticket_attribute(
            fake.config, lease.TICKET, lease.ATTRIBUTE, "garbage"
        ).new_cib
        with pytest.raises(lease.LeaseLostError, match="now holds 'garbage'"):
            leasing.renew(fake, holding.lease)
    state = cib.ticket_state(fake.config, lease.TICKET)
    assert state is not None and state["lease"] == "garbage"  # not ours to delete


def test_a_foreign_or_old_value_is_unreadable_with_the_fix() -> None:
    for text in ("host=h;pid=1;token=t;expires=2027-01-15T08:01:00Z", "garbage"):
        with pytest.raises(lease.LeaseUnreadableError, match="--cleanup"):
            lease.decode(text)
    bad = lease.Lease("h", 1, "t", 0.01).encode()
    with pytest.raises(lease.LeaseUnreadableError, match="period"):
        lease.decode(bad)


def test_the_period_is_configured_in_pcmkimg_conf(tmp_path: Path) -> None:
    from pcmkimg import wiring
    from pcmkimg.adapters import config
    from pcmkimg.workflows.context import Context

    assert config.parse("").lease_period == lease.DEFAULT_PERIOD == 30
    assert config.parse("[lease]\nperiod = 5\n").lease_period == 5
    for bad in ("0", "x", "99999"):
        with pytest.raises(ConfigError, match=r"\[lease\] period"):
            config.parse(f"[lease]\nperiod = {bad}\n")
    with pytest.raises(ConfigError, match="unknown key 'ttl'"):
        config.parse("[lease]\nttl = 5\n")
    # The CLI's context carries it (no module-global period).
    conf = tmp_path / "pcmkimg.conf"
    conf.write_text("[lease]\nperiod = 5\n")
    env = wiring.Env(False, str(conf), str(tmp_path / "state"))
    assert wiring.live_context(env).lease_period == 5
    assert Context(fakes.FakeCluster({})).lease_period == lease.DEFAULT_PERIOD


def test_held_uses_the_configured_period(capsys, tmp_path: Path) -> None:
    """``[lease] period`` in pcmkimg.conf, through the CLI's context, is the period of the
    lease a command writes (here `guard remove`)."""
    from pcmkimg import cli

    conf = tmp_path / "pcmkimg.conf"
    conf.write_text("[lease]\nperiod = 7\n")
    cluster = fakes.FakeCluster({})
    cluster.config = cib.add_guard(cluster.config, fakes.BUNDLE_ID, fakes.FLOATING).new_cib
    argv = ["--conf", str(conf), "--journal-dir", str(tmp_path / "state")]
    with pytest.raises(SystemExit) as info:
        cli.main([*argv, "guard", "remove", fakes.BUNDLE_ID], context=fakes.cli_context(cluster))
    assert info.value.code == cli.OK, capsys.readouterr().err
    assert cluster.kinds("acquire", "release") == [("acquire", "7"), ("release",)]
    with leasing.held(cluster, 7) as holding:
        written = current(cluster)
        assert holding.period == 7 and written is not None and written.period == 7
