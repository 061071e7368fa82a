"""The in-place restart's pure parts: its constraints (with their lifetime) and the watch's
decisions on sequences of crm_mon documents (issue 14)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from lxml import etree

from pcmkimg.core import cib, restart
from pcmkimg.core.errors import RestartRefusedError
from tests import fixtures

BUNDLE = "galera-bundle"
NODE = "controller-1"


def stopped(mon: etree._Element, container: str) -> etree._Element:
    """``mon`` with the replica of ``container`` stopped (every resource of its replica)."""
    el = mon.find(f".//resource[@id='{container}']")
    assert el is not None
    for res in el.getparent().findall("resource"):
        res.set("active", "false")
        res.set("role", "Stopped")
        res.set("nodes_running_on", "0")
        for child in list(res):
            res.remove(child)
    return mon


def moved(mon: etree._Element, container: str, node: str) -> etree._Element:
    el = mon.find(f".//resource[@id='{container}']/node")
    assert el is not None
    el.set("name", node)
    return mon


def inner_stopped(mon: etree._Element, replica: str) -> etree._Element:
    """The container runs, the inner resource has not started yet."""
    el = mon.find(f".//bundle[@id='{BUNDLE}']/replica[@id='{replica}']/resource[@id='galera']")
    assert el is not None
    el.set("active", "false")
    el.set("role", "Stopped")
    return mon


def state(mon: etree._Element) -> cib.ClusterStatus:
    return cib.cluster_status(mon)


# --------------------------------------------------------------------------- constraints


def test_lifetime_end_is_timeout_plus_margin_in_utc_rounded_up() -> None:
    now = datetime(2026, 12, 1, 10, 0, 0, 250000, tzinfo=timezone.utc)
    assert restart.lifetime_end(now, 60, margin=30) == "2026-12-01 10:01:31Z"
    assert restart.lifetime_end(now, 120) == "2026-12-01 10:02:31Z"  # 120 s + 30 s
    assert restart.lifetime_end(now, 8) == "2026-12-01 10:00:14Z"  # at least 5 s more
    exact = datetime(2026, 12, 1, 23, 59, 50, tzinfo=timezone.utc)
    assert restart.lifetime_end(exact, 5, margin=5) == "2026-12-02 00:00:00Z"


def test_ban_element_is_the_rule_crm_resource_writes_with_our_rule_id() -> None:
    el = restart.ban_element(BUNDLE, NODE, "2026-12-01 10:01:31Z")
    cid = "cli-ban-galera-bundle-on-controller-1"
    assert (el.tag, el.get("id"), el.get("rsc"), el.get("role")) == (
        "rsc_location",
        cid,
        BUNDLE,
        None,  # every role: a promoted instance is banned too
    )
    assert el.get("node") is None and el.get("score") is None  # the rule scores, not the node
    (rule,) = el
    assert (rule.get("id"), rule.get("score"), rule.get("boolean-op")) == (
        f"{cid}-pcmkimg",
        "-INFINITY",
        "and",
    )
    node, date = rule
    assert (node.tag, node.get("attribute"), node.get("operation"), node.get("value")) == (
        "expression",
        "#uname",
        "eq",
        NODE,
    )
    assert (date.tag, date.get("operation"), date.get("end")) == (
        "date_expression",
        "lt",
        "2026-12-01 10:01:31Z",
    )


def test_bans_xml_holds_one_ban_per_node() -> None:
    text = restart.bans_xml(BUNDLE, [NODE, "controller-2"], "2026-12-01 10:01:31Z")
    root = etree.fromstring(text)
    assert root.tag == "constraints"
    assert [c.get("id") for c in root] == [
        "cli-ban-galera-bundle-on-controller-1",
        "cli-ban-galera-bundle-on-controller-2",
    ]
    ids = [c.get("id") for c in root]
    # In a CIB, they are ours and the check lists them with their node.
    config = fixtures.cib("base.xml")
    constraints = config.find("configuration/constraints")
    assert constraints is not None
    constraints.extend(root)
    assert restart.own_bans(config, BUNDLE) == ids
    listed = {(c.id, c.resource, c.node) for c in cib.cli_constraints(config)}
    assert ("cli-ban-galera-bundle-on-controller-2", BUNDLE, "controller-2") in listed


def test_own_bans_leave_an_operators_ban_alone() -> None:
    config = fixtures.cib("base.xml")
    constraints = config.find("configuration/constraints")
    assert constraints is not None
    theirs = restart.ban_element(BUNDLE, "controller-0", "2026-12-01 10:01:31Z")
    theirs[0].set("id", "cli-ban-galera-bundle-on-controller-0-rule")  # crm_resource's rule id
    constraints.append(theirs)
    constraints.append(restart.ban_element("redis-bundle", NODE, "2026-12-01 10:01:31Z"))
    constraints.append(restart.ban_element(BUNDLE, NODE, "2026-12-01 10:01:31Z"))
    assert restart.own_bans(config, BUNDLE) == ["cli-ban-galera-bundle-on-controller-1"]
    with pytest.raises(RestartRefusedError, match="exists already"):
        restart.check_no_bans(config, BUNDLE, ["controller-0"])
    restart.check_no_bans(config, BUNDLE, ["controller-2"])


def test_hold_nodes_are_the_cluster_nodes_without_a_replica() -> None:
    mon = fixtures.mon("mon-ok.xml")
    assert restart.hold_nodes(state(mon), BUNDLE, NODE) == []  # 3 of 3: nowhere else to go
    two = stopped(fixtures.mon("mon-ok.xml"), "galera-bundle-podman-2")  # 2 of 3 running
    assert restart.hold_nodes(state(two), BUNDLE, NODE) == ["controller-2"]


# --------------------------------------------------------------------------- the watch


def run_watch(
    looks: list[tuple[etree._Element, bool | None]], node: str = NODE
) -> list[restart.Verdict]:
    config = fixtures.cib("base.xml")
    before = state(fixtures.mon("mon-ok.xml"))
    bundle = cib.bundle(config, BUNDLE)
    replica = restart.check_restartable(config, before, BUNDLE, node)
    phase: restart.Phase = "stopping"
    verdicts = []
    for mon, idle in looks:
        verdict = restart.judge(
            phase, restart.Seen(state(mon), idle), before.failures, bundle, replica, node
        )
        verdicts.append(verdict)
        if verdict.failed:
            break
        phase = verdict.phase
    return verdicts


def ok() -> etree._Element:
    return fixtures.mon("mon-ok.xml")


def test_a_restart_stops_unbans_starts_releases_and_settles() -> None:
    down = stopped(ok(), "galera-bundle-podman-1")
    looks = [
        (ok(), None),  # not stopped yet
        (down, None),  # stopped: unban
        (down, None),
        (inner_stopped(ok(), "1"), None),  # container up, galera not yet
        (ok(), None),  # active: release the other nodes
        (ok(), False),  # a transition runs
        (ok(), True),
        (ok(), False),  # idle once is not enough
        (ok(), True),
        (ok(), True),
    ]
    verdicts = run_watch(looks)
    assert [(v.phase, v.act) for v in verdicts] == [
        ("stopping", ""),
        ("starting", "unban"),
        ("starting", ""),
        ("starting", ""),
        ("settling", "release"),
        ("settling", ""),
        ("settled", ""),
        ("settling", ""),
        ("settled", ""),
        ("done", ""),
    ]


def test_a_new_failed_start_fails_the_watch_at_once() -> None:
    looks = [
        (stopped(ok(), "galera-bundle-podman-1"), None),
        (fixtures.mon("mon-failed-start.xml"), None),
    ]
    verdicts = run_watch(looks)
    assert verdicts[-1].failed == "failed"
    assert [f.op_key for f in verdicts[-1].failures] == ["galera-bundle-podman-1_start_0"]


def test_the_replica_on_another_node_fails_the_watch() -> None:
    looks = [
        (stopped(ok(), "galera-bundle-podman-1"), None),
        (moved(ok(), "galera-bundle-podman-1", "controller-2"), None),
    ]
    verdicts = run_watch(looks)
    assert "started on controller-2, not on controller-1" in verdicts[-1].failed


def test_settling_needs_the_replica_still_up() -> None:
    down = stopped(ok(), "galera-bundle-podman-1")
    verdicts = run_watch([(down, None), (ok(), None), (ok(), True), (down, True), (ok(), True)])
    assert [v.phase for v in verdicts] == ["starting", "settling", "settled", "settling", "settled"]


def test_controller_idle_reads_crmadmin_xml() -> None:
    def doc(state: str) -> etree._Element:
        return etree.fromstring(
            f'<pacemaker-result api-version="2.25"><crmd node_name="c" state="{state}" '
            'result="ok"/><status code="0" message="OK"/></pacemaker-result>'
        )

    assert restart.controller_idle(doc("S_IDLE"))
    assert not restart.controller_idle(doc("S_TRANSITION_ENGINE"))
    assert not restart.controller_idle(etree.fromstring("<pacemaker-result/>"))


def test_another_replica_on_the_node_fails_the_watch_at_once() -> None:
    """Issue 22 item 5, seen live: a stale replace of the configuration (``pcs resource
    update``) wrote an earlier node's ban back, and that node's replica moved onto the node
    being restarted, in our replica's place. The watch fails at once (it waited its whole
    timeout for a replica that could not come back there)."""
    looks = [
        (stopped(ok(), "galera-bundle-podman-1"), None),
        (moved(stopped(ok(), "galera-bundle-podman-1"), "galera-bundle-podman-2", NODE), None),
    ]
    verdicts = run_watch(looks)
    assert not verdicts[0].failed
    assert "replica 2 of galera-bundle started on controller-1" in str(verdicts[-1].failed)
