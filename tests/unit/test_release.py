"""A release (issue 20): the file format and the plan (pure), and the run on the one fake of each
port: every service of a node retagged, then its replicas restarted once, in order; a failure
on a node puts every service moved there back; the nodes done before stay updated."""

from __future__ import annotations

from pathlib import Path

import pytest
from lxml import etree

from pcmkimg import records
from pcmkimg.adapters.errors import PacemakerTimeoutError, RestartFailedError
from pcmkimg.core import cib, plan, release
from pcmkimg.core.errors import ReleaseFileError
from pcmkimg.core.reference import parse
from pcmkimg.errors import UsageError
from pcmkimg.workflows import update as wf
from pcmkimg.workflows.errors import UpdateFailed
from tests import fakes
from tests.fakes import NODES, FakeCluster, FakeStore, container_of, context

GALERA, RABBIT = "galera-bundle", "rabbitmq-bundle"
FLOAT = {GALERA: "cluster.common.tag/mariadb:pcmklatest",
         RABBIT: "cluster.common.tag/rabbitmq:pcmklatest"}  # fmt: skip
OLD = {GALERA: "a" * 64, RABBIT: "c" * 64}
NEW = {GALERA: "b" * 64, RABBIT: "d" * 64}
REF = {
    GALERA: "registry.example.com/ns/mariadb:2.0",
    RABBIT: "registry.example.com/ns/rabbitmq:2.0",
}
SCHEME = fakes.Config().scheme


def lines(*texts: str) -> list[tuple[str, str]]:
    return [(t, f"f:{n}") for n, t in enumerate(texts, 1)]


# --------------------------------------------------------------------------- the file


def test_the_file_format_comments_blank_lines_digests() -> None:
    digest = "sha256:" + "e" * 64
    entries = release.parse_release(
        lines("# a release", "", f"mariadb = {REF[GALERA]}", f"rabbitmq={REF[RABBIT]} {digest}"),
        SCHEME,
    )
    assert [(e.service, str(e.image), e.digest) for e in entries] == [
        ("mariadb", REF[GALERA], None),
        ("rabbitmq", REF[RABBIT], digest),
    ]
    assert entries[1].where == "f:4"


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (["mariadb"], "is not 'SERVICE = IMAGE"),
        (["mariadb = Bad//Ref"], "service mariadb"),
        ([f"mariadb = {REF[GALERA]}", f"mariadb = {REF[GALERA]}"], "named twice"),
        ([f"mariadb = {FLOAT[GALERA]}"], "floating or rollback name"),
        ([f"mariadb = {REF[GALERA]}@sha256:{'1' * 64} sha256:{'2' * 64}"], "pinned to"),
        (["# nothing"], "names no service"),
    ],
    ids=["no-image", "malformed", "twice", "floating", "two-digests", "empty"],
)
def test_bad_lines_are_refused_naming_the_line_and_service(text: list[str], said: str) -> None:
    with pytest.raises(ReleaseFileError, match=said) as info:
        release.parse_release(lines(*text), SCHEME)
    assert isinstance(info.value, UsageError)  # exit 2


def test_a_bundle_ordered_after_another_restarts_after_it() -> None:
    config = fakes.fixtures.cib("base.xml")
    constraints = config.find("configuration/constraints")
    assert constraints is not None
    etree.SubElement(constraints, "rsc_order", id="o", first=RABBIT, then=GALERA)
    bundles = {"mariadb": GALERA, "rabbitmq": RABBIT, "redis": "redis-bundle"}
    order = release.restart_order(["mariadb", "redis", "rabbitmq"], bundles, config)
    assert order == ["redis", "rabbitmq", "mariadb"]


# --------------------------------------------------------------------------- promotions


def test_a_promotion_restarted_away_lands_where_it_moves_no_more() -> None:
    """mariadb promoted on A (replicas on A and B), rabbitmq promoted on B (replicas on B and
    C): restarting A first may put mariadb's promotion on B, which moves it again; B first
    puts rabbitmq's on C (done before them), then A's moves once: 2 moves instead of 3."""
    active = {"mariadb": {"A", "B"}, "rabbitmq": {"B", "C"}}
    promoted = {"mariadb": {"A"}, "rabbitmq": {"B"}}
    assert release.order_promoted(["A", "B"], active, promoted) == ["B", "A"]
    moves = release.promotion_moves(["C", "B", "A"], active, promoted)
    assert [(m.service, m.node, m.again) for m in moves] == [
        ("rabbitmq", "B", ()),
        ("mariadb", "A", ()),
    ]
    worse = release.promotion_moves(["C", "A", "B"], active, promoted)
    assert [(m.service, m.node, m.again) for m in worse] == [
        ("mariadb", "A", ("B",)),
        ("rabbitmq", "B", ()),
    ]
    assert sum(m.worst for m in worse) == 3


def test_the_plan_orders_the_promoted_nodes_to_move_promotions_least() -> None:
    """From the cluster: galera promoted on controller-0 only, redis promoted on controller-2
    and stopped on controller-0. By name, controller-0 goes first and galera's promotion may
    land on controller-2 and move again; the plan restarts controller-2 first (redis's
    promotion lands on controller-1, done before), then controller-0: each moves once."""
    mon = fakes.fixtures.mon("mon-ok.xml")
    galera = "resources/bundle[@id='galera-bundle']/replica"
    for replica in (1, 2):
        mon.find(f"{galera}[@id='{replica}']/resource[@id='galera']").set("role", "Unpromoted")
    redis = "resources/bundle[@id='redis-bundle']/replica"
    mon.find(f"{redis}[@id='2']/resource[@id='redis']").set("role", "Promoted")
    mon.find(f"{redis}[@id='1']/resource[@id='redis']").set("role", "Unpromoted")
    for res in mon.find(f"{redis}[@id='0']").findall("resource"):
        res.set("active", "false")
        res.set("role", "Stopped")
        for child in list(res):
            res.remove(child)
    cluster = plan.Cluster(fakes.fixtures.cib("base.xml"), mon, cib.cluster_status(mon))
    entries = release.parse_release(
        lines(f"mariadb = {REF[GALERA]}", "redis = r.example/r:2"), SCHEME
    )
    the_plan = release.plan_release(cluster, entries, None, SCHEME)
    assert the_plan.targets == ("controller-1", "controller-2", "controller-0")
    assert [(m.service, m.node, m.again) for m in the_plan.promotions] == [
        ("redis", "controller-2", ()),
        ("mariadb", "controller-0", ()),
    ]


def test_equal_orders_keep_the_names_order() -> None:
    active = {"mariadb": {"A", "B", "C"}, "rabbitmq": {"A", "B", "C"}}
    promoted = {"mariadb": {"A"}, "rabbitmq": {"B"}}
    assert release.order_promoted(["A", "B"], active, promoted) == ["A", "B"]


def test_the_plan_says_which_promotion_moves_in_text_and_json() -> None:
    moves = (
        release.PromotionMove("rabbitmq", "controller-1", ()),
        release.PromotionMove("mariadb", "controller-2", ("controller-1",)),
    )
    the_plan = release.ReleasePlan(
        (),
        (
            release.NodeTurn("controller-1", ("rabbitmq",), ("rabbitmq",), ("rabbitmq",)),
            release.NodeTurn("controller-2", ("mariadb",), ("mariadb",), ("mariadb",)),
        ),
        promotions=moves,
    )
    text = "\n".join(the_plan.lines())
    assert "rabbitmq retag+restart (promoted: rabbitmq's promotion moves off controller-1)" in text
    assert (
        "promotions that move (unless the replica already runs its image): rabbitmq's promotion "
        "moves off controller-1; mariadb's promotion moves off controller-2, and may move again "
        "on controller-1"
    ) in text
    doc = wf.UpdateOutcome(the_plan).as_dict()
    assert doc["promotions"] == [
        {"service": "rabbitmq", "node": "controller-1", "may_move_again_on": []},
        {"service": "mariadb", "node": "controller-2", "may_move_again_on": ["controller-1"]},
    ]


# --------------------------------------------------------------------------- the run


def stores() -> dict[str, FakeStore]:
    out = {}
    for node in NODES:
        store = FakeStore(
            node,
            {**{FLOAT[b]: OLD[b] for b in FLOAT}, **{f"old/{b}:1": OLD[b] for b in FLOAT}},
            registry={REF[b]: NEW[b] for b in REF},
        )
        for b in FLOAT:
            store.start(container_of(node, b), OLD[b])
        out[node] = store
    return out


def cluster_of(nodes: dict[str, FakeStore]) -> FakeCluster:
    return FakeCluster(nodes, bundles=(GALERA, RABBIT), timeout=5.0)


def request(**kw: object) -> wf.UpdateRequest:
    base: dict[str, object] = {
        "pairs": (f"mariadb={REF[GALERA]}", f"rabbitmq={REF[RABBIT]}"),
        "every": True,
        "timeout": 5.0,
    }
    return wf.UpdateRequest(**{**base, **kw})  # type: ignore[arg-type]


def restarts(cluster: FakeCluster) -> list[tuple[str, str]]:
    return [(e[1], e[2] if len(e) > 2 else GALERA) for e in cluster.kinds("restart")]


def test_every_service_of_a_node_in_its_one_turn_each_replica_restarted_once(
    tmp_path: Path,
) -> None:
    nodes = stores()
    cluster = cluster_of(nodes)
    outcome = wf.run(context(cluster, journal_dir=tmp_path), request())
    assert outcome.report is not None
    # Node by node, every service of the node before the next node; each replica once, the
    # node's replicas in one restart (their holds placed and lifted together).
    assert restarts(cluster) == [(n, b) for n in NODES for b in (GALERA, RABBIT)]
    assert cluster.kinds("together") == [("together", n, GALERA, RABBIT) for n in NODES]
    for node, store in nodes.items():
        for b in FLOAT:
            assert store.image_of(container_of(node, b)) == NEW[b]
            assert store.names[fakes.key(FLOAT[b])] == NEW[b]
        # Each reference pulled once on each node, before any restart.
        assert sorted(store.called("pull")) == sorted(REF.values())
    assert [e[0] for e in cluster.kinds("acquire", "release") if len(e) <= 2][:1] == ["acquire"]
    assert cluster.kinds("acquire")[0] and cluster.events[-1] == ("release",)
    results = [{s: r.result for s, r in per.items()} for per in outcome.report.nodes]
    assert results == [{"mariadb": "ok", "rabbitmq": "ok"}] * 3
    assert outcome.report.restarted() == 6


def test_a_rerun_restarts_nothing(tmp_path: Path) -> None:
    nodes = stores()
    wf.run(context(cluster_of(nodes), journal_dir=tmp_path), request())
    again = cluster_of(nodes)
    outcome = wf.run(context(again, journal_dir=tmp_path), request())
    assert again.kinds("restart") == []
    assert outcome.report is not None
    assert {r.result for per in outcome.report.nodes for r in per.values()} == {"unchanged"}


def test_a_failure_on_the_second_node_puts_back_every_service_moved_there(
    tmp_path: Path,
) -> None:
    nodes = stores()
    cluster = cluster_of(nodes)
    failed = RestartFailedError("start of the replica failed", "look at it")
    cluster.restart_errors[("controller-1", RABBIT)] = (failed, True)
    with pytest.raises(UpdateFailed, match="release failed on controller-1") as info:
        wf.run(context(cluster, journal_dir=tmp_path), request())
    # The first node stays updated; on the second, both services went back (galera, which
    # had restarted on its new image, is restarted again on the old one); the third untouched.
    first, second, third = (nodes[n] for n in NODES)
    assert {first.image_of(container_of("controller-0", b)) for b in FLOAT} == set(NEW.values())
    for b in FLOAT:
        assert second.names[fakes.key(FLOAT[b])] == OLD[b]
        assert second.image_of(container_of("controller-1", b)) == OLD[b]
        assert third.names[fakes.key(FLOAT[b])] == OLD[b]
    assert third.called("retag") == [] and third.called("restart") == []
    # rabbitmq's replica, stopped by its failed start, cleaned up (it starts on the previous
    # image), galera's restarted on its previous image.
    assert cluster.kinds("cleanup")[-1] == ("cleanup", RABBIT, "controller-1")
    assert restarts(cluster)[-1] == ("controller-1", GALERA)
    report = info.value.report
    assert report is not None
    assert [n["services"]["mariadb"]["result"] for n in report["nodes"]] == ["ok", "rolled-back"]
    assert report["nodes"][1]["services"]["rabbitmq"]["result"] == "rolled-back"
    assert cluster.events[-1] == ("release",)


def test_a_node_that_left_the_cluster_mid_release_gets_its_names_back_exit_6(
    tmp_path: Path,
) -> None:
    """Issue 22 item 1 for a release: the node's restart timed out because the node left the
    cluster. Every service moved there gets its names back (its replicas start on them when
    the node rejoins); nothing is asked of the absent node; exit 6 says what happened."""
    nodes = stores()
    cluster = cluster_of(nodes)
    timed_out = PacemakerTimeoutError("the restart did not finish within 5s", "check", rc=-1)
    cluster.restart_errors[("controller-1", GALERA)] = (timed_out, True)

    def say(text: str) -> None:
        if "controller-1: FAILED" in text:  # the node is gone by the time the restart fails
            cluster.base = records.replace(
                cluster.base,
                nodes=tuple(
                    records.replace(n, online=False) if n.name == "controller-1" else n
                    for n in cluster.base.nodes
                ),
            )

    with pytest.raises(UpdateFailed, match="which left the cluster") as info:
        wf.run(context(cluster, journal_dir=tmp_path, say=say), request())
    assert info.value.family.__name__ == "NodeFailed"
    assert "bring controller-1 back into the cluster" in info.value.fix
    second = nodes["controller-1"]
    for b in FLOAT:
        assert second.names[fakes.key(FLOAT[b])] == OLD[b]
    assert ("cleanup", RABBIT, "controller-1") not in cluster.events
    # The node's one restart of both, and none after the failure.
    assert [r for r in restarts(cluster) if r[0] == "controller-1"] == [
        ("controller-1", GALERA),
        ("controller-1", RABBIT),
    ]
    assert nodes["controller-2"].called("retag") == []


def test_dry_run_prints_the_plan_and_changes_nothing(tmp_path: Path) -> None:
    nodes = stores()
    cluster = cluster_of(nodes)
    outcome = wf.run(context(cluster, journal_dir=tmp_path), request(dry_run=True))
    assert outcome.report is None
    text = "\n".join(outcome.plan.lines())
    assert "mariadb -> " in text and "rabbitmq -> " in text
    for node in NODES:
        assert f"{node}: retag every service" in text
    assert cluster.events == []
    assert all(s.called("pull") == [] and s.called("retag") == [] for s in nodes.values())


def test_a_soak_that_sees_a_replica_go_puts_the_node_back(tmp_path: Path) -> None:
    nodes = stores()
    cluster = cluster_of(nodes)

    def say(text: str) -> None:
        if "soaking" in text:  # the new rabbitmq dies while the node soaks
            nodes["controller-0"].stop(container_of("controller-0", RABBIT))

    ctx = context(cluster, journal_dir=tmp_path, say=say)
    with pytest.raises(UpdateFailed, match="during the soak on controller-0"):
        wf.run(ctx, request(soak=0.01, every=False, nodes=("controller-0",)))
    store = nodes["controller-0"]
    for b in FLOAT:
        assert store.names[fakes.key(FLOAT[b])] == OLD[b]
        assert store.image_of(container_of("controller-0", b)) == OLD[b]


def test_bad_input_is_refused_before_the_cluster_is_read(tmp_path: Path) -> None:
    cluster = cluster_of(stores())
    with pytest.raises(UsageError, match="give SERVICE=REF"):
        wf.run(context(cluster, journal_dir=tmp_path), request(pairs=("mariadb",)))
    with pytest.raises(ReleaseFileError, match="argument 2: service rabbitmq"):
        wf.run(
            context(cluster, journal_dir=tmp_path),
            request(pairs=(f"mariadb={REF[GALERA]}", "rabbitmq=Bad//Ref")),
        )
    assert cluster.events == []


def test_the_release_file_is_read(tmp_path: Path) -> None:
    path = tmp_path / "release.conf"
    path.write_text(f"# 17.1.3\nmariadb = {REF[GALERA]}\nrabbitmq = {REF[RABBIT]}\n")
    nodes = stores()
    outcome = wf.run(
        context(cluster_of(nodes), journal_dir=tmp_path),
        request(pairs=(), images_file=path, dry_run=True),
    )
    assert [str(i.entry.image) for i in outcome.plan.items] == [REF[GALERA], REF[RABBIT]]
    assert str(parse(REF[GALERA])) == REF[GALERA]


def test_a_node_that_fails_its_soak_puts_both_replicas_back_in_one_restart(
    tmp_path: Path,
) -> None:
    """Both replicas of the node run their new images when the soak sees a new failed
    operation: both go back to their previous images in one restart."""
    nodes = stores()
    cluster = cluster_of(nodes)
    container = container_of("controller-0", RABBIT)
    failure = cib.Failure(
        f"{container}_monitor_60000", container, "monitor", 60000, "controller-0", 1, "error", ""
    )

    def say(text: str) -> None:
        if "soaking" in text:
            cluster.extra_failures.append(failure)

    ctx = context(cluster, journal_dir=tmp_path, say=say)
    with pytest.raises(UpdateFailed, match="during the soak on controller-0"):
        wf.run(ctx, request(soak=0.01, every=False, nodes=("controller-0",)))
    assert cluster.kinds("together") == [("together", "controller-0", GALERA, RABBIT)] * 2
    store = nodes["controller-0"]
    for b in FLOAT:
        assert store.names[fakes.key(FLOAT[b])] == OLD[b]
        assert store.image_of(container_of("controller-0", b)) == OLD[b]


def test_a_turn_looks_at_the_cluster_once_before_and_once_after_its_restart(
    tmp_path: Path,
) -> None:
    """Each node's turn reads the cluster's state (crm_mon, 50-100 ms live) once for the
    checks of every service before its retags and once after its restart for every
    service's verdict. It was once per service for each of three checks and once more for
    the failures: 2 x 3 + 1 reads a turn here, 13 with four services."""
    cluster = cluster_of(stores())
    wf.run(context(cluster, journal_dir=tmp_path), request())
    assert len(cluster.kinds("together")) == 3
    assert cluster.status_reads == 3 * 2


def test_a_replica_healed_in_a_turn_makes_the_next_service_look_again(tmp_path: Path) -> None:
    """controller-2 lacked mariadb's floating name and its replica's start failed there: its
    turn cleans that up and the replica starts on the new image (a CIB change of ours), so
    rabbitmq's replica there is judged from a new look, not from the turn's first one."""
    nodes = stores()
    store = nodes["controller-2"]
    del store.names[fakes.key(FLOAT[GALERA])]
    store.stop(container_of("controller-2", GALERA))
    cluster = cluster_of(nodes)
    cluster.extra_failures.append(
        cib.Failure(
            op_key=f"{container_of('controller-2', GALERA)}_start_0",
            resource=container_of("controller-2", GALERA),
            task="start",
            interval_ms=0,
            node="controller-2",
            exitcode=1,
            exitstatus="error",
            exit_reason=f"failed to pull image {FLOAT[GALERA]}",
        )
    )
    outcome = wf.run(context(cluster, journal_dir=tmp_path), request())
    assert outcome.report is not None
    report = outcome.report
    turns = zip(report.names, report.nodes)
    results = {(n, s): r.result for n, per in turns for s, r in per.items()}
    assert results[("controller-2", "mariadb")] == "started"
    assert results[("controller-2", "rabbitmq")] == "ok"
    assert store.image_of(container_of("controller-2", GALERA)) == NEW[GALERA]
    assert store.image_of(container_of("controller-2", RABBIT)) == NEW[RABBIT]
    # Per turn: one look before, one after; controller-2's turn two more (after the heal,
    # for mariadb's verdict and rabbitmq's).
    assert cluster.status_reads == 3 * 2 + 2


def test_leftover_holds_removed_then_the_cluster_waited_for_before_the_baseline(
    tmp_path: Path,
) -> None:
    """What a killed run left is removed, then ``crm_resource --wait`` (the fake's ("wait",))
    and the settle (another) before the cluster is read again: a DC that still looks idle
    just after the change must not let the baseline miss a replica coming back."""
    cluster = cluster_of(stores())
    cluster.own_bans = ["cli-ban-galera-bundle-on-controller-0"]
    wf.run(context(cluster, journal_dir=tmp_path), request())
    at = cluster.events.index(("removed-bans", "cli-ban-galera-bundle-on-controller-0"))
    assert cluster.events[at + 1 : at + 3] == [("wait",), ("wait",)]


def test_a_replica_an_interrupted_run_stopped_is_waited_for_before_the_baseline(
    tmp_path: Path,
) -> None:
    """A release run again right after a SIGTERM: the killed run removed its holds, and
    Pacemaker is still bringing back the replica it stopped (rabbitmq's on controller-1). The
    preflight waits for the cluster (``crm_resource --wait``, then the settle) and reads it
    again before its baseline, so that replica is restarted in its turn and watched during the
    others'. Before, no wait: the turns began while it was down, and live (Pacemaker 3.0) it
    started in the place of a replica being restarted."""
    nodes = stores()
    cluster = cluster_of(nodes)
    cluster.record_reads = True
    down = container_of("controller-1", RABBIT)
    nodes["controller-1"].stop(down)
    wait = cluster.wait

    def pacemaker_brings_it_back(timeout: float) -> None:
        wait(timeout)
        if nodes["controller-1"].image_of(down) is None:
            nodes["controller-1"].start(down, OLD[RABBIT])

    cluster.wait = pacemaker_brings_it_back  # type: ignore[method-assign]
    said: list[str] = []
    outcome = wf.run(context(cluster, journal_dir=tmp_path, say=said.append), request())
    assert outcome.report is not None
    steps = [e[0] for e in cluster.kinds("read", "wait", "together")]
    # The plan's read, the preflight's (under the lease), the wait and the settle, the
    # preflight's read again; only then the first turn.
    assert steps[:6] == ["read", "read", "wait", "wait", "read", "together"]
    assert any(f"{down} not active" in line for line in said), said
    assert restarts(cluster) == [(n, b) for n in NODES for b in (GALERA, RABBIT)]
    assert nodes["controller-1"].image_of(down) == NEW[RABBIT]


def test_a_ban_another_writer_put_back_after_a_node_is_removed_before_the_next(
    tmp_path: Path,
) -> None:
    """Issue 22 item 5 for a release: a stale replace of the configuration (``pcs resource
    update``) after controller-0's turn puts its ban back; it is removed before controller-1's
    turn and the cluster settles, as an update's node step does."""
    nodes = stores()
    cluster = cluster_of(nodes)
    written_back = f"cli-ban-{GALERA}-on-controller-0"
    restart_replicas = cluster.restart_replicas

    def then_written_back(bundle_ids, node, timeout, *, holds=None):  # type: ignore[no-untyped-def]
        restart_replicas(bundle_ids, node, timeout, holds=holds)
        if node == "controller-0":
            cluster.own_bans = [written_back]

    cluster.restart_replicas = then_written_back  # type: ignore[method-assign]
    outcome = wf.run(context(cluster, journal_dir=tmp_path), request())
    assert outcome.report is not None
    assert {r.result for per in outcome.report.nodes for r in per.values()} == {"ok"}
    steps = [e[:2] for e in cluster.kinds("together", "removed-bans", "wait")]
    assert steps[:5] == [
        ("together", "controller-0"),
        ("removed-bans", written_back),
        ("wait",),  # crm_resource --wait,
        ("wait",),  # then settled
        ("together", "controller-1"),
    ]


def test_the_look_for_bans_written_back_reads_the_cib_once_for_every_bundle(
    tmp_path: Path,
) -> None:
    """Before each node's turn and before the lease goes, the bans of every bundle of the
    release are looked for in one CIB read (it was one read per bundle), and a bundle's
    definition comes from the preflight's read under the lease (it was read again for every
    bundle at every node: 12 more reads here)."""
    cluster = cluster_of(stores())
    cluster.record_reads = True
    wf.run(context(cluster, journal_dir=tmp_path), request())
    bundles = len(request().pairs)
    looks = [e for e in cluster.events if e[0] == "find-bans"]
    # One look at every bundle in the preflight (its read is the preflight's own), then one
    # before each of the 3 turns and one before the release: 4 CIB reads in all.
    assert len(looks) == bundles * (1 + 3 + 1)
    assert cluster.cib_queries == 3 + 1


def test_a_failed_node_where_a_bundle_has_no_replica_puts_its_names_back_only(
    tmp_path: Path,
) -> None:
    """rabbitmq has 2 replicas, on controller-0 and controller-1: controller-2 is its spare
    node, where the release moves its names (a failover there starts the new image) and
    restarts nothing. When galera's restart fails there, rabbitmq's names go back and no
    replica of it is expected to start there (it was "the replica of rabbitmq did not start
    again on controller-2", exit 7)."""
    nodes = stores()
    nodes["controller-2"].stop(container_of("controller-2", RABBIT))
    cluster = cluster_of(nodes)
    runtime = cluster.config.find(f"configuration/resources/bundle[@id='{RABBIT}']/podman")
    assert runtime is not None
    runtime.set("replicas", "2")
    failed = RestartFailedError("start of the replica failed", "look at it")
    cluster.restart_errors[("controller-2", GALERA)] = (failed, True)
    with pytest.raises(UpdateFailed, match="release failed on controller-2") as info:
        wf.run(context(cluster, journal_dir=tmp_path), request())
    assert info.value.family.__name__ == "NodeFailed"
    spare = nodes["controller-2"]
    for b in FLOAT:
        assert spare.names[fakes.key(FLOAT[b])] == OLD[b]
    assert ("cleanup", RABBIT, "controller-2") not in cluster.events  # nothing to start
    assert cluster.events[-2] == (  # the node attribute shows the name's image again
        "attribute",
        "controller-2",
        "pcmkimg-rabbitmq",
        "old/rabbitmq-bundle:1",
    )
    report = info.value.report
    assert report is not None
    assert [n["node"] for n in report["nodes"]] == list(NODES)
    services = report["nodes"][2]["services"]
    assert {services[s]["result"] for s in services} == {"rolled-back"}
