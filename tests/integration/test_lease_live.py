"""The update lease on the real sandbox cluster, between real processes."""

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
from pcmkimg.core import cib, lease

REPO = Path(__file__).resolve().parents[2]

# A child process: wait for the start time, try to take the lease, say what happened, hold
# it until stdin closes, then release it (or, with "exit", die without releasing).
CHILD = """
import json, os, sys, time
from pcmkimg.adapters import pacemaker as pm
from pcmkimg.core import lease
start, mode, prefix = float(sys.argv[1]), sys.argv[2], tuple(sys.argv[3:])
runner = pm.Runner(prefix=prefix)
while time.time() < start:
    time.sleep(0.001)
try:
    held = leasing.acquire(runner, ttl=120)
except lease.LeaseHeldError as exc:
    print(json.dumps({"won": False, "holder": exc.holder.pid}), flush=True)
    sys.exit(0)
print(json.dumps({"won": True, "pid": os.getpid(), "token": held.token}), flush=True)
if mode == "exit":
    os._exit(0)
sys.stdin.read()
print(json.dumps({"released": leasing.release(runner, held)}), flush=True)
"""

HOLD = """
import sys, time
from pcmkimg.adapters import pacemaker as pm
from pcmkimg.core import lease
runner = pm.Runner(prefix=tuple(sys.argv[1:]))
with leasing.held(runner, ttl=120):
    print("held", flush=True)
    time.sleep(60)
"""


@pytest.fixture
def runner(cluster_sandbox) -> Iterator[pm.Runner]:
    cl = cluster_sandbox.cluster
    r = pm.Runner(prefix=tuple(cl.node("controller-0").enter()))
    clear(r)
    yield r
    clear(r)


def clear(r: pm.Runner) -> None:
    pm.update_cib(r, lambda c: cib.delete_cluster_property(c, lease.PROPERTY))


def spawn(code: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_two_writes_from_one_read_only_the_first_lands(runner: pm.Runner) -> None:
    config = pm.query_cib(runner)
    first = lease.claim(
        config, lease.Lease("a", 1, "ta", time.time() + 60), time.time(), leasing.pid_alive
    )
    second = lease.claim(
        config, lease.Lease("b", 2, "tb", time.time() + 60), time.time(), leasing.pid_alive
    )
    pm.push(runner, first)
    with pytest.raises(pm.CibChangedError):
        pm.push(runner, second)
    assert lease.read(pm.query_cib(runner)) == lease.Lease("a", 1, "ta", first_expiry(first))


def first_expiry(change: cib.CibChange) -> float:
    found = lease.read(change.new_cib)
    assert found is not None
    return found.expires


def test_racing_processes_on_three_nodes_exactly_one_wins(cluster_sandbox, runner) -> None:
    cl = cluster_sandbox.cluster
    start = time.time() + 2.0
    children = [spawn(CHILD, str(start), "hold", *cl.node(name).enter()) for name in cl.names * 2]
    try:
        results = [json.loads(c.stdout.readline() or "{}") for c in children]  # type: ignore[union-attr]
        winners = [r for r in results if r.get("won")]
        assert len(winners) == 1, (results, [c.stderr.read() for c in children if c.poll()])  # type: ignore[union-attr]
        assert all(r.get("holder") == winners[0]["pid"] for r in results if not r.get("won"))
        held = lease.read(pm.query_cib(runner))
        assert held is not None and held.token == winners[0]["token"]
    finally:
        outs = [c.communicate(timeout=60)[0] for c in children]
    assert sum('"released": true' in out for out in outs) == 1
    assert lease.read(pm.query_cib(runner)) is None


def test_lease_of_a_dead_process_on_this_host_is_taken_over(cluster_sandbox, runner) -> None:
    enter = cluster_sandbox.cluster.node("controller-1").enter()
    child = spawn(CHILD, "0", "exit", *enter)
    out, err = child.communicate(timeout=60)
    dead = json.loads(out.splitlines()[0])
    assert dead["won"], err
    stale = lease.read(pm.query_cib(runner))
    assert stale is not None and stale.pid == dead["pid"]
    mine = leasing.acquire(runner, ttl=30)
    assert lease.read(pm.query_cib(runner)) == mine and mine.pid == os.getpid()
    assert leasing.release(runner, mine)


def test_held_elsewhere_is_refused_expired_is_taken_over(runner: pm.Runner) -> None:
    other = lease.Lease("elsewhere.example", 4242, "tok", float(int(time.time() + 300)))
    pm.update_cib(runner, lambda c: cib.set_cluster_property(c, lease.PROPERTY, other.encode()))
    with pytest.raises(lease.LeaseHeldError, match="pid 4242 on host elsewhere.example"):
        leasing.acquire(runner)
    assert not leasing.release(runner, lease.Lease("me", os.getpid(), "x", 0))
    assert lease.read(pm.query_cib(runner)) == other
    expired = lease.Lease("elsewhere.example", 4242, "tok", float(int(time.time() - 1)))
    pm.update_cib(runner, lambda c: cib.set_cluster_property(c, lease.PROPERTY, expired.encode()))
    mine = leasing.acquire(runner, ttl=60)
    renewed = leasing.renew(runner, mine, ttl=600)
    assert renewed.token == mine.token and renewed.expires > mine.expires
    assert lease.read(pm.query_cib(runner)) == renewed
    assert leasing.release(runner, mine)
    with pytest.raises(lease.LeaseLostError):
        leasing.renew(runner, mine)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_held_lease_is_released_on_a_signal(cluster_sandbox, runner, signum) -> None:
    child = spawn(HOLD, *cluster_sandbox.cluster.node("controller-2").enter())
    assert child.stdout.readline().strip() == "held"  # type: ignore[union-attr]
    assert lease.read(pm.query_cib(runner)) is not None
    child.send_signal(signum)
    child.communicate(timeout=60)
    assert child.returncode != 0
    assert lease.read(pm.query_cib(runner)) is None
