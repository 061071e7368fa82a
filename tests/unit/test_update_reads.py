"""The update's node step reads the cluster once where it read it twice (issue 23): the
bundle's definition (its guard, its replicas) comes from the preflight's read under the lease,
not from a whole-CIB read in the guard's cleanup check and another for the node attribute;. With the
fakes of tests/fakes.py."""

from __future__ import annotations

from pathlib import Path

from pcmkimg.core import plan, release
from pcmkimg.core.reference import parse
from pcmkimg.core.report import UpdateReport
from pcmkimg.workflows.release import execute
from tests.fakes import FakeCluster
from tests.unit.test_execute_paths import (
    BUNDLE,
    NEW_REF,
    TIMEOUT,
    cluster_of,
    make_session,
    store_on_old,
    update,
)


def test_the_node_step_takes_the_bundle_from_the_preflight_read(tmp_path: Path) -> None:
    cluster = cluster_of({"controller-0": store_on_old("controller-0")})
    session = make_session(tmp_path, cluster)
    session.snapshot = cluster.read_cluster().config
    res, error = update(session, "controller-0")
    assert error is None and res.result == "ok"
    assert cluster.cib_queries == 0
    assert ("attribute", "controller-0", "pcmkimg-mariadb", NEW_REF) in cluster.events


def test_without_a_preflight_read_the_bundle_is_read_now(tmp_path: Path) -> None:
    cluster = cluster_of({"controller-0": store_on_old("controller-0")})
    res, error = update(make_session(tmp_path, cluster), "controller-0")
    assert error is None and res.result == "ok"
    assert cluster.cib_queries == 2  # the guard's cleanup check, the node attribute


def test_a_whole_update_keeps_the_preflight_read(tmp_path: Path) -> None:
    cluster = FakeCluster({"controller-0": store_on_old("controller-0")}, timeout=TIMEOUT)
    session = make_session(tmp_path, cluster)
    facts = plan.node_facts(cluster.read_cluster(), BUNDLE.id)
    the_plan = plan.plan_update(BUNDLE, parse(NEW_REF), facts, ["controller-0"])
    report = UpdateReport(BUNDLE.id, BUNDLE.service, NEW_REF)
    execute(session, release.of_update(the_plan), report)
    assert [n.result for n in report.nodes] == ["ok"]
    # The lease's own writes read through update_cib; the only CIB reads are the look for
    # bans written back, before the node and before the release (one each, every bundle).
    assert cluster.cib_queries == 2
    assert session.holding is None  # released at the end
