"""status.rows / table / problems on hand-built Gathered data and the pcs-made CIB fixtures."""

from __future__ import annotations

import copy
import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from pcmkimg import cib, images, lease, naming
from pcmkimg import status as S
from pcmkimg.execute import Cluster
from pcmkimg.plan import UnknownService

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "cib"
SCHEMA = Path(__file__).resolve().parents[2] / "pcmkimg" / "status_schema.json"
NODES = ("controller-0", "controller-1", "controller-2")
OLD, NEW = "a" * 64, "b" * 64
REAL_OLD = "reg.example.com:8787/ns1/mariadb:17.1.1"
REAL_NEW = "reg.example.com:8787/ns2/mariadb:17.1.2"
FLOATING = "cluster.common.tag/mariadb:pcmklatest"


def jsonschema():  # type: ignore[no-untyped-def]
    try:
        import jsonschema as js
    except ImportError:  # pragma: no cover - the tox env has it
        pytest.fail(
            "jsonschema is not installed: add `jsonschema` to the deps of [testenv] in tox.ini",
            pytrace=False,
        )
    return js


def cluster(config: str = "guard.xml", mon: str = "mon-ok.xml") -> Cluster:
    cfg = cib.parse_cib((FIXTURES / config).read_bytes())
    m = cib.parse_crm_mon((FIXTURES / mon).read_bytes())
    # crm_simulate (which made the fixtures) lists the bundles' guest nodes as members; a live
    # crm_mon lists them as type="remote", which is what node_facts expects.
    for node in m.iterfind("nodes/node"):
        if not node.get("id", "").isdigit():
            node.set("type", "remote")
    return Cluster(cfg, m, cib.cluster_status(m))


def resolved(node: str, image_id: str, real: str, name: str = FLOATING) -> images.Resolved:
    info = images.ImageInfo(
        id=image_id,
        digest="sha256:" + image_id[::-1],
        repo_digests=(),
        names=(real, name, "cluster.common.tag/mariadb:pcmkprevious"),
        created=datetime(2025, 1, 2, 3, 4, 5, tzinfo=timezone.utc),
    )
    return images.Resolved(node, name, info)


def container(node: str, bundle: str, image_id: str) -> images.Container:
    index = NODES.index(node)
    return images.Container(f"/{bundle}-podman-{index}", f"{index}" * 64, "x", image_id, "running")


def gathered(cl: Cluster, services: list[S.Service], views: dict | None = None) -> S.Gathered:
    """Every node healthy: the floating name resolves to OLD and the container runs OLD."""
    g = S.Gathered(cl, services)
    for s in services:
        for f in s.nodes:
            g.views[(s.bundle.id, f.name)] = S.NodeView(
                f.name,
                resolved(f.name, OLD, REAL_OLD, s.floating),
                (container(f.name, s.bundle.id, OLD),) if f.name in NODES else (),
            )
    g.views.update(views or {})
    return g


def galera(cl: Cluster) -> list[S.Service]:
    return S.floating_bundles(cl, naming.DEFAULT_SCHEME, ["mariadb"])


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
    doc = S.rows(gathered(cl, galera(cl)))
    jsonschema().validate(doc, json.loads(SCHEMA.read_text()))
    assert doc["schema"] == "pcmkimg-status/1" == S.SCHEMA_ID
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
    doc = S.rows(g)
    jsonschema().validate(doc, json.loads(SCHEMA.read_text()))
    n0, n1, n2 = doc["services"][0]["nodes"]
    assert n0["drift"] is True and n0["floating"]["names"] == [REAL_NEW]
    assert n0["role"] == "Stopped"  # the container runs, the inner resource does not
    assert n1["floating"] is None and n1["drift"] is False
    assert n1["failures"] == [
        {
            "operation": "start",
            "resource": "galera-bundle-podman-1",
            "exitcode": 1,
            "exitstatus": "error",
            "reason": "User-injected result",
            "degraded": False,
        }
    ]
    assert (n2["reachable"], n2["error"], n2["container"]) == (
        False,
        "controller-2: connection refused",
        None,
    )
    lines = S.table(doc)
    assert lines[0] == (f"mariadb  bundle galera-bundle  floating {FLOATING}  guard wired")
    text = "\n".join(lines)
    assert "DRIFT: container runs another image" in text
    assert "MISSING (a restart here would fail)" in text
    assert "unreachable: controller-2: connection refused" in text
    assert "failed start of galera-bundle-podman-1: User-injected result" in text
    assert len(lines) == 1 + 1 + 3  # title, head, one row per node


def test_rows_degraded_monitor_is_marked_degraded() -> None:
    cl = cluster(mon="mon-degraded.xml")
    doc = S.rows(gathered(cl, galera(cl)))
    (fail,) = doc["services"][0]["nodes"][0]["failures"]
    assert (fail["operation"], fail["exitcode"], fail["degraded"]) == ("monitor", 190, True)
    assert "degraded monitor of galera-bundle-podman-0" in "\n".join(S.table(doc))


def test_rows_without_services_and_the_schema_accepts_it() -> None:
    doc = S.rows(S.Gathered(cluster(mon="mon-no-quorum.xml"), []))
    jsonschema().validate(doc, json.loads(SCHEMA.read_text()))
    assert doc["services"] == [] and doc["cluster"]["quorum"] is False
    assert S.table(doc) == ["no bundle runs behind a floating name"]


def test_the_schema_rejects_what_it_does_not_document() -> None:
    js = jsonschema()
    schema = json.loads(SCHEMA.read_text())
    js.Draft202012Validator.check_schema(schema)
    assert schema["$id"] == S.SCHEMA_ID
    cl = cluster()
    good = S.rows(gathered(cl, galera(cl)))
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


def kinds(problems: list[S.Problem]) -> list[str]:
    return sorted(p.kind for p in problems)


def test_no_problems_on_a_healthy_guarded_setup() -> None:
    cl = cluster()
    assert S.problems(gathered(cl, galera(cl))) == []


def test_every_problem_kind_is_listed_with_its_fix() -> None:
    cl = cluster(config="bans.xml")  # no guard, no interleave, cli-ban leftovers
    cfg = copy.deepcopy(cl.config)
    for nv in cfg.iterfind(".//rsc_defaults//nvpair[@name='resource-stickiness']"):
        nv.set("value", "0")
    held = lease.Lease("controller-1", 4242, "tok", 1_900_000_000.0)
    change = cib.set_cluster_property(cfg, lease.PROPERTY, held.encode())
    cl = Cluster(change.new_cib, cl.mon, cl.status)
    g = gathered(
        cl,
        galera(cl),
        {
            ("galera-bundle", "controller-1"): S.NodeView("controller-1"),
            ("galera-bundle", "controller-2"): S.NodeView("controller-2", error="ssh: refused"),
        },
    )
    found = S.problems(g)
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
    assert "meta interleave=true" in text["no-interleave"]
    assert "resource-stickiness=INFINITY" in text["stickiness"]
    assert text["unreachable"] == "controller-2: ssh: refused"
    assert "--node controller-1 mariadb" in text["unresolved"]
    assert text["lease-held"].endswith("pid 4242 on controller-1 until 2030-03-17T17:46:40Z")
    bans = [p.message for p in found if p.kind == "leftover-ban"]
    assert any("cli-ban-galera-bundle-on-controller-1" in m for m in bans)
    assert all("crm_resource --clear --resource" in m for m in bans)


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
    found = S.problems(g)
    assert kinds(found) == ["guard-incomplete"]  # controller-2 may lack the floating name
    assert S.rows(g)["services"][0]["guard"] == "partial"
    assert S.rows(g)["services"][0]["nodes"][2]["can_run"] is False


def test_problems_are_listed_once() -> None:
    cl = cluster(config="base.xml")
    services = S.floating_bundles(cl, naming.DEFAULT_SCHEME, ["mariadb", "galera-bundle"])
    found = S.problems(gathered(cl, services))
    assert len(found) == len({(p.kind, p.message) for p in found})
