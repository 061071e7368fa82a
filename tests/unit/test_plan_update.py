"""Update planning (pcmkimg.core.plan): plain data in, a plan or one error listing every problem."""

from __future__ import annotations

import pytest
from lxml import etree

from pcmkimg.core import cib, naming
from pcmkimg.core import plan as P
from pcmkimg.core.errors import NodeNotReady, UnknownNode, UnknownService
from pcmkimg.core.reference import parse
from tests import fixtures

FLOATING = "cluster.common.tag/mariadb:pcmklatest"
BUNDLE = P.BundleRef("galera-bundle", "mariadb", FLOATING)
TARGET = parse("reg.example.com:8787/ns2/mariadb:17.1.2")


def fact(name: str, **kw: object) -> P.NodeFacts:
    return P.NodeFacts(name, **kw)  # type: ignore[arg-type]


def update_steps(plan: P.Plan) -> list[P.Step]:
    return [s for s in plan.steps if s.kind == "update"]


# --------------------------------------------------------------------------- ordering


def test_active_first_promoted_last_of_them_then_failed_starts_then_no_replica() -> None:
    """A new image that does not start is found on the first restart and rolled back there,
    before any node without a replica was given it (issue 18 item 2: they went first)."""
    facts = [
        fact("c-0", active=True, promoted=True),
        fact("c-1", active=True),
        fact("c-2"),
        fact("c-3", active=True),
        fact("c-4"),
        fact("c-5", failed_start=True),
    ]
    plan = P.plan_update(BUNDLE, TARGET, facts, None)
    assert plan.targets == ("c-1", "c-3", "c-0", "c-5", "c-2", "c-4")
    assert [s.nodes for s in update_steps(plan)] == [(n,) for n in plan.targets]
    assert [s.restart for s in update_steps(plan)] == [True, True, True, True, False, False]


def test_steps_lease_preflight_pull_then_one_update_per_node_then_release() -> None:
    facts = [fact("c-0", active=True), fact("c-1", active=True), fact("c-2", active=True)]
    plan = P.plan_update(BUNDLE, TARGET, facts, None, digest="sha256:" + "a" * 64)
    kinds = [s.kind for s in plan.steps]
    assert kinds == ["lease", "preflight", "pull", "update", "update", "update", "release"]
    pull = plan.steps[2]
    assert pull.nodes == ("c-0", "c-1", "c-2") and "before any restart" in pull.detail
    assert "digest sha256:aaaa" in pull.detail
    lines = plan.lines()
    assert lines[0] == f"update mariadb (bundle galera-bundle) to {TARGET}"
    assert len(lines) == 1 + len(plan.steps)
    assert lines[4] == (
        f" 4. c-0: {FLOATING} -> {TARGET}; retag, then restart the replica unless it already "
        "runs that image, wait until healthy; roll back on failure"
    )


def test_promoted_replica_is_named_and_no_restart_plans_no_restart() -> None:
    facts = [fact("c-0", active=True, promoted=True), fact("c-1", active=True)]
    plan = P.plan_update(BUNDLE, TARGET, facts, None)
    assert "restart the promoted replica" in update_steps(plan)[-1].detail
    quiet = P.plan_update(BUNDLE, TARGET, facts, None, restart=False)
    assert [s.restart for s in update_steps(quiet)] == [False, False]
    assert all("--no-restart" in s.detail for s in update_steps(quiet))


def test_named_nodes_only_in_planned_order_duplicates_once() -> None:
    facts = [fact("c-0", active=True, promoted=True), fact("c-1", active=True), fact("c-2")]
    plan = P.plan_update(BUNDLE, TARGET, facts, ["c-0", "c-2", "c-0"])
    assert plan.targets == ("c-0", "c-2")


def test_all_leaves_banned_nodes_alone() -> None:
    facts = [fact("c-0", active=True), fact("c-1", can_run=False), fact("c-2", active=True)]
    plan = P.plan_update(BUNDLE, TARGET, facts, None)
    assert plan.targets == ("c-0", "c-2")
    assert "c-1" not in " ".join(plan.lines())


def test_all_leaves_a_banned_node_alone_even_when_it_is_offline() -> None:
    facts = [fact("c-0"), fact("c-1", can_run=False, ready=False, why_not_ready="offline")]
    assert P.plan_update(BUNDLE, TARGET, facts, None).targets == ("c-0",)


# --------------------------------------------------------------------------- refusals


def test_unknown_and_banned_nodes_are_one_error_listing_both() -> None:
    facts = [fact("c-0"), fact("c-1", can_run=False), fact("c-2")]
    with pytest.raises(UnknownNode) as info:
        P.plan_update(BUNDLE, TARGET, facts, ["c-9", "c-1", "c-0", "c-8"])
    msg = info.value.message
    assert "'c-9' is not a cluster node" in msg and "'c-8' is not a cluster node" in msg
    assert "galera-bundle can never run on c-1" in msg
    assert info.value.fix == "nodes that can run galera-bundle: c-0, c-2"


def test_no_node_can_run_the_bundle() -> None:
    facts = [fact("c-0", can_run=False)]
    with pytest.raises(UnknownNode) as info:
        P.plan_update(BUNDLE, TARGET, facts, ["c-0"])
    assert info.value.fix == "nodes that can run galera-bundle: none"
    with pytest.raises(UnknownNode, match="no node can run bundle galera-bundle"):
        P.plan_update(BUNDLE, TARGET, facts, None)


def test_every_not_ready_target_is_listed() -> None:
    facts = [
        fact("c-0", ready=False, why_not_ready="offline"),
        fact("c-1", active=True),
        fact("c-2", ready=False, why_not_ready="in standby"),
        fact("c-3", ready=False),
    ]
    with pytest.raises(NodeNotReady) as info:
        P.plan_update(BUNDLE, TARGET, facts, None)
    assert info.value.message == "c-0 is offline; c-2 is in standby; c-3 is not ready"
    # Only the targets count: a node left out may be down.
    assert P.plan_update(BUNDLE, TARGET, facts, ["c-1"]).targets == ("c-1",)


def test_refusals_are_the_error_kinds_the_cli_maps() -> None:
    from pcmkimg.errors import UsageError

    assert issubclass(UnknownNode, UsageError)
    assert issubclass(UnknownService, UsageError)
    assert not issubclass(NodeNotReady, UsageError)


# --------------------------------------------------------------------------- find_bundle

BUNDLES = [
    ("galera-bundle", "cluster.common.tag/mariadb:pcmklatest"),
    ("redis-bundle", "cluster.common.tag/redis:pcmklatest"),
    ("rabbitmq-bundle", "reg.example.com:8787/ns/rabbitmq:pcmklatest"),  # legacy floating
    ("haproxy-bundle", "reg.example.com:8787/ns/haproxy:17.1"),  # a real image
    ("odd-bundle", ""),
    ("bad-bundle", "Not A Reference"),
]


@pytest.mark.parametrize(
    ("service", "bundle_id", "svc"),
    [
        ("mariadb", "galera-bundle", "mariadb"),
        ("galera-bundle", "galera-bundle", "mariadb"),
        ("redis", "redis-bundle", "redis"),
        ("rabbitmq", "rabbitmq-bundle", "rabbitmq"),
    ],
)
def test_find_bundle_by_service_or_bundle_id(service: str, bundle_id: str, svc: str) -> None:
    found = P.match_bundle(BUNDLES, service, naming.DEFAULT_SCHEME)
    assert (found.id, found.service) == (bundle_id, svc)
    assert found.floating == dict(BUNDLES)[bundle_id]


def test_find_bundle_unknown_service_lists_the_floating_bundles() -> None:
    with pytest.raises(UnknownService) as info:
        P.match_bundle(BUNDLES, "nova", naming.DEFAULT_SCHEME)
    assert "nova" in info.value.message
    fix = info.value.fix
    assert "galera-bundle (cluster.common.tag/mariadb:pcmklatest)" in fix
    assert "haproxy-bundle" not in fix and "bad-bundle" not in fix
    with pytest.raises(UnknownService, match="none"):
        P.match_bundle([], "nova", naming.DEFAULT_SCHEME)


def test_find_bundle_refuses_a_bundle_that_is_not_behind_a_floating_name() -> None:
    # Its image is a real name: retagging that on the nodes would be wrong.
    for name in ("haproxy-bundle", "odd-bundle", "bad-bundle"):
        with pytest.raises(UnknownService, match="not a floating name") as info:
            P.match_bundle(BUNDLES, name, naming.DEFAULT_SCHEME)
        assert "pcmkimg migrate" in info.value.fix


def test_find_bundle_ambiguous_service() -> None:
    twice = [*BUNDLES, ("galera2-bundle", "cluster.common.tag/mariadb:pcmklatest")]
    with pytest.raises(UnknownService, match="galera-bundle, galera2-bundle") as info:
        P.match_bundle(twice, "mariadb", naming.DEFAULT_SCHEME)
    assert "bundle id" in info.value.fix
    assert P.match_bundle(twice, "galera2-bundle", naming.DEFAULT_SCHEME).id == "galera2-bundle"


def test_find_bundle_with_another_scheme() -> None:
    scheme = naming.Scheme(prefix="tag.example.org/pcmk", tag="current", rollback_tag="before")
    pairs = [("a-bundle", "tag.example.org/pcmk/alpha:current")]
    assert P.match_bundle(pairs, "alpha", scheme).id == "a-bundle"
    with pytest.raises(UnknownService):
        P.match_bundle(pairs, "alpha", naming.DEFAULT_SCHEME)


# --------------------------------------------------------------------------- a refused node


def test_a_node_whose_replica_failed_to_start_is_planned_as_started_not_retag_only() -> None:
    facts = [fact("c-0", active=True), fact("c-1", failed_start=True), fact("c-2")]
    plan = P.plan_update(BUNDLE, TARGET, facts, None)
    by_node = {s.nodes[0]: s for s in update_steps(plan)}
    assert "clean up the replica's failed start" in by_node["c-1"].detail
    assert "retag only" not in by_node["c-1"].detail and by_node["c-1"].restart
    assert "retag only" in by_node["c-2"].detail and not by_node["c-2"].restart
    # --no-restart: nothing is started there either.
    plan = P.plan_update(BUNDLE, TARGET, facts, None, restart=False)
    assert not any(s.restart for s in update_steps(plan))


# --------------------------------------------------------------------------- health per node


START = P.Health(active={0: "c-0", 1: "c-1", 2: "c-2"}, promoted=1)


def test_a_node_may_be_touched_when_every_other_replica_is_active_and_promoted() -> None:
    assert P.before_node_problems(START, START, "c-1") == []
    # Its own replica may be down (a refused node); another replica moved is still active.
    now = P.Health(active={0: "c-2", 2: "c-0"}, promoted=1)
    assert P.before_node_problems(START, now, "c-1") == []


def test_a_node_is_not_touched_while_another_replica_is_down_or_unpromoted() -> None:
    now = P.Health(active={0: "c-0", 1: "c-1"}, promoted=0)
    assert P.before_node_problems(START, now, "c-0") == [
        "replica 2 of the bundle (on c-2 when the update started) is not active",
        "0 promoted instance(s), 1 when the update started",
    ]


def test_after_a_restart_the_replica_is_active_on_an_updated_node_and_promoted_again() -> None:
    assert P.after_restart_problems(START, START, 1, "c-1", {"c-1"}) == []
    moved = P.Health(active={0: "c-0", 1: "c-3", 2: "c-2"}, promoted=1)
    assert P.after_restart_problems(START, moved, 1, "c-1", {"c-1", "c-3"}) == []
    assert P.after_restart_problems(START, moved, 1, "c-1", {"c-1"}) == [
        "replica 1 moved from c-1 to c-3, which does not have the new image"
    ]
    down = P.Health(active={0: "c-0", 2: "c-2"}, promoted=0)
    assert P.after_restart_problems(START, down, 1, "c-1", {"c-1"}) == [
        "replica 1 is not active after its restart on c-1",
        "0 promoted instance(s) after the restart on c-1, 1 before the update",
    ]


def _remote_cluster() -> P.Cluster:
    """remote-nodes.xml (members, the remote node compute-0, the guest node guest-0 of a VM)
    with crm_mon's answer where both are online as type "remote"."""
    config = cib.parse_cib(fixtures.path("remote-nodes.xml").read_bytes())
    mon = cib.parse_crm_mon(fixtures.path("mon-ok.xml").read_bytes())
    nodes = mon.find("nodes")
    assert nodes is not None
    for name in ("compute-0", "guest-0"):
        etree.SubElement(nodes, "node", name=name, id=name, online="true", type="remote")
    return P.Cluster(config, mon, cib.cluster_status(mon))


def test_a_pacemaker_remote_node_is_a_target_and_a_guest_node_is_not() -> None:
    """Issue 18 item 5: a replica on a Pacemaker Remote node was skipped by --all, and
    --node compute-0 was "not a cluster node"."""
    cluster = _remote_cluster()
    facts = P.node_facts(cluster, "galera-bundle")
    names = [f.name for f in facts]
    assert "compute-0" in names and "guest-0" not in names
    plan = P.plan_update(BUNDLE, TARGET, facts, ["compute-0"])
    assert plan.targets == ("compute-0",)
    assert "compute-0" in P.plan_update(BUNDLE, TARGET, facts, None).targets
