"""Cluster-membership faults in the middle of an update (issue 22, items 1, 2 and 7), live.

Each fault is injected at a seeded moment of ``pcmkimg update SERVICE --image T --all`` on the
sandbox (3 nodes, no fencing: ``stonith-enabled=false``, ``no-quorum-policy`` left at its
default, ``stop``), then the node is brought back, and the test checks what pcmkimg said and
left: its exit code and last line, no ``cli-ban``/pin of ours in the CIB, no lease, the
journal's account, and that a plain re-run converges (exit 0, every node's floating name and
running container on T).

1. **the node being updated leaves the cluster** during its restart: its corosync killed, or
   its link (the namespace's ``eth0``) set down; pcmkimg runs on another node;
2. **the node being updated restarts its cluster stack** (pacemakerd stopped, then started)
   mid-restart; pcmkimg runs on another node;
7. **the lease holder's node is isolated** (its link down) while it updates another node: a
   second pcmkimg on the other side takes the lease over only after the lease period, the
   isolated holder stops (it can't renew without quorum) and never acts after the takeover.

``PCMKIMG_FAULT_SEED`` (printed) picks the moments; ``PCMKIMG_FAULT_MOMENTS=N`` tries N moments
of each fault (default 1: CI's budget) drawn from each fault's list.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from pcmkimg.adapters import pacemaker as pm
from tests.integration.test_fault_injection_live import (
    BUNDLE,
    FLOATING,
    IMAGES,
    SERVICE,
    Run,
    floating_ids,
    journal,
    replica_down,
    rerun,
    runs,
    spawn,
    stack,  # noqa: F401 (a fixture)
)
from tests.integration.test_faults_world_live import converged as converged_after
from tests.integration.test_faults_world_live import leftovers
from tests.sandbox.cluster import LEASE_PERIOD, Cluster, node_env, wait_idle
from tests.sandbox.fixtures import Sandbox, guarded_bundle
from tests.sandbox.proc import alive, start_time, wait_for
from tests.sandbox.proc import spawn as spawn_daemon
from tests.sandbox.state import load

SEED = int(os.environ.get("PCMKIMG_FAULT_SEED", "2201"))
MOMENTS = int(os.environ.get("PCMKIMG_FAULT_MOMENTS", "1"))
ONLY = os.environ.get("PCMKIMG_FAULT_ONLY")  # e.g. "5,6": those moments of each fault
TIMEOUT = 30  # the update's --timeout: a restart that can't finish fails within it

pytestmark = pytest.mark.timeout(300 + 400 * MOMENTS)
guarded = guarded_bundle(BUNDLE, FLOATING, "ns1/svc:1.0")


# --------------------------------------------------------------------------- the faults


def daemons(cl: Cluster, kind: str, node: str) -> list[int]:
    """The live pids of the sandbox's ``kind`` daemon (pacemakerd, corosync) on ``node``."""
    state = load(cl.state.name)
    assert state is not None
    return [
        p.pid
        for p in state.procs
        if p.what == f"{kind} {node}" and alive(p.pid) and start_time(p.pid) == p.start
    ]


def children(pid: int) -> list[int]:
    """The descendants of ``pid`` (pacemakerd's daemons)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            parents[int(entry)] = int(stat[1])
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parents.items() if pp == p]
        found += kids
        todo += kids
    return found


def stack_ended(cl: Cluster, node: str, grace: float) -> None:
    """Wait ``grace`` seconds for the node's pacemakerd to leave on its own (corosync gone),
    then end it and its daemons with SIGKILL (what a node's reboot does to them)."""
    deadline = time.monotonic() + grace
    while daemons(cl, "pacemakerd", node) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in daemons(cl, "pacemakerd", node):
        for kid in children(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(kid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not daemons(cl, "pacemakerd", node), f"{node}'s pacemakerd to end", 30)


def start_daemon(cl: Cluster, kind: str, node: str) -> None:
    """Start the node's corosync or pacemakerd again as the sandbox does, recorded in its
    state (its ``down`` ends it)."""
    n = cl.node(node)
    extra = {}
    if kind == "pacemakerd":
        extra = {"PCMK_logfile": "/var/log/pacemaker/pacemaker.log", "PCMK_logfacility": "none"}
    argv = ["corosync", "-f"] if kind == "corosync" else ["pacemakerd", "-f"]
    p = spawn_daemon([*n.enter(), *argv], log=n.dir / f"{kind}.log", env=node_env(extra))
    state = load(cl.state.name)
    assert state is not None
    state.add_proc(p.pid, f"{kind} {node}")


def signal_daemon(cl: Cluster, kind: str, node: str, sig: int) -> None:
    for pid in daemons(cl, kind, node):
        os.kill(pid, sig)


def link(cl: Cluster, node: str, up: bool) -> None:
    cl.run(node, ["ip", "link", "set", "eth0", "up" if up else "down"])


def online(cl: Cluster, seen_from: str) -> set[str]:
    mon = cl.crm_mon(seen_from)
    return {n.get("name", "") for n in mon.iterfind("nodes/node") if n.get("online") == "true"}


def wait_whole(cl: Cluster, timeout: float = 120) -> None:
    """Every node online, as every node sees it, and the cluster idle."""

    def whole() -> bool:
        try:
            return all(online(cl, n) == set(cl.names) for n in cl.names)
        except Exception:  # a node whose pacemaker is not up yet
            return False

    wait_for(whole, "the 3 nodes online again", timeout, interval=0.5)
    wait_idle(cl, timeout=int(timeout))


@dataclass(frozen=True)
class Fault:
    """One way a node leaves: ``leave(cl, node)`` then, ``out`` seconds later, ``back``."""

    name: str
    leave: Callable[[Cluster, str], None]
    back: Callable[[Cluster, str], None]


def corosync_killed(cl: Cluster, node: str) -> None:
    signal_daemon(cl, "corosync", node, signal.SIGKILL)


def corosync_back(cl: Cluster, node: str) -> None:
    # Pacemaker's daemons leave once corosync is gone; both come back as a node boots them.
    stack_ended(cl, node, grace=10)
    start_daemon(cl, "corosync", node)
    time.sleep(1)
    start_daemon(cl, "pacemakerd", node)


def link_down(cl: Cluster, node: str) -> None:
    link(cl, node, False)


def link_up(cl: Cluster, node: str) -> None:
    link(cl, node, True)


def pacemaker_stopped(cl: Cluster, node: str) -> None:
    signal_daemon(cl, "pacemakerd", node, signal.SIGTERM)


def pacemaker_back(cl: Cluster, node: str) -> None:
    def gone() -> bool:
        return not daemons(cl, "pacemakerd", node)

    wait_for(gone, f"{node}'s pacemakerd to stop", 120, interval=0.2)
    start_daemon(cl, "pacemakerd", node)


COROSYNC = Fault("corosync killed", corosync_killed, corosync_back)
LINK = Fault("link down", link_down, link_up)
PACEMAKER = Fault("pacemaker restarted", pacemaker_stopped, pacemaker_back)


# --------------------------------------------------------------------------- moments


Trigger = Callable[[Run, pm.Runner, str], bool]


def restarting(run: Run, r: pm.Runner, node: str) -> bool:
    return run.said(f"{node}: restarting ")


def stopped(run: Run, r: pm.Runner, node: str) -> bool:
    return run.said(f"{node}: restarting ") and replica_down(r, node)


@dataclass(frozen=True)
class Moment:
    fault: Fault
    when: str
    trigger: Trigger
    delay: tuple[float, float]  # random wait after the trigger
    out: tuple[float, float]  # how long the node stays out


# A link down for less than corosync's token timeout plus its consensus (3 s + 3.6 s in the
# sandbox) is a blip the membership never sees: the node stays out at least 8 s.
LEAVES = [
    Moment(COROSYNC, "restart asked", restarting, (0.0, 0.3), (3, 8)),
    Moment(COROSYNC, "replica stopped", stopped, (0.0, 0.5), (3, 8)),
    Moment(LINK, "restart asked", restarting, (0.0, 0.3), (8, 12)),
    Moment(LINK, "replica stopped", stopped, (0.0, 0.5), (8, 12)),
    # out for longer than the restart's --timeout: the restart fails while the node is away
    Moment(LINK, "replica stopped, out past the timeout", stopped, (0.0, 0.5), (35, 40)),
    Moment(COROSYNC, "restart asked, out past the timeout", restarting, (0.0, 0.3), (35, 40)),
]
REBOOTS = [
    Moment(PACEMAKER, "restart asked", restarting, (0.0, 0.3), (0, 2)),
    Moment(PACEMAKER, "replica stopped", stopped, (0.0, 0.5), (0, 2)),
    Moment(PACEMAKER, "replica starting", stopped, (0.5, 2.0), (0, 2)),
]


# --------------------------------------------------------------------------- checks


@pytest.fixture
def faulty(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """The fault-injection test's ``stack`` (its bundle, no journal, no lease afterwards),
    with every node back in the cluster afterwards, whatever a failed test left."""
    sb, cl, r = request.getfixturevalue("stack")
    yield sb, cl, r
    for node in cl.names:
        cl.run(node, ["ip", "link", "set", "eth0", "up"], check=False)
        for kind in ("corosync", "pacemakerd"):
            if not daemons(cl, kind, node):
                start_daemon(cl, kind, node)
                time.sleep(1)
    wait_whole(cl)


def wait_exit(run: Run, timeout: float) -> int:
    run.child.wait(timeout)
    if run._reader is not None:
        run._reader.join(10)
    return run.child.returncode


def last_line(run: Run) -> str:
    lines = [x.strip() for x in run.lines if x.strip()]
    return lines[-1] if lines else ""


def converged(
    sb: Sandbox, cl: Cluster, r: pm.Runner, node: str, args: tuple[str, ...], want: str
) -> list[str]:
    """Re-run ``args`` on ``node``: the problems, if it did not converge."""
    out = rerun(cl, node, args, timeout=240)
    wait_idle(cl, node)
    return converged_after(cl, r, want, out, node)


def target(sb: Sandbox, cl: Cluster) -> str:
    """The test image the floating name does not name now on controller-0: every run has
    work."""
    now = floating_ids(cl)["controller-0"]
    return next(p for p in IMAGES if sb.images[p].removeprefix("sha256:") != now)


def pick(moments: list[Moment], rng: random.Random) -> list[Moment]:
    if ONLY:
        return [m for i, m in enumerate(moments) if str(i + 1) in ONLY.split(",")]
    if MOMENTS >= len(moments):
        return list(moments) * (MOMENTS // len(moments)) + rng.sample(
            moments, MOMENTS % len(moments)
        )
    return rng.sample(moments, MOMENTS)


ATTEMPTS = 3
"""Updates tried per moment before a moment never reached counts as a failure."""


def node_fault_runs(sb: Sandbox, cl: Cluster, r: pm.Runner, moments: list[Moment], i0: int) -> None:
    rng = random.Random(f"{SEED}-{i0}")
    failures: list[str] = []
    chosen = pick(moments, rng)
    print(f"seed {SEED} (PCMKIMG_FAULT_SEED), {len(chosen)} moment(s)", flush=True)
    victim = "controller-0"  # the first node an --all update restarts
    for moment in chosen:
        # A restart can be over between two looks (CI saw a 0.7 s downtime): the update then
        # ends without the fault; that is not a failure of pcmkimg, so try again (a new
        # target), up to ATTEMPTS times.
        for attempt in range(1, ATTEMPTS + 1):
            path = target(sb, cl)
            ref, want = sb.ref(path), sb.images[path].removeprefix("sha256:")
            args = ("update", SERVICE, "--image", ref, "--all", "--timeout", str(TIMEOUT))
            started = time.monotonic()
            on = "controller-1" if rng.random() < 0.5 else "controller-2"
            run = spawn(cl, on, *args)
            deadline = time.monotonic() + 120
            hit = True
            while not moment.trigger(run, r, victim):
                if run.child.poll() is not None:
                    hit = False
                    break
                assert time.monotonic() < deadline, f"no {moment.when}: {run.text()}"
                time.sleep(0.05)
            if hit:
                break
            assert run.child.returncode == 0, f"the update failed unfaulted: {run.text()}"
            print(f"{moment.when}: the update ended before it (attempt {attempt})", flush=True)
            wait_whole(cl)
        else:
            failures.append(f"{moment.when}: never reached in {ATTEMPTS} updates")
            continue
        time.sleep(rng.uniform(*moment.delay))
        out = rng.uniform(*moment.out)
        moment.fault.leave(cl, victim)
        time.sleep(out)
        moment.fault.back(cl, victim)
        code = wait_exit(run, 300)
        said = last_line(run)
        wait_whole(cl)
        left = leftovers(r)
        events = (list(runs(journal(cl, on)).values()) or [[]])[-1]
        label = (
            f"{moment.fault.name} on {victim} at '{moment.when}' for {out:.1f}s "
            f"(pcmkimg on {on}, to {path})"
        )
        problems = []
        if code not in (0, 3, 6):
            problems.append(f"exit {code}")
        if left:
            problems.append(f"left in the CIB: {left}")
        if code and ("FAILED" not in run.text() and "stopped before" not in said):
            problems.append("no clear line")
        if (events[-1:] == ["done"]) != (code == 0) or (code == 6 and "rolled-back" not in events):
            problems.append(f"the journal does not say what happened: {events}")
        problems += converged(sb, cl, r, on, args, want)
        print(
            f"{label}: exit {code}, said {said!r}; journal {events}; "
            f"{'converged' if not problems else 'FAILED'} in {time.monotonic() - started:.0f}s",
            flush=True,
        )
        if problems:
            failures.append(f"{label}: " + "; ".join(problems) + f"\n{run.text()}")
    assert not failures, "\n".join(failures)


def test_the_node_being_updated_leaves_the_cluster(faulty) -> None:  # type: ignore[no-untyped-def]
    sb, cl, r = faulty
    node_fault_runs(sb, cl, r, LEAVES, 0)


def test_the_node_being_updated_restarts_its_pacemaker(faulty) -> None:  # type: ignore[no-untyped-def]
    sb, cl, r = faulty
    node_fault_runs(sb, cl, r, REBOOTS, 1)


# --------------------------------------------------------------------------- item 7

ACTS = (" now names ", ": restarting ", "rolling back", "rolled back", ": healthy on ")
ISOLATIONS = [
    ("lease taken", lambda run: run.said("lease taken"), (0.0, 0.5)),
    ("first restart asked", lambda run: run.said("controller-0: restarting "), (0.0, 0.3)),
    ("first restart under way", lambda run: run.said("controller-0: restarting "), (1.0, 3.0)),
]


def test_the_lease_holders_node_is_isolated(faulty) -> None:  # type: ignore[no-untyped-def]
    """The holder updates from controller-2, which is cut off mid-update; a second pcmkimg on
    controller-1 updates controller-0 and controller-1 (the reachable ones)."""
    sb, cl, r = faulty
    rng = random.Random(f"{SEED}-lease")
    chosen = [m for i, m in enumerate(ISOLATIONS) if ONLY and str(i + 1) in ONLY.split(",")]
    chosen = chosen or rng.sample(ISOLATIONS, min(MOMENTS, len(ISOLATIONS)))
    print(f"seed {SEED} (PCMKIMG_FAULT_SEED), {len(chosen)} moment(s)", flush=True)
    failures: list[str] = []
    for when, trigger, delay in chosen:
        path = target(sb, cl)
        ref, want = sb.ref(path), sb.images[path].removeprefix("sha256:")
        base = ("update", SERVICE, "--image", ref, "--timeout", str(TIMEOUT))
        started = time.monotonic()
        holder = spawn(cl, "controller-2", *base, "--all")
        deadline = time.monotonic() + 120
        while not trigger(holder):
            assert holder.child.poll() is None, f"the update ended first: {holder.text()}"
            assert time.monotonic() < deadline, f"no {when}: {holder.text()}"
            time.sleep(0.05)
        time.sleep(rng.uniform(*delay))
        link(cl, "controller-2", False)
        cut = time.monotonic()
        wait_for(
            lambda: "controller-2" not in online(cl, "controller-1"),
            "controller-2 lost",
            60,
            interval=0.2,
        )
        t0 = time.monotonic()
        taker = spawn(cl, "controller-1", *base, "--node", "controller-0", "--node", "controller-1")
        took: float | None = None
        after_cut = 0.0
        acted_after: list[str] = []
        mark = 0
        while taker.child.poll() is None or holder.child.poll() is None:
            if took is None and taker.said("lease taken"):
                took, after_cut = time.monotonic() - t0, time.monotonic() - cut
                mark = len(holder.lines)
            assert time.monotonic() - t0 < 400, f"{holder.text()}\n---\n{taker.text()}"
            time.sleep(0.05)
        if took is None and taker.said("lease taken"):
            took, after_cut = time.monotonic() - t0, time.monotonic() - cut
            mark = len(holder.lines)
        acted_after = [x for x in holder.lines[mark:] if any(a in x for a in ACTS)] if took else []
        link(cl, "controller-2", True)
        wait_exit(holder, 30)
        wait_exit(taker, 30)
        wait_whole(cl)
        left = leftovers(r)
        label = f"controller-2 (holder) isolated at '{when}'"
        problems = []
        if took is None:
            problems.append(
                f"the second pcmkimg never took the lease (exit {taker.child.returncode})"
            )
        elif took < LEASE_PERIOD:
            problems.append(f"the lease was taken over after {took:.1f}s < its period")
        if acted_after:
            problems.append(f"the isolated holder acted after the takeover: {acted_after}")
        if holder.child.returncode == 0:
            problems.append("the isolated holder finished its update")
        told = (list(runs(journal(cl, "controller-2")).values()) or [[]])[-1]
        if "done" in told or "rolled-back" in told:
            problems.append(f"the isolated holder's journal: {told}")
        if left:
            problems.append(f"left in the CIB: {left}")
        problems += converged(sb, cl, r, "controller-1", (*base, "--all"), want)
        print(
            f"{label}: holder exit {holder.child.returncode} ({last_line(holder)!r}); "
            f"journal {told}; "
            f"second run exit {taker.child.returncode} ({last_line(taker)!r}), lease taken "
            f"{took if took is None else round(took, 1)}s after it started "
            f"({after_cut:.0f}s after the cut); "
            f"{'converged' if not problems else 'FAILED'} in {time.monotonic() - started:.0f}s",
            flush=True,
        )
        if problems:
            failures.append(
                f"{label}: " + "; ".join(problems) + f"\n{holder.text()}\n---\n{taker.text()}"
            )
    assert not failures, "\n".join(failures)
