"""pcmkimg's own restart, live (issue 14): in place for the three bundle shapes (3 of 3, 2 of 3,
promotable), and a SIGKILL'd restart whose constraint stops being in force after its lifetime.

Each restart is watched from outside (the shapes tests' Watch, crm_mon XML every 0.1 s): the
restarted replica must never be active on any other node, and its container on the node must
be a new one.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pcmkimg.adapters import pacemaker as pm
from pcmkimg.core import cib, restart
from tests.integration.test_bundle_shapes_live import Watch
from tests.sandbox.cluster import Cluster
from tests.sandbox.fixtures import Sandbox
from tests.sandbox.registry import stateful_missing
from tests.sandbox.require import need

pytestmark = pytest.mark.timeout(600)

REPO = Path(__file__).resolve().parents[2]
ON = "controller-0"


def runner(cl: Cluster) -> pm.Runner:
    return pm.Runner(prefix=tuple(cl.node(ON).enter()))


def container_id(cl: Cluster, node: str, name: str) -> str | None:
    out = cl.podman(node, "ps", "--format", "json")
    return next((c["Id"] for c in json.loads(out.stdout or "[]") if name in c["Names"]), None)


def bans(r: pm.Runner, bundle: str) -> list[str]:
    return [c.id for c in cib.cli_constraints(pm.query_cib(r)) if c.resource == bundle]


def restart_in_place(cl: Cluster, bundle: str, node: str) -> pm.RestartReport:
    """Restart the replica of ``bundle`` on ``node``; check it came back there and only there,
    in a new container, with no constraint left."""
    r = runner(cl)
    replica = pm.status(r).replica_on(bundle, node)
    assert replica is not None and replica.active
    old = container_id(cl, node, replica.container_id)
    assert old is not None
    with Watch(cl, bundle, interval=0.1) as watch:
        report = pm.restart_replica(r, bundle, node, timeout=120)
    seen = [
        next((x.node for x in sample if x.index == replica.replica and x.active), None)
        for sample in watch.samples
    ]
    assert (report.node, report.replica) == (node, replica.replica)
    assert set(seen) <= {node, None}, seen  # never active on another node
    assert seen and seen[-1] == node
    new = container_id(cl, node, replica.container_id)
    assert new is not None and new != old
    after = pm.status(r).replica_on(bundle, node)
    assert after is not None and after.active and not after.failed
    assert bans(r, bundle) == []
    assert 0 < report.stopped_after < report.active_after < report.seconds
    return report


# --------------------------------------------------------------------------- the shapes


@pytest.fixture(scope="module")
def sandbox(cluster_sandbox: Sandbox) -> Sandbox:
    assert cluster_sandbox.cluster is not None
    return cluster_sandbox


def test_three_of_three_restarts_in_place(sandbox: Sandbox) -> None:
    cl = sandbox.cluster
    assert cl is not None
    bundle = "rs-three-bundle"
    with cl.guarded_bundle(
        bundle, "cluster.common.tag/rsthree:pcmklatest", sandbox.ref("ns1/svc:1.0")
    ):
        restart_in_place(cl, bundle, "controller-1")


def test_two_of_three_restarts_in_place_and_never_on_the_free_node(sandbox: Sandbox) -> None:
    cl = sandbox.cluster
    assert cl is not None
    bundle = "rs-pair-bundle"
    floating = "cluster.common.tag/rspair:pcmklatest"
    with cl.guarded_bundle(bundle, floating, sandbox.ref("ns1/svc:1.0"), replicas=2):
        r = runner(cl)
        up = sorted(x.node or "" for x in pm.status(r).replicas_of(bundle) if x.active)
        assert len(up) == 2
        (free,) = set(cl.names) - set(up)
        # The free node has another image behind the name: the replica must not land there.
        cl.seed(sandbox.ref("ns1/svc:1.1"), floating, nodes=[free])
        since = int(time.time()) - 1
        for node in up:
            restart_in_place(cl, bundle, node)
        # No container of the bundle ever ran on the free node meanwhile.
        events = cl.podman(
            free, "events", "--since", str(since), "--until", str(int(time.time()) + 1),
            "--filter", "type=container", "--format", "json",
        )  # fmt: skip
        started = [
            e.get("Name")
            for e in map(json.loads, events.stdout.splitlines())
            if str(e.get("Name", "")).startswith(f"{bundle}-")
        ]
        assert started == [], started


def test_promotable_restarts_in_place_the_promoted_one_too(sandbox: Sandbox) -> None:
    missing = stateful_missing()
    need(not missing, f"the Stateful test images need {', '.join(missing)}")
    cl = sandbox.cluster
    assert cl is not None
    bundle = "rs-stateful-bundle"
    with cl.promotable_bundle(bundle, "cluster.common.tag/rsstateful:pcmklatest") as replicas:
        promoted = next(x.node for x in replicas if x.role == "Promoted")
        other = next(x.node for x in replicas if x.role != "Promoted")
        assert promoted and other
        restart_in_place(cl, bundle, other)
        restart_in_place(cl, bundle, promoted)
        after = cl.wait_promoted(bundle, 3, timeout=120)
        assert sorted(x.node or "" for x in after if x.active) == cl.names
        assert sum(1 for x in after if x.role == "Promoted") == 1


# --------------------------------------------------------------------------- SIGKILL

KILLED = """
import sys
from pcmkimg.adapters import pacemaker as pm
pm.restart_replica(pm.Runner(prefix=tuple(sys.argv[3:])), sys.argv[1], sys.argv[2], 8)
"""


def test_a_sigkilled_restart_leaves_no_constraint_in_force_after_its_lifetime(
    sandbox: Sandbox,
) -> None:
    cl = sandbox.cluster
    assert cl is not None
    bundle = "rs-killed-bundle"
    node = "controller-2"
    cid = restart.ban_id(bundle, node)
    with cl.guarded_bundle(
        bundle, "cluster.common.tag/rskilled:pcmklatest", sandbox.ref("ns1/svc:1.0")
    ):
        r = runner(cl)
        # Kill it in the middle: the replica stopped, the ban (timeout 8 s + 5 s) in the CIB.
        child = subprocess.Popen(
            [sys.executable, "-c", KILLED, bundle, node, *cl.node(ON).enter()],
            cwd=REPO,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + 30
            while cid not in bans(r, bundle):
                assert child.poll() is None and time.monotonic() < deadline, "no ban appeared"
                time.sleep(0.02)
            placed = time.monotonic()
            child.send_signal(signal.SIGKILL)
            child.communicate(timeout=30)
        finally:
            if child.poll() is None:
                child.kill()
        assert cid in bans(r, bundle)  # left behind: nobody removed it
        end = pm.query_cib(r).find(
            f"configuration/constraints/rsc_location[@id='{cid}']/rule/date_expression"
        )
        assert end is not None and end.get("operation") == "lt"
        # In force for now: the replica stops on the node and starts nowhere else...
        deadline = time.monotonic() + 30
        while (x := pm.status(r).replica_on(bundle, node)) is not None and x.active:
            assert time.monotonic() < deadline, "the replica never stopped under the ban"
            time.sleep(0.2)
        # ... and no longer after its lifetime: the replica starts there again by itself.
        deadline = placed + 13 + 90
        while not ((x := pm.status(r).replica_on(bundle, node)) is not None and x.active):
            assert time.monotonic() < deadline, "the ban still in force after its lifetime"
            time.sleep(0.5)
        assert time.monotonic() - placed > 8
        # The check lists it (with its node); the next update's preflight removes it as ours.
        listed = [(c.id, c.node) for c in cib.cli_constraints(pm.query_cib(r))]
        assert (cid, node) in listed
        # The pin it placed with the ban is left too, and removed with it.
        assert restart.own_pin(pm.query_cib(r), bundle)
        assert pm.remove_own_bans(r, bundle) == [cid, restart.pin_id(bundle), restart.DEFAULTS_PIN]
        assert bans(r, bundle) == []
        config = pm.query_cib(r)
        assert not restart.own_pin(config, bundle) and not restart.defaults_pinned(config)
