"""How much clock skew between the node running pcmkimg and the DC a restart's bans tolerate,
measured with Pacemaker's own scheduler (crm_simulate, no cluster) on ``cib/shapes-live.xml``.

pcmkimg computes the end of its bans on its own clock (``restart.lifetime_end``: now + the
timeout + max(5 s, a quarter of it)); the DC judges their ``date_expression`` on its clock.
Here the bans of a restart of ``pair-bundle``'s first replica (on its node and on the spare node)
are placed with the end computed at our time T0, and the scheduler runs at DC times
T0 + skew + elapsed (``--set-datetime``): the bans are in force exactly while the DC's clock is
before the end, to the second. So a DC clock *behind* ours only keeps them longer (a killed
run's bans then last the lifetime plus the skew); a DC clock *ahead* of ours by ``skew`` ends
them early, and a restart that takes ``elapsed`` keeps them for all of it only while
``skew < lifetime - elapsed``: at worst (a restart that takes the whole timeout) the margin,
max(5 s, timeout / 4).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from pcmkimg.core import restart
from tests.offline._tools import run, simulate, status
from tests.sandbox.require import need_tools

SHAPES = Path(__file__).resolve().parent / "cib" / "shapes-live.xml"
BUNDLE = "pair-bundle"  # 2 replicas on 3 nodes: the spare node's ban matters too
T0 = datetime(2030, 1, 1, 12, 0, 0, tzinfo=timezone.utc)  # our clock when the bans are placed
HOUR = 3600


@pytest.fixture(autouse=True)
def _tools() -> None:
    need_tools("crm_simulate", "crm_mon", "cibadmin")


def lifetime(timeout: float) -> float:
    """The seconds from T0 to the bans' end, as pcmkimg computes it."""
    end = datetime.strptime(restart.lifetime_end(T0, timeout), "%Y-%m-%d %H:%M:%SZ")
    return (end.replace(tzinfo=timezone.utc) - T0).total_seconds()


def banned(tmp_path: Path, timeout: float) -> tuple[Path, str, str, list[str]]:
    """The saved CIB with the bans of a restart of the bundle's first replica, ended for
    ``timeout`` on our clock at T0: (the CIB, the replica's container, its node, the holds)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    cib = tmp_path / "cib.xml"
    cib.write_bytes(SHAPES.read_bytes())
    state = status(cib)
    first = sorted((r for r in state.replicas_of(BUNDLE) if r.active), key=lambda r: r.node or "")
    replica = first[0]
    assert replica.node is not None
    holds = restart.hold_nodes(state, BUNDLE, replica.node)
    assert holds, "the 2-of-3 bundle has a spare node"
    end = restart.lifetime_end(T0, timeout)
    bans = restart.bans_xml(BUNDLE, [replica.node, *holds], end)
    run("cibadmin", "--modify", "--scope", "constraints", "--xml-text", bans, cib_file=cib)
    return cib, f"{BUNDLE}-podman-{replica.replica}", replica.node, holds


def in_force(tmp_path: Path, timeout: float, dc_seconds: float) -> bool:
    """Whether the DC, its clock at T0 + ``dc_seconds``, enforces the bans: the replica stops
    on its node and starts nowhere (in force), or nothing happens to the bundle (lapsed)."""
    cib, container, node, holds = banned(tmp_path, timeout)
    dc_time = (T0 + timedelta(seconds=dc_seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")
    ops = simulate(cib, tmp_path / "out.xml", "--set-datetime", dc_time)
    ours = {(op, on) for op, on in ops if op.startswith(f"{BUNDLE}-podman-")}
    if ours == set():
        return False
    assert ours == {(f"{container}_stop_0", node)}, ours  # stopped, and started nowhere
    return True


@pytest.mark.parametrize("timeout", [10, 300])
def test_the_ban_is_in_force_exactly_while_the_dcs_clock_is_before_its_end(
    tmp_path: Path, timeout: float
) -> None:
    life = lifetime(timeout)
    assert life == timeout + max(5, timeout / 4)
    assert in_force(tmp_path / "last", timeout, life - 1)
    assert not in_force(tmp_path / "end", timeout, life)


Seconds = Callable[[float, float], float]
"""A figure of the table below from the timeout and the lifetime."""


@pytest.mark.parametrize("timeout", [10, 300])
@pytest.mark.parametrize(
    ("skew", "elapsed", "held"),
    [
        # the DC an hour behind: longer, never shorter
        (lambda t, life: -HOUR, lambda t, life: t, True),
        # synchronised clocks: the whole restart, and the margin
        (lambda t, life: 0, lambda t, life: t, True),
        # the DC ahead by less than the margin, a restart that takes the whole timeout
        (lambda t, life: life - t - 1, lambda t, life: t, True),
        # ... ahead by the margin: the bans end as the restart's timeout does
        (lambda t, life: life - t, lambda t, life: t, False),
        # ahead by nearly the lifetime: in force at the start only
        (lambda t, life: life - 1, lambda t, life: 0, True),
        # ... by the lifetime: never in force
        (lambda t, life: life, lambda t, life: 0, False),
    ],
    ids=["behind-1h", "in-sync", "ahead-margin-1", "ahead-margin", "ahead-life-1", "ahead-life"],
)
def test_the_skew_a_dc_clock_ahead_may_have_is_the_lifetime_minus_the_restarts_duration(
    tmp_path: Path, timeout: float, skew: Seconds, elapsed: Seconds, held: bool
) -> None:
    life = lifetime(timeout)
    ahead, took = skew(timeout, life), elapsed(timeout, life)
    assert in_force(tmp_path, timeout, ahead + took) is held
    assert held is (ahead < life - took)
