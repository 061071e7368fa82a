"""The lease's renewals keep out of a restart's way (issue 23): each lease write is a change of
crm_config, which keeps an idle DC from acting for a second; during a restart a renewal that
falls due waits for a start or a stop in flight, at most half a period.

The pure rule (core.lease.renewal_wait, action_in_flight) on plain values; the Keeper with
tests.fakes.FakeCluster (real threads, short periods), whose ``busy`` answers are scripted.
"""

from __future__ import annotations

import time

import pytest

from pcmkimg.adapters import lease as leasing
from pcmkimg.adapters import pacemaker as pm
from pcmkimg.core import cib, lease
from tests import fakes
from tests.unit.test_pacemaker import runner

EVERY = 10.0


@pytest.mark.parametrize("quiet", [False, True])
def test_a_renewal_not_yet_due_waits_for_its_interval(quiet: bool) -> None:
    assert lease.renewal_wait(4.0, EVERY, quiet=quiet, busy=None) == 6.0
    assert lease.renewal_wait(4.0, EVERY, quiet=quiet, busy=True) == 6.0


def test_outside_a_restart_a_due_renewal_is_written_at_once_whatever_the_cluster_does() -> None:
    for busy in (None, False, True):
        assert lease.renewal_wait(EVERY, EVERY, quiet=False, busy=busy) == 0.0
        assert lease.renewal_wait(25.0, EVERY, quiet=False, busy=busy) == 0.0


def test_during_a_restart_a_due_renewal_waits_for_an_action_in_flight() -> None:
    assert lease.renewal_wait(11.0, EVERY, quiet=True, busy=True) == 0.0
    # Not looked at yet, or nothing in flight: look again shortly.
    assert lease.renewal_wait(11.0, EVERY, quiet=True, busy=None) == lease.LOOK
    assert lease.renewal_wait(11.0, EVERY, quiet=True, busy=False) == lease.LOOK
    # Never past the latest moment: the look before it is shortened to end there.
    assert lease.renewal_wait(14.9, EVERY, quiet=True, busy=False) == pytest.approx(0.1)
    assert lease.renewal_wait(15.0, EVERY, quiet=True, busy=False) == 0.0
    assert lease.LATEST_RENEWAL * EVERY < lease.RENEWALS_PER_PERIOD * EVERY  # within a period


def mon_with_role(role: str) -> cib.Element:
    return cib.parse_crm_mon(
        "<pacemaker-result><resources><bundle id='b'><replica id='0'>"
        f"<resource id='b-podman-0' role='{role}' active='true'/>"
        "</replica></bundle><resource id='other' role='Started' active='true'/>"
        "</resources></pacemaker-result>"
    )


@pytest.mark.parametrize(
    ("role", "in_flight"),
    [("Starting", True), ("Stopping", True), ("Started", False), ("Stopped", False)],
)
def test_a_start_or_a_stop_in_crm_mon_is_an_action_in_flight(role: str, in_flight: bool) -> None:
    assert lease.action_in_flight(mon_with_role(role)) is in_flight


def test_the_port_asks_crm_mon() -> None:
    xml = (
        "<pacemaker-result><resources><resource id='x' role='Stopping' active='true'/>"
        "</resources></pacemaker-result>"
    )
    r = runner({("crm_mon",): [(0, xml, "")]})
    assert pm.Pacemaker(r).busy() is True


def renewals(cluster: fakes.FakeCluster) -> int:
    return len(cluster.kinds("renew"))


def test_the_keeper_holds_a_due_renewal_during_a_restart_until_an_action_is_in_flight() -> None:
    fake = fakes.FakeCluster({})
    fake.busy_answers = [False]
    with leasing.held(fake, 6.0) as holding:  # renewed every 2 s, at the latest after 3 s
        taken = time.monotonic()
        with holding.quiet():
            time.sleep(2.3)  # due at 2 s, nothing in flight
            assert renewals(fake) == 0
            assert fake.busy_looks >= 1
            fake.busy_answers = [True]
            while renewals(fake) == 0 and time.monotonic() - taken < 4:
                time.sleep(0.01)
            assert renewals(fake) == 1
            assert time.monotonic() - taken < 2.9  # at the next look, before the latest
        assert holding.lease.renewals == 1


def test_the_keeper_renews_at_the_latest_after_half_a_period_during_a_restart() -> None:
    fake = fakes.FakeCluster({})
    fake.busy_answers = [False]
    with leasing.held(fake, 0.6) as holding, holding.quiet():
        started = time.monotonic()
        while renewals(fake) == 0 and time.monotonic() - started < 2:
            time.sleep(0.01)
        waited = time.monotonic() - started
        assert renewals(fake) == 1
        assert 0.25 <= waited < 0.6  # 0.3 s (1.5 x 0.2 s) after the take, within the period
        holding.check()  # still safely ours


def test_outside_a_restart_the_keeper_renews_without_looking_at_the_cluster() -> None:
    fake = fakes.FakeCluster({})
    with leasing.held(fake, 0.6):
        time.sleep(0.5)
    assert renewals(fake) >= 2
    assert fake.busy_looks == 0


def test_a_renewal_held_back_is_written_as_soon_as_the_restart_ends() -> None:
    fake = fakes.FakeCluster({})
    fake.busy_answers = [False]
    with leasing.held(fake, 3.0) as holding:  # renewed every 1 s, at the latest 1.5 s
        with holding.quiet():
            time.sleep(1.1)
            assert renewals(fake) == 0
        time.sleep(0.1)
        assert renewals(fake) == 1


class Blind(fakes.FakeCluster):
    """A cluster port whose look at the actions in flight fails."""

    def busy(self) -> bool:
        raise RuntimeError("crm_mon printed nothing")


def test_a_look_that_fails_holds_the_renewal_until_its_latest_moment_only() -> None:
    fake = Blind({})
    with leasing.held(fake, 0.6) as holding, holding.quiet():
        time.sleep(0.5)
        assert renewals(fake) >= 1  # at 0.3 s, the latest
        holding.check()
