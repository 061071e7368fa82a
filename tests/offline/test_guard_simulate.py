"""The guard's wiring, checked by Pacemaker's own scheduler (crm_simulate, no cluster).

A guard clone ordered before a bundle and colocated with it, as ``pcmkimg.core.cib.add_guard``
writes it, on the 3-replica ``haproxy-bundle`` of the base fixture. crm_simulate does not run
agents, so the guard agent need not be installed.
"""

from __future__ import annotations

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
