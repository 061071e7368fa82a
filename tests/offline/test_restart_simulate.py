"""The in-place restart's constraints, checked by Pacemaker's own scheduler (crm_simulate, no
cluster), on a CIB saved from the sandbox cluster (``cib/shapes-live.xml``: a 2-of-3 bundle
``pair-bundle``, a 3-of-3 ``three-bundle`` and a promotable ``stateful-bundle``, guards wired,
``resource-stickiness=INFINITY``).

The restart's steps, each simulated until nothing is left to do for the bundle's containers:
our bans placed (on the node and on every node without a replica) -> the replica stops and
starts nowhere; the ban on the node removed -> it starts on the node; the others removed ->
nothing moves. A ban on the node alone (``crm_resource --ban``/``--restart``) moves the
2-of-3 replica to the free node: the defect this avoids. A ban past its lifetime does nothing.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from pcmkimg.core import cib as C
from pcmkimg.core import restart
from tests.offline._tools import converge, run, simulate, status
from tests.sandbox.require import need_tools

SHAPES = Path(__file__).resolve().parent / "cib" / "shapes-live.xml"


@pytest.fixture(autouse=True)
def _tools() -> None:
    need_tools("crm_simulate", "crm_resource", "crm_mon", "cibadmin")


def saved(tmp_path: Path) -> Path:
    cib = tmp_path / "cib.xml"
    cib.write_bytes(SHAPES.read_bytes())
    return cib


def where(cib: Path, bundle: str, index: int) -> str | None:
    """The node where replica ``index`` of ``bundle`` is active in ``cib`` (None: nowhere)."""
    mine = [r for r in status(cib).replicas_of(bundle) if r.replica == index]
    return mine[0].node if mine and mine[0].active else None


def settle(cib: Path, out: Path, bundle: str) -> Path:
    return converge(cib, out, prefix=f"{bundle}-podman-")


def end(minutes: float) -> str:
    return restart.lifetime_end(datetime.now(timezone.utc) + timedelta(minutes=minutes), 0, 0)


def place(cib: Path, bundle: str, nodes: list[str], until: str) -> None:
    run(
        "cibadmin", "--modify", "--scope", "constraints", "--xml-text",
        restart.bans_xml(bundle, nodes, until), cib_file=cib,
    )  # fmt: skip


def remove(cib: Path, bundle: str, node: str) -> None:
    xml = f'<rsc_location id="{restart.ban_id(bundle, node)}"/>'
    run("cibadmin", "--delete", "--scope", "constraints", "--xml-text", xml, cib_file=cib)


def replica_on_first_node(cib: Path, bundle: str) -> tuple[int, str, list[str]]:
    state = status(cib)
    replicas = [r for r in state.replicas_of(bundle) if r.active and r.node]
    assert replicas, f"no active replica of {bundle} in the fixture"
    first = sorted(replicas, key=lambda r: r.node or "")[0]
    assert first.node is not None
    return first.replica, first.node, restart.hold_nodes(state, bundle, first.node)


def test_the_fixture_has_the_three_shapes(tmp_path: Path) -> None:
    state = status(saved(tmp_path))
    active = {b: [r for r in state.replicas_of(b) if r.active] for b in ("pair-bundle",
              "three-bundle", "stateful-bundle")}  # fmt: skip
    assert [len(v) for v in active.values()] == [2, 3, 3]
    assert sum(r.role == "Promoted" for r in active["stateful-bundle"]) == 1
    config = C.parse_cib(SHAPES.read_bytes())
    assert C.bundle(config, "stateful-bundle").promoted_max == 1


def test_a_ban_on_the_node_alone_moves_the_two_of_three_replica(tmp_path: Path) -> None:
    cib = saved(tmp_path)
    index, node, holds = replica_on_first_node(cib, "pair-bundle")
    assert len(holds) == 1
    run("crm_resource", "--ban", "-r", "pair-bundle", "-N", node, cib_file=cib)
    final = settle(cib, tmp_path / "banned.xml", "pair-bundle")
    assert where(final, "pair-bundle", index) == holds[0]


@pytest.mark.parametrize("bundle", ["pair-bundle", "three-bundle", "stateful-bundle"])
def test_the_restart_constraints_bring_the_replica_back_in_place(
    tmp_path: Path, bundle: str
) -> None:
    cib = saved(tmp_path)
    index, node, holds = replica_on_first_node(cib, bundle)
    assert len(holds) == (1 if bundle == "pair-bundle" else 0)
    place(cib, bundle, [node, *holds], end(10))
    ops = simulate(cib, tmp_path / "first.xml")
    container = f"{bundle}-podman-{index}"
    assert (f"{container}_stop_0", node) in ops
    assert not [op for op, _ in ops if op == f"{container}_start_0"], ops
    stopped = settle(cib, tmp_path / "stopped.xml", bundle)
    assert where(stopped, bundle, index) is None  # stopped, started nowhere
    remove(stopped, bundle, node)
    started = settle(stopped, tmp_path / "started.xml", bundle)
    assert where(started, bundle, index) == node  # back in place
    for other in holds:
        remove(started, bundle, other)
    ops = simulate(started, tmp_path / "released.xml")
    assert not [op for op, _ in ops if op.startswith(f"{bundle}-podman-")], ops
    others = {r.replica: r.node for r in status(started).replicas_of(bundle) if r.active}
    assert others == {r.replica: r.node for r in status(cib).replicas_of(bundle)} | {index: node}


def test_a_ban_past_its_lifetime_is_not_in_force(tmp_path: Path) -> None:
    cib = saved(tmp_path)
    index, node, holds = replica_on_first_node(cib, "pair-bundle")
    place(cib, "pair-bundle", [node, *holds], end(-1))
    ops = simulate(cib, tmp_path / "expired.xml")
    assert not [op for op, _ in ops if op.startswith("pair-bundle-podman-")], ops
    assert where(tmp_path / "expired.xml", "pair-bundle", index) == node
    # Still in the CIB, found as ours (the next update removes it), with its node for `check`.
    config = C.parse_cib((tmp_path / "expired.xml").read_bytes())
    assert restart.own_bans(config, "pair-bundle") == [
        restart.ban_id("pair-bundle", n) for n in [node, *holds]
    ]
    assert {c.node for c in C.cli_constraints(config)} == {node, *holds}
