"""The bench's own rules (issue 23): ``--only``'s groups, the restart step's one-mode check,
the fallbacks for a downtime podman's events miss (the DC's record, a container's state)."""

from __future__ import annotations

import pytest

from bench import timeline as tl
from bench.__main__ import GROUPS, _iso, groups, unimodal

STOP = "controld  [1] (execute_rsc_action) \tnotice: Initiating stop operation b-podman-0_stop_0"


def test_only_names_groups_in_their_order_and_refuses_others() -> None:
    assert groups(None) == GROUPS
    assert groups("restart") == ("restart",)
    assert groups("offline, agents") == ("agents", "offline")
    with pytest.raises(ValueError, match="unknown group.*restarts"):
        groups("restarts")


def test_the_restart_step_is_one_mode_when_its_max_is_within_a_quarter_of_its_median() -> None:
    fast = [2.4, 2.5, 2.5, 2.6, 2.7]
    assert unimodal(fast) == (pytest.approx(2.7 / 2.5), True)
    slow_mode = [2.7, 2.7, 2.8, 4.3, 4.4]  # issue 23: two runs 1.6 s longer
    ratio, one_mode = unimodal(slow_mode)
    assert ratio == pytest.approx(4.4 / 2.8) and not one_mode


def line(stamp: str, text: str) -> str:
    return f"Dec 02 {stamp} controller-2 pacemaker-{text}"


LOG = "\n".join(
    [
        line("01:00:00.100", STOP.replace("b-podman-0", "b-podman-1")),  # another replica
        line("01:00:01.000", STOP),
        line(
            "01:00:01.420",
            "controld  [1] (process_graph_event) \tinfo: Transition 6 action 7 "
            "(b-podman-0_stop_0 on controller-0) confirmed: ok",
        ),
        line(
            "01:00:01.950",
            "controld  [1] (process_graph_event) \tinfo: Transition 7 action 6 "
            "(b-podman-0_start_0 on controller-0) confirmed: ok",
        ),
    ]
)


def test_the_dc_record_gives_a_replica_downtime_from_its_stop_to_its_start() -> None:
    events = tl.dc_events(LOG, 2026)
    since = events[0].when
    assert tl.replica_downtime(events, "b-podman-0", since) == pytest.approx(0.95)
    assert tl.replica_downtime(events, "b-podman-1", since) is None  # never started again
    assert tl.replica_downtime(events, "b-podman-0", events[-1].when) is None  # none after


def test_podman_times_are_read_to_the_nanosecond_in_utc() -> None:
    started = _iso("2026-12-02T01:53:04.123456789Z")
    finished = _iso("2026-12-02T02:53:03.923456789+01:00")
    assert started - finished == pytest.approx(0.2, abs=1e-6)
    assert _iso("2026-12-02T01:53:04Z") == pytest.approx(started - 0.123456789, abs=1e-6)
