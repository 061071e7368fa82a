"""The status document, its table and check's problems (pcmkimg.core.statusdoc,
pcmkimg.core.problems) on hand-built Gathered data and the pcs-made CIB fixtures."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from pcmkimg.core import cib, lease, naming
from pcmkimg.core import problems as P
from pcmkimg.core import statusdoc as D
from pcmkimg.core import survey as S
from pcmkimg.core.errors import UnknownService
from pcmkimg.core.plan import Cluster
from tests.helpers import (
    FLOATING,
    NEW,
    NODES,
    OLD,
    REAL_NEW,
    REAL_OLD,
    cluster,
    container,
    galera,
    gathered,
    jsonschema,
    resolved,
)

SCHEMA = Path(__file__).resolve().parents[2] / "pcmkimg" / "status_schema.json"


def with_failures(cl: Cluster, *failures: dict[str, str]) -> Cluster:
    """``cl`` with more <failure> entries in its crm_mon XML, as crm_mon writes them."""
    mon = copy.deepcopy(cl.mon)
    section = mon.find("failures")
    if section is None:
        section = mon.makeelement("failures", {})
        mon.append(section)
    for attrs in failures:
        base = {"exitstatus": "error", "exitcode": "1", "call": "9", "status": "complete"}
        section.append(mon.makeelement("failure", {**base, "interval": "0", **attrs}))
    return Cluster(cl.config, mon, cib.cluster_status(mon))


# --------------------------------------------------------------------------- floating_bundles


def test_floating_bundles_all_or_by_service_or_bundle_id() -> None:
    cl = cluster()
    every = S.floating_bundles(cl, naming.DEFAULT_SCHEME)
    assert [s.bundle.id for s in every] == [
        "galera-bundle",
        "redis-bundle",
        "rabbitmq-bundle",
        "haproxy-bundle",
        "cinder-volume-bundle",
    ]
    picked = S.floating_bundles(cl, naming.DEFAULT_SCHEME, ["redis", "galera-bundle"])
    assert [(s.service, s.bundle.id) for s in picked] == [
        ("mariadb", "galera-bundle"),
        ("redis", "redis-bundle"),
    ]
    assert [f.name for f in picked[0].nodes] == list(NODES)


def test_floating_bundles_unknown_names_all_listed() -> None:
    with pytest.raises(UnknownService, match="nova, glance"):
        S.floating_bundles(cluster(), naming.DEFAULT_SCHEME, ["redis", "nova", "glance"])


# --------------------------------------------------------------------------- rows


def test_rows_of_a_healthy_guarded_bundle() -> None:
    cl = cluster()
    doc = D.rows(gathered(cl, galera(cl)))
    jsonschema().validate(doc, json.loads(SCHEMA.read_text()))
    assert doc["schema"] == "pcmkimg-status/1" == D.SCHEMA_ID
    assert doc["cluster"] == {"quorum": True, "dc": "controller-0"}
    (svc,) = doc["services"]
    assert {k: svc[k] for k in ("service", "bundle", "floating", "guard", "interleave")} == {
        "service": "mariadb",
        "bundle": "galera-bundle",
        "floating": FLOATING,
        "guard": "wired",
        "interleave": True,
    }
    first = svc["nodes"][0]
    assert first == {
        "node": "controller-0",
        "reachable": True,
        "error": None,
        "can_run": True,
        "floating": {
            "image_id": OLD,
            "short_id": OLD[:12],
            "names": [REAL_OLD],  # the floating and rollback names are left out
            "digest": "sha256:" + OLD,
            "created": "2025-01-02T03:04:05+00:00",
        },
        "container": {"name": "galera-bundle-podman-0", "id": "0" * 64, "image_id": OLD},
        "drift": False,
        "role": "Promoted",
        "guard": "Stopped",  # mon-ok.xml was made without the guard
        "failures": [],
    }


START_FAILED = {
    "operation": "start",
    "resource": "galera-bundle-podman-1",
    "exitcode": 1,
    "exitstatus": "error",
    "reason": "User-injected result",
    "degraded": False,
}


def test_rows_drift_missing_unreachable_and_a_failed_start() -> None:
    cl = cluster(mon="mon-failed-start.xml")
    services = galera(cl)
    g = gathered(
        cl,
        services,
        {
            ("galera-bundle", "controller-0"): S.NodeView(
                "controller-0",
                resolved("controller-0", NEW, REAL_NEW),
                (container("controller-0", "galera-bundle", OLD),),
            ),
            ("galera-bundle", "controller-1"): S.NodeView("controller-1", None, ()),
            ("galera-bundle", "controller-2"): S.NodeView(
                "controller-2", error="controller-2: connection refused"
            ),
        },
    )
    doc = D.rows(g)
    jsonschema().validate(doc, json.loads(SCHEMA.read_text()))
    n0, n1, n2 = doc["services"][0]["nodes"]
    assert n0["drift"] is True and n0["floating"]["names"] == [REAL_NEW]
    assert n0["role"] == "Stopped"  # the container runs, the inner resource does not
    assert n1["floating"] is None and n1["drift"] is False
    assert n1["failures"] == [START_FAILED]
    assert (n2["reachable"], n2["error"], n2["container"]) == (
        False,
        "controller-2: connection refused",
        None,
    )
    lines = D.table(doc)
    assert lines[0] == (f"mariadb  bundle galera-bundle  floating {FLOATING}  guard wired")
    text = "\n".join(lines)
    assert "DRIFT: container runs another image" in text
    assert "MISSING (a restart here would fail)" in text
    assert "unreachable: controller-2: connection refused" in text
    assert "failed start of galera-bundle-podman-1: User-injected result" in text
    assert len(lines) == 1 + 1 + 3  # title, head, one row per node


def stopped_failed_start() -> S.Gathered:
    """The floating name was gone from controller-1 when its replica restarted: the start
    failed (fail-count INFINITY), the replica is stopped, none runs on controller-1."""
    cl = cluster(mon="mon-stopped-failed-start.xml")
    return gathered(
        cl, galera(cl), {("galera-bundle", "controller-1"): S.NodeView("controller-1", None, ())}
    )


def test_rows_a_stopped_replicas_failed_start_is_on_its_node() -> None:
    g = stopped_failed_start()
    doc = D.rows(g)
    jsonschema().validate(doc, json.loads(SCHEMA.read_text()))
    n0, n1, n2 = doc["services"][0]["nodes"]
    assert (n1["role"], n1["container"], n1["floating"]) == ("Stopped", None, None)
    assert n1["failures"] == [START_FAILED]
    assert n0["failures"] == n2["failures"] == []
    text = "\n".join(D.table(doc))
    assert "failed start of galera-bundle-podman-1: User-injected result" in text


def test_rows_failures_of_any_replica_resource_and_the_guard_go_to_their_host() -> None:
    cl = with_failures(
        cluster(),
        # replica 1's container failed on controller-2, where replica 2 runs (a shuffle)
        {"op_key": "galera-bundle-podman-1_start_0", "node": "controller-2", "task": "start"},
        # the inner primitive of replica 0, on its guest node: controller-0 hosts it
        {
            "op_key": "galera_monitor_10000",
            "node": "galera-bundle-0",
            "task": "monitor",
            "interval": "10000",
        },
        {"op_key": "galera-bundle-1_start_0", "node": "controller-0", "task": "start"},
        {"op_key": "galera-bundle-guard_start_0", "node": "controller-1", "task": "start"},
        {"op_key": "redis-bundle-podman-1_start_0", "node": "controller-1", "task": "start"},
    )
    doc = D.rows(gathered(cl, galera(cl)))
    n0, n1, n2 = ([f["resource"] for f in n["failures"]] for n in doc["services"][0]["nodes"])
    assert n0 == ["galera", "galera-bundle-1"]
    assert n1 == ["galera-bundle-guard"]  # not redis-bundle's
    assert n2 == ["galera-bundle-podman-1"]


def test_rows_degraded_monitor_is_marked_degraded() -> None:
    cl = cluster(mon="mon-degraded.xml")
    doc = D.rows(gathered(cl, galera(cl)))
    (fail,) = doc["services"][0]["nodes"][0]["failures"]
    assert (fail["operation"], fail["exitcode"], fail["degraded"]) == ("monitor", 190, True)
    assert "degraded monitor of galera-bundle-podman-0" in "\n".join(D.table(doc))


def test_rows_without_services_and_the_schema_accepts_it() -> None:
    doc = D.rows(S.Gathered(cluster(mon="mon-no-quorum.xml"), []))
    jsonschema().validate(doc, json.loads(SCHEMA.read_text()))
    assert doc["services"] == [] and doc["cluster"]["quorum"] is False
    assert D.table(doc) == ["no bundle runs behind a floating name"]


def test_the_schema_rejects_what_it_does_not_document() -> None:
    js = jsonschema()
    schema = json.loads(SCHEMA.read_text())
    js.Draft202012Validator.check_schema(schema)
    assert schema["$id"] == D.SCHEMA_ID
    cl = cluster()
    good = D.rows(gathered(cl, galera(cl)))
    for change in (
        lambda d: d.update(schema="pcmkimg-status/2"),
        lambda d: d["services"][0]["nodes"][0].update(extra=1),
        lambda d: d["services"][0]["nodes"][0]["floating"].update(image_id="nothex"),
        lambda d: d["services"][0].update(guard="maybe"),
        lambda d: d["cluster"].pop("dc"),
    ):
        bad = copy.deepcopy(good)
        change(bad)
        with pytest.raises(js.ValidationError):
            js.validate(bad, schema)


# --------------------------------------------------------------------------- problems


def kinds(problems: list[P.Problem]) -> list[str]:
    return sorted(p.kind for p in problems)


def test_no_problems_on_a_healthy_guarded_setup() -> None:
    cl = cluster()
    assert P.problems(gathered(cl, galera(cl))) == []


def test_every_problem_kind_is_listed_with_its_fix() -> None:
    cl = cluster(config="bans.xml")  # no guard, no interleave, cli-ban leftovers
    cfg = copy.deepcopy(cl.config)
    for nv in cfg.iterfind(".//rsc_defaults//nvpair[@name='resource-stickiness']"):
        nv.set("value", "0")
    held = lease.Lease("controller-1", 4242, "tok", 30.0, 5, 1_900_000_000.0)
    change = cib.set_ticket_attribute(cfg, lease.TICKET, lease.ATTRIBUTE, held.encode())
    cl = Cluster(change.new_cib, cl.mon, cl.status)
    g = gathered(
        cl,
        galera(cl),
        {
            ("galera-bundle", "controller-1"): S.NodeView("controller-1"),
            ("galera-bundle", "controller-2"): S.NodeView("controller-2", error="ssh: refused"),
        },
    )
    found = P.problems(g)
    assert kinds(found) == [
        "lease-held",
        "leftover-ban",
        "leftover-ban",
        "leftover-ban",
        "leftover-ban",
        "no-guard",
        "no-interleave",
        "stickiness",
        "unreachable",
        "unresolved",
    ]
    text = {p.kind: p.message for p in found}
    assert "pcmkimg guard add galera-bundle" in text["no-guard"]
    assert (
        "crm_resource --resource galera-bundle --meta --set-parameter interleave "
        "--parameter-value true"
    ) in text["no-interleave"]
    assert "resource-stickiness=INFINITY" in text["stickiness"]
    assert text["unreachable"] == "controller-2: ssh: refused"
    assert "--node controller-1 mariadb" in text["unresolved"]
    assert text["lease-held"].endswith(
        "pid 4242 on controller-1 (renewal 5 at 2030-03-17T17:46:40Z by its clock; "
        "it lapses 30s after the last renewal)"
    )
    bans = [p.message for p in found if p.kind == "leftover-ban"]
    assert any("cli-ban-galera-bundle-on-controller-1" in m for m in bans)
    assert all("crm_resource --clear --resource" in m for m in bans)


def test_an_unreadable_lease_is_a_problem_with_its_fix_not_a_stop() -> None:
    cl = cluster()
    change = cib.set_ticket_attribute(
        cl.config, lease.TICKET, lease.ATTRIBUTE, "owner=someone-else"
    )
    cl = Cluster(change.new_cib, cl.mon, cl.status)
    (found,) = P.problems(gathered(cl, galera(cl)))
    assert found.kind == "lease-unreadable"
    assert "'owner=someone-else'" in found.message
    assert found.message.endswith(
        "fix: crm_ticket --ticket pcmkimg-lease --cleanup once no pcmkimg runs"
    )
    old = cib.set_cluster_property(cluster().config, lease.LEGACY_PROPERTY, "owner=x").new_cib
    (found,) = P.problems(gathered(Cluster(old, cl.mon, cl.status), galera(cl)))
    assert found.kind == "lease-unreadable" and "cluster property pcmkimg-lease" in found.message
    assert found.message.endswith(
        "fix: crm_attribute --type crm_config --name pcmkimg-lease --delete once no pcmkimg runs"
    )


def test_a_partial_guard_and_a_banned_node_that_may_lack_the_name() -> None:
    cl = cluster()
    cfg = copy.deepcopy(cl.config)
    (order,) = cfg.xpath("//rsc_order[@id='galera-bundle-guard-order']")
    order.getparent().remove(order)
    cons = cfg.find("configuration/constraints")
    cons.append(
        cfg.makeelement(
            "rsc_location",
            {"id": "never-2", "rsc": "galera-bundle", "node": "controller-2", "score": "-INFINITY"},
        )
    )
    cl = Cluster(cfg, cl.mon, cl.status)
    services = galera(cl)
    assert [f.can_run for f in services[0].nodes] == [True, True, False]
    g = gathered(cl, services, {("galera-bundle", "controller-2"): S.NodeView("controller-2")})
    found = P.problems(g)
    assert kinds(found) == ["guard-incomplete"]  # controller-2 may lack the floating name
    assert D.rows(g)["services"][0]["guard"] == "partial"
    assert D.rows(g)["services"][0]["nodes"][2]["can_run"] is False


def test_problems_are_listed_once() -> None:
    cl = cluster(config="base.xml")
    services = S.floating_bundles(cl, naming.DEFAULT_SCHEME, ["mariadb", "galera-bundle"])
    found = P.problems(gathered(cl, services))
    assert len(found) == len({(p.kind, p.message) for p in found})


def test_check_reports_a_stopped_replicas_failed_start_with_the_cleanup() -> None:
    g = stopped_failed_start()
    found = P.problems(g)
    assert kinds(found) == ["failed", "unresolved"]
    failed = next(p.message for p in found if p.kind == "failed")
    assert failed == (
        "start of galera-bundle-podman-1 failed on controller-1: User-injected result (rc 1); "
        "fix the cause, then: crm_resource --cleanup --resource galera-bundle --node controller-1"
    )


def test_check_reports_failures_on_guest_nodes_and_of_the_guard() -> None:
    cl = with_failures(
        cluster(),
        {
            "op_key": "galera_promote_0",
            "node": "galera-bundle-2",
            "task": "promote",
            "exitreason": "no quorum",
        },
        {"op_key": "galera-bundle-guard_start_0", "node": "controller-1", "task": "start"},
    )
    messages = sorted(p.message for p in P.problems(gathered(cl, galera(cl))))
    assert messages == [
        "promote of galera failed on galera-bundle-2 (on controller-2): no quorum (rc 1); fix "
        "the cause, then: crm_resource --cleanup --resource galera-bundle --node galera-bundle-2",
        "start of galera-bundle-guard failed on controller-1: error (rc 1); fix the cause, "
        "then: crm_resource --cleanup --resource galera-bundle-guard --node controller-1",
    ]


def test_check_leaves_a_degraded_monitor_to_status() -> None:
    cl = cluster(mon="mon-degraded.xml")
    assert cl.status.degraded and P.problems(gathered(cl, galera(cl))) == []


def test_check_reports_drift_with_the_update_that_restarts_onto_the_named_image() -> None:
    # The floating name on controller-0 was moved to NEW; the replica still runs OLD.
    cl = cluster()
    g = gathered(
        cl,
        galera(cl),
        {
            ("galera-bundle", "controller-0"): S.NodeView(
                "controller-0",
                resolved("controller-0", NEW, REAL_NEW),
                (container("controller-0", "galera-bundle", OLD),),
            )
        },
    )
    assert D.rows(g)["services"][0]["nodes"][0]["drift"] is True
    (drift,) = P.problems(g)
    assert drift == P.Problem(
        "drift",
        f"galera-bundle-podman-0 on controller-0 runs image {OLD[:12]}, but {FLOATING} names "
        f"{NEW[:12]} there: a restart would change its image; fix: pcmkimg update --node "
        f"controller-0 mariadb --image {REAL_NEW} restarts it onto that image",
    )


def test_a_leftover_pin_is_a_problem_with_its_fix() -> None:
    """A restart killed with SIGKILL leaves the bundle's pin (until its lifetime ends)."""
    from datetime import datetime, timezone

    from pcmkimg.core import restart

    cl = cluster()
    cfg = copy.deepcopy(cl.config)
    end = restart.lifetime_end(datetime.now(timezone.utc), 60)
    pin = restart.pin_element("galera-bundle", end)[0]
    bundle = cfg.find(".//bundle[@id='galera-bundle']")
    assert bundle is not None
    bundle.append(pin)
    cl = Cluster(cfg, cl.mon, cl.status)
    found = P.problems(gathered(cl, galera(cl)))
    assert kinds(found) == ["leftover-pin"]
    assert "cibadmin --delete --xpath" in found[0].message
    assert "galera-bundle-pcmkimg-pin" in found[0].message
