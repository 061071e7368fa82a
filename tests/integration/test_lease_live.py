"""The update lease on the real sandbox cluster, between real processes on different nodes:
taken by compare-and-swap, renewed from a background thread, judged by the reader's own clock,
taken over one period after its holder died (``kill -9``), released on every signal."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pcmkimg.adapters import lease as leasing
from pcmkimg.adapters import pacemaker as pm
from pcmkimg.adapters.errors import CibChangedError
from pcmkimg.core import cib, lease
from tests.sandbox.cluster import LEASE_PERIOD, node_env, wait_idle
from tests.sandbox.fixtures import Sandbox, guarded_bundle

REPO = Path(__file__).resolve().parents[2]
BUNDLE = "lease-bundle"
SERVICE = "lease"
FLOATING = "cluster.common.tag/lease:pcmklatest"

pytestmark = pytest.mark.timeout(300)
guarded = guarded_bundle(BUNDLE, FLOATING, "ns1/svc:1.0")

# A child process: wait for the start time, try to take the lease (no watching: a lease seen
# for the first time is held), say what happened, hold it until stdin closes, then release it
# (or, with "exit", die without releasing).
CHILD = """
import json, os, sys, time
from pcmkimg.adapters import lease as leasing
from pcmkimg.adapters import pacemaker as pm
from pcmkimg.core import lease
start, mode, prefix = float(sys.argv[1]), sys.argv[2], tuple(sys.argv[3:])
cluster = pm.Pacemaker(pm.Runner(prefix=prefix))
while time.time() < start:
    time.sleep(0.001)
try:
    held = leasing.acquire(cluster, 120)
except lease.LeaseHeld as exc:
    print(json.dumps({"won": False, "holder": exc.holder.pid}), flush=True)
    sys.exit(0)
print(json.dumps({"won": True, "pid": os.getpid(), "token": held.token}), flush=True)
if mode == "exit":
    os._exit(0)
sys.stdin.read()
print(json.dumps({"released": leasing.release(cluster, held)}), flush=True)
"""

HOLD = """
import sys, time
from pcmkimg.adapters import lease as leasing
from pcmkimg.adapters import pacemaker as pm
cluster = pm.Pacemaker(pm.Runner(prefix=tuple(sys.argv[1:])))
with leasing.held(cluster, 2.0):
    print("held", flush=True)
    time.sleep(60)
"""


@pytest.fixture
def runner(cluster_sandbox: Sandbox) -> Iterator[pm.Runner]:
    cl = cluster_sandbox.cluster
    assert cl is not None
    r = pm.Runner(prefix=tuple(cl.node("controller-0").enter()))
    clear(r)
    yield r
    clear(r)


def clear(r: pm.Runner) -> None:
    pm.update_cib(r, lambda c: lease.erase(c))


def spawn(code: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def current(r: pm.Runner) -> lease.Lease | None:
    return lease.read(pm.query_cib(r))


def test_two_writes_from_one_read_only_the_first_lands(runner: pm.Runner) -> None:
    config = pm.query_cib(runner)
    first = lease.claim(config, lease.Lease("a", 1, "ta"), time.monotonic(), leasing.pid_alive)
    second = lease.claim(config, lease.Lease("b", 2, "tb"), time.monotonic(), leasing.pid_alive)
    pm.push(runner, first)
    with pytest.raises(CibChangedError):
        pm.push(runner, second)
    assert current(runner) == lease.Lease("a", 1, "ta")


def test_racing_processes_on_three_nodes_exactly_one_wins(cluster_sandbox, runner) -> None:
    cl = cluster_sandbox.cluster
    start = time.time() + 2.0
    children = [spawn(CHILD, str(start), "hold", *cl.node(name).enter()) for name in cl.names * 2]
    try:
        results = [json.loads(c.stdout.readline() or "{}") for c in children]  # type: ignore[union-attr]
        winners = [r for r in results if r.get("won")]
        assert len(winners) == 1, (results, [c.stderr.read() for c in children if c.poll()])  # type: ignore[union-attr]
        assert all(r.get("holder") == winners[0]["pid"] for r in results if not r.get("won"))
        held = current(runner)
        assert held is not None and held.token == winners[0]["token"]
    finally:
        outs = [c.communicate(timeout=60)[0] for c in children]
    assert sum('"released": true' in out for out in outs) == 1
    assert current(runner) is None


def test_lease_of_a_dead_process_on_this_host_is_taken_over_at_once(
    cluster_sandbox, runner
) -> None:
    enter = cluster_sandbox.cluster.node("controller-1").enter()
    child = spawn(CHILD, "0", "exit", *enter)
    out, err = child.communicate(timeout=60)
    dead = json.loads(out.splitlines()[0])
    assert dead["won"], err
    stale = current(runner)
    assert stale is not None and stale.pid == dead["pid"]
    cluster = pm.Pacemaker(runner)
    mine = leasing.acquire(cluster, 30)
    assert current(runner) == mine and mine.pid == os.getpid()
    assert leasing.release(cluster, mine)


def test_held_elsewhere_is_refused_then_taken_over_once_seen_unchanged_for_its_period(
    runner: pm.Runner,
) -> None:
    other = lease.Lease("elsewhere.example", 4242, "tok", 2.0, 7, float(int(time.time() + 3600)))
    pm.update_cib(
        runner, lambda c: cib.set_ticket_attribute(c, lease.TICKET, lease.ATTRIBUTE, other.encode())
    )
    cluster = pm.Pacemaker(runner)
    with pytest.raises(lease.LeaseHeld, match="pid 4242 on host elsewhere.example"):
        leasing.acquire(cluster)
    assert not leasing.release(cluster, lease.Lease("me", os.getpid(), "x"))
    assert current(runner) == other
    started = time.monotonic()
    mine = leasing.acquire(cluster, 30, watch=True)
    assert 2.0 < time.monotonic() - started < 2.0 + 3.0
    renewed = leasing.renew(cluster, mine)
    assert renewed.token == mine.token and renewed.renewals == mine.renewals + 1
    assert current(runner) == renewed
    assert leasing.release(cluster, mine)
    with pytest.raises(lease.LeaseLostError):
        leasing.renew(cluster, mine)


@pytest.mark.parametrize(
    "signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT], ids=lambda s: s.name
)
def test_held_lease_is_renewed_and_released_on_a_signal(cluster_sandbox, runner, signum) -> None:
    child = spawn(HOLD, *cluster_sandbox.cluster.node("controller-2").enter())
    assert child.stdout.readline().strip() == "held"  # type: ignore[union-attr]
    first = current(runner)
    assert first is not None
    time.sleep(2.0)
    later = current(runner)
    assert later is not None and later.token == first.token and later.renewals >= 2
    child.send_signal(signum)
    child.communicate(timeout=60)
    assert child.returncode != 0
    assert current(runner) is None


# --------------------------------------------------------------------------- kill -9


def spawn_pcmkimg(cl, node: str, *args: str) -> subprocess.Popen[str]:  # type: ignore[no-untyped-def]
    """``pcmkimg ARGS`` on ``node`` in the background (nsenter execs python in place: the
    child's PID is pcmkimg's)."""
    env = node_env({"PCMKIMG_CONF": str(cl.conf), "PYTHONPATH": str(REPO)})
    argv = [*cl.node(node).enter(), sys.executable, "-m", "pcmkimg", *args]
    return subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def test_a_holder_killed_on_one_node_stops_blocking_another_within_the_period(
    guarded: Sandbox,
) -> None:
    """``kill -9`` of an update holding the lease on controller-0: an update started at once
    from controller-1 watches the dead lease, takes it over within one period (the sandbox's
    ``[lease] period``), and finishes the job."""
    cl = guarded.cluster
    assert cl is not None
    r = pm.Runner(prefix=tuple(cl.node("controller-1").enter()))
    target = guarded.ref("ns1/svc:1.1")
    first = spawn_pcmkimg(cl, "controller-0", "update", SERVICE, "--image", target, "--all")
    try:
        deadline = time.monotonic() + 60
        while (held := current(r)) is None or held.host != "controller-0":
            assert first.poll() is None, first.communicate()
            assert time.monotonic() < deadline, "the first update never took the lease"
            time.sleep(0.05)
        time.sleep(LEASE_PERIOD / 2)  # renewed at least once by its thread, mid-update
        renewed = current(r)
        assert renewed is not None and renewed.token == held.token and renewed.renewals >= 1
        os.kill(first.pid, signal.SIGKILL)
        killed = time.monotonic()
        first.communicate(timeout=30)
    finally:
        if first.poll() is None:
            first.kill()
            first.communicate()
    dead = current(r)
    assert dead is not None and dead.host == "controller-0"  # left behind by the kill

    second = spawn_pcmkimg(cl, "controller-1", "update", SERVICE, "--image", target, "--all")
    assert second.stderr is not None
    lines: list[str] = []
    for line in second.stderr:
        lines.append(line)
        if line.startswith("lease taken"):
            taken = time.monotonic() - killed
            break
    else:
        pytest.fail(f"the second update never took the lease: {''.join(lines)}")
    rest, err = second.communicate(timeout=240)
    assert second.returncode == 0, "".join(lines) + err
    assert LEASE_PERIOD * 0.9 < taken < LEASE_PERIOD + 5, taken
    said = "".join(lines)
    assert "held by pid" in said and "on controller-0: watching it for up to" in said
    assert current(r) is None
    wait_idle(cl, "controller-1")
    assert not cib.cli_constraints(pm.query_cib(r))
    new_id = guarded.images["ns1/svc:1.1"].removeprefix("sha256:")
    for node in cl.names:
        out = cl.podman(node, "image", "inspect", "--format", "{{.Id}}", FLOATING)
        assert out.stdout.strip() == new_id, node
