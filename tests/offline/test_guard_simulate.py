"""The guard's wiring, checked by Pacemaker's own scheduler (crm_simulate, no cluster).

A guard clone ordered before a bundle and colocated with it, as ``pcmkimg.core.cib.add_guard``
writes it, on the 3-replica ``haproxy-bundle`` of the base fixture. crm_simulate does not run
agents, so the guard agent need not be installed.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path

import pytest

from pcmkimg.core import cib as C
from tests import fixtures
from tests.offline._tools import NODES, converge, run, simulate, status, write
from tests.sandbox.require import need_tools

BUNDLE = "haproxy-bundle"
GUARD = "haproxy-bundle-guard"


@pytest.fixture(autouse=True)
def _tools() -> None:
    need_tools("crm_simulate", "crm_attribute", "crm_mon")


def guarded_cib(tmp_path: Path, *, interleave: bool = True) -> Path:
    base = fixtures.cib("base.xml")
    tree = C.add_guard(base, BUNDLE, "cluster.common.tag/haproxy:pcmklatest").new_cib
    if not interleave:
        tree = C.set_bundle_meta(tree, BUNDLE, "interleave", None).new_cib
    tree.set("dc-uuid", "1")
    return write(tmp_path / "cib.xml", tree)


def up(*nodes: str) -> list[str]:
    return [arg for node in nodes for arg in ("-u", node)]


def test_guard_start_rc5_keeps_only_that_replica_off(tmp_path: Path) -> None:
    cib = guarded_cib(tmp_path)
    failed = tmp_path / "failed.xml"
    simulate(cib, failed, *up(*NODES), "-F", f"{GUARD}_start_0@controller-1=5")
    # A real cluster sets fail-count INFINITY on a failed start (start-failure-is-fatal).
    run(
        "crm_attribute", "-N", "controller-1", "-n", f"fail-count-{GUARD}#start_0",
        "-v", "INFINITY", "-l", "reboot", cib_file=failed,
    )  # fmt: skip
    final = converge(failed, tmp_path / "final.xml", prefix=BUNDLE)
    st = status(final)
    placed = {r.node for r in st.replicas_of(BUNDLE) if r.active}
    assert placed == {"controller-0", "controller-2"}
    assert st.replica_on(BUNDLE, "controller-1") is None
    (failure,) = st.failures_of([GUARD])
    assert (failure.node, failure.exitcode, failure.degraded) == ("controller-1", 5, False)


def restarted_replicas(tmp_path: Path, *, interleave: bool) -> set[str]:
    """Nodes whose bundle container a guard monitor failure on controller-1 stops."""
    running = converge(
        guarded_cib(tmp_path, interleave=interleave),
        tmp_path / "run.xml",
        *up(*NODES),
        prefix=BUNDLE,
    )
    assert {r.node for r in status(running).replicas_of(BUNDLE) if r.active} == set(NODES)
    ops = simulate(running, tmp_path / "recover.xml", "-i", f"{GUARD}_monitor_30000@controller-1=1")
    assert any(
        key.startswith(GUARD) and key.endswith("_stop_0") and node == "controller-1"
        for key, node in ops
    )
    return {
        node for key, node in ops if key.startswith(f"{BUNDLE}-podman-") and key.endswith("_stop_0")
    }


def test_interleave_confines_a_guard_failure_to_its_node(tmp_path: Path) -> None:
    assert restarted_replicas(tmp_path, interleave=True) == {"controller-1"}


def test_without_interleave_a_guard_failure_restarts_every_replica(tmp_path: Path) -> None:
    assert restarted_replicas(tmp_path, interleave=False) == set(NODES)


# --------------------------------------------------------------------------- guard add, run


class SimulatedCluster:
    """The cluster port of ``guard add`` on a CIB file: each CIB change is followed by the
    transition Pacemaker's scheduler computes for it (crm_simulate), a wait converges. Every
    resource action of every transition is kept, in order. The update lease is written into
    the CIB like any change (one change at a time: it renews from a thread)."""

    offline = False

    def __init__(self, tmp_path: Path, cib_file: Path) -> None:
        self.dir = tmp_path
        self.current = cib_file
        self.ops: list[tuple[str, str]] = []
        self.steps = 0
        self.lock = threading.RLock()

    def _next(self, what: str) -> Path:
        self.steps += 1
        return self.dir / f"{self.steps:02d}-{what}.xml"

    def query_cib(self) -> C.Element:
        return C.parse_cib(self.current.read_bytes())

    def update_cib(self, edit) -> C.CibChange:  # type: ignore[no-untyped-def]
        with self.lock:
            change = edit(self.query_cib())
            if not change.empty:
                edited = write(self._next("edited"), change.new_cib)
                out = self._next("transition")
                self.ops += sorted(simulate(edited, out))
                self.current = out
            return change

    def wait(self, timeout: float) -> None:
        with self.lock:
            out = self._next("settled")
            src = self.current
            for n in range(6):
                step = out.with_name(f"{out.stem}-{n}.xml")
                ops = simulate(src, step)
                self.ops += sorted(ops)
                src = step
                if not [k for k, _ in ops if k.startswith(BUNDLE)]:
                    break
            self.current = src

    def read_cluster(self):  # type: ignore[no-untyped-def]
        from pcmkimg.core import plan

        mon = C.parse_crm_mon(run("crm_mon", "-1", "--output-as=xml", cib_file=self.current).stdout)
        return plan.Cluster(self.query_cib(), mon, C.cluster_status(mon))

    def replica_stops(self) -> list[tuple[str, str]]:
        return [
            (k, n)
            for k, n in self.ops
            if k.startswith(f"{BUNDLE}-podman-") and k.endswith("_stop_0")
        ]


@pytest.fixture
def simulated(tmp_path: Path) -> SimulatedCluster:
    """A running haproxy-bundle guarded with its own floating name, as guard add leaves it."""
    running = converge(guarded_cib(tmp_path), tmp_path / "run.xml", *up(*NODES), prefix=BUNDLE)
    return SimulatedCluster(tmp_path, running)


def test_guard_add_with_another_name_restarts_no_replica(simulated: SimulatedCluster) -> None:
    """Issue 12.2: changing an existing guard's image restarts the guard only."""
    from pcmkimg.core import lease
    from pcmkimg.workflows.context import Context
    from pcmkimg.workflows.guard import add

    new = "cluster.common.tag/haproxy2:pcmklatest"
    said: list[str] = []
    ctx = Context(simulated, say=said.append)  # type: ignore[arg-type]
    report = add.run(ctx, add.AddRequest(BUNDLE, new, timeout=60))
    assert report.changed
    assert simulated.replica_stops() == []
    # The guard itself did restart with the new name, on every node.
    guard_starts = {n for k, n in simulated.ops if k.startswith(GUARD) and k.endswith("_start_0")}
    assert guard_starts == set(NODES)
    final_cib = simulated.query_cib()
    final = C.bundle(final_cib, BUNDLE)
    assert final.guard is not None and final.guard.image == new and final.guard_wired
    assert lease.read(final_cib) is None  # held for the changes, released
    st = status(simulated.current)
    assert {r.node for r in st.replicas_of(BUNDLE) if r.active} == set(NODES)


def test_a_guarded_promotable_bundle_starts_its_inner_instances(tmp_path: Path) -> None:
    """redis-bundle is promotable with an inner resource. Guarded, the scheduler starts the
    inner instances on the guest nodes, and a guard that cannot start on controller-1 keeps
    only that replica off. Pacemaker 3.0 stopped every inner instance when the colocation was
    INFINITY ("redis:N cannot run because it cannot interleave with any instance of
    redis-bundle-guard-clone"); 2.1 did not."""
    promotable, guard = "redis-bundle", "redis-bundle-guard"
    tree = C.add_guard(fixtures.cib("base.xml"), promotable, "cluster.common.tag/redis:pcmklatest")
    tree.new_cib.set("dc-uuid", "1")
    cib = write(tmp_path / "cib.xml", tree.new_cib)
    ops = simulate(cib, tmp_path / "run.xml", *up(*NODES))
    inner = {n for k, n in ops if re.fullmatch(r"redis:\d+_start_0", k)}
    assert inner == {f"{promotable}-{i}" for i in range(3)}, sorted(ops)
    containers = {n for k, n in ops if re.fullmatch(rf"{promotable}-podman-\d+_start_0", k)}
    assert containers == set(NODES)

    failed = tmp_path / "failed.xml"
    simulate(cib, failed, *up(*NODES), "-F", f"{guard}_start_0@controller-1=5")
    run(
        "crm_attribute", "-N", "controller-1", "-n", f"fail-count-{guard}#start_0",
        "-v", "INFINITY", "-l", "reboot", cib_file=failed,
    )  # fmt: skip
    final = converge(failed, tmp_path / "final.xml", prefix=f"{promotable}-podman-")
    placed = {r.node for r in status(final).replicas_of(promotable) if r.active}
    assert placed == {"controller-0", "controller-2"}
