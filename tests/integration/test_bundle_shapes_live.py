"""The two bundle shapes production runs, live in the sandbox cluster (issue 9, item 4).

- A promotable bundle with an inner resource: ``ocf:pacemaker:Stateful`` in 3 replicas,
  promoted-max 1, on the sandbox's ``ns1/stateful:*`` images (pacemaker-remoted inside).
- A bundle with fewer replicas than nodes: 2 replicas on 3 nodes.

Each shape is a class with its own class-scoped bundle, so that the two never share the
nodes' image names; inside a class the tests run in file order (smoke test first, then the
update, which starts from the state the smoke test checked).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from tests.sandbox.cluster import Cluster, Replica
from tests.sandbox.fixtures import Sandbox
from tests.sandbox.polling import Polling
from tests.sandbox.proc import SandboxError
from tests.sandbox.registry import stateful_missing
from tests.sandbox.require import need

pytestmark = pytest.mark.timeout(600)

ON = "controller-0"  # where the operator runs pcmkimg

P_BUNDLE = "stateful-bundle"
P_SERVICE = "stateful"
P_FLOATING = "cluster.common.tag/stateful:pcmklatest"

T_BUNDLE = "pair-bundle"
T_SERVICE = "pair"
T_FLOATING = "cluster.common.tag/pair:pcmklatest"


def active(replicas: list[Replica]) -> list[Replica]:
    return [r for r in replicas if r.active]


def promoted(replicas: list[Replica]) -> list[Replica]:
    return [r for r in replicas if r.active and r.role == "Promoted"]


@dataclass
class Watch(Polling):
    """Polls crm_mon XML in a thread while an update runs: the bundle's replicas over time."""

    cl: Cluster
    bundle: str
    interval: float = 0.2
    samples: list[list[Replica]] = field(default_factory=list)
    errors: int = 0

    def sample(self) -> None:
        try:
            self.samples.append(self.cl.replicas(self.bundle))
        except SandboxError:
            self.errors += 1

    def down_order(self) -> list[str]:
        """The nodes in the order they first had no active replica (of those that had one)."""
        had = {r.node for r in active(self.samples[0])} if self.samples else set()
        order: list[str] = []
        for sample in self.samples:
            up = {r.node for r in active(sample)}
            for node in sorted(had - up):
                if node not in order:
                    order.append(node)
        return order

    def fewest_active(self) -> int:
        return min(len(active(s)) for s in self.samples)


def update_all(sb: Sandbox, service: str, ref: str) -> dict:  # type: ignore[type-arg]
    """``pcmkimg --json update SERVICE --image REF --all`` on controller-0; its JSON document."""
    out = sb.cluster.pcmkimg(  # type: ignore[union-attr]
        ON, "--json", "update", service, "--image", ref, "--all", check=False, timeout=540
    )
    assert out.returncode == 0, f"exit {out.returncode}: {out.stdout[-3000:]} {out.stderr[-3000:]}"
    return json.loads(out.stdout)  # type: ignore[no-any-return]


# --------------------------------------------------------------------------- promotable


@pytest.fixture(scope="class")
def stateful(cluster_sandbox: Sandbox) -> Iterator[Sandbox]:
    missing = stateful_missing()
    need(not missing, f"the Stateful test images need {', '.join(missing)}")
    cl = cluster_sandbox.cluster
    assert cl is not None
    with cl.promotable_bundle(P_BUNDLE, P_FLOATING):
        yield cluster_sandbox


class TestPromotable:
    def test_comes_up_with_three_active_replicas_and_one_promoted(self, stateful):
        cl = stateful.cluster
        mon = cl.crm_mon()
        replicas = cl.replicas(P_BUNDLE, mon)
        assert len(replicas) == 3
        assert sorted(r.node for r in active(replicas)) == cl.names
        assert len(promoted(replicas)) == 1, replicas
        assert sorted(r.role for r in replicas) == ["Promoted", "Unpromoted", "Unpromoted"]
        # A guest node per replica, reached through its pacemaker-remoted.
        guests = {n.get("name") for n in mon.iterfind("nodes/node[@type='remote']")}
        guests |= {n.get("name") for n in mon.iterfind("nodes/node[@type='guest']")}
        assert {f"{P_BUNDLE}-{i}" for i in range(3)} <= guests, guests
        ids = cl.stateful_images()
        running = cl.containers(f"{P_BUNDLE}-podman-")
        assert sorted(running) == cl.names
        assert {image for _, image in running.values()} == {ids["ns1/stateful:1.0"]}

    def test_update_all_restarts_the_promoted_replica_last_one_at_a_time(self, stateful):
        sb = stateful
        cl = sb.cluster
        ids = cl.stateful_images()
        assert ids["ns1/stateful:1.0"] != ids["ns1/stateful:1.1"]
        before = cl.replicas(P_BUNDLE)
        assert len(promoted(before)) == 1 and len(active(before)) == 3, before
        first_promoted = promoted(before)[0].node
        containers_before = cl.containers(f"{P_BUNDLE}-podman-")

        with Watch(cl, P_BUNDLE) as watch:
            doc = update_all(sb, P_SERVICE, sb.ref("ns1/stateful:1.1"))
        assert len(watch.samples) >= 10, (len(watch.samples), watch.errors)

        # Never more than one replica down at a time.
        assert watch.fewest_active() >= 2, [
            [(r.node, r.active, r.role) for r in s] for s in watch.samples
        ]
        # Each node went down once, the first promoted one last.
        order = watch.down_order()
        assert sorted(order) == cl.names, order
        assert order[-1] == first_promoted, (order, first_promoted)
        # The report lists the nodes in the order they were restarted.
        report = doc["report"]
        assert [n["node"] for n in report["nodes"]] == order
        assert [n["result"] for n in report["nodes"]] == ["ok"] * 3, report["nodes"]
        assert report["nodes"][-1]["node"] == first_promoted

        after = cl.wait_promoted(P_BUNDLE, 3, timeout=60)
        assert len(promoted(after)) == 1, after
        running = cl.containers(f"{P_BUNDLE}-podman-")
        assert sorted(running) == cl.names
        assert {image for _, image in running.values()} == {ids["ns1/stateful:1.1"]}
        for node, (cid, _) in running.items():
            assert cid != containers_before[node][0], f"{node}: container not restarted"


# --------------------------------------------------------------------------- 2 of 3


@pytest.fixture(scope="class")
def pair(cluster_sandbox: Sandbox) -> Iterator[Sandbox]:
    cl = cluster_sandbox.cluster
    assert cl is not None
    with cl.guarded_bundle(T_BUNDLE, T_FLOATING, cluster_sandbox.ref("ns1/svc:1.0"), replicas=2):
        yield cluster_sandbox


class TestTwoReplicasOnThreeNodes:
    def test_comes_up_with_two_active_replicas_on_two_nodes(self, pair):
        cl = pair.cluster
        replicas = cl.replicas(T_BUNDLE)
        assert len(replicas) == 2
        nodes = [r.node for r in active(replicas)]
        assert len(nodes) == 2 and len(set(nodes)) == 2, replicas
        assert set(nodes) <= set(cl.names)
        running = cl.containers(f"{T_BUNDLE}-podman-")
        assert sorted(running) == sorted(nodes)
        assert {image for _, image in running.values()} == {
            pair.images["ns1/svc:1.0"].removeprefix("sha256:")
        }

    def test_update_all_leaves_every_replica_on_an_updated_node_on_the_new_image(self, pair):
        sb = pair
        cl = sb.cluster
        new = sb.images["ns1/svc:1.1"].removeprefix("sha256:")
        assert new != sb.images["ns1/svc:1.0"]
        with Watch(cl, T_BUNDLE) as watch:
            doc = update_all(sb, T_SERVICE, sb.ref("ns1/svc:1.1"))
        assert watch.samples and watch.fewest_active() >= 1
        report = doc["report"]
        assert sorted(n["node"] for n in report["nodes"]) == cl.names
        updated = {n["node"] for n in report["nodes"] if n["result"] in ("ok", "retag-only")}
        assert updated == set(cl.names), report["nodes"]
        # The node without a replica comes last (retag only): a bad image is rolled back on
        # the first restart before a spare node was given it.
        assert [n["result"] for n in report["nodes"]] == ["ok", "ok", "retag-only"], report

        cl.run(ON, ["crm_resource", "--wait", "--timeout=120s"], timeout=150)
        replicas = cl.replicas(T_BUNDLE)
        nodes = [r.node for r in active(replicas)]
        assert len(nodes) == 2 and len(set(nodes)) == 2, replicas
        running = cl.containers(f"{T_BUNDLE}-podman-")
        assert sorted(running) == sorted(nodes)
        assert {image for _, image in running.values()} == {new}
        for node in cl.names:  # the floating name moved everywhere, also where no replica runs
            out = cl.podman(node, "image", "inspect", "--format", "{{.Id}}", T_FLOATING)
            assert out.stdout.strip() == new, node
