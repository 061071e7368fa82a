"""Helpers the tests share (data builders, not tests): a test module imports them from here,
never from another test module.

The status data: a cluster read from the pcs-made CIB fixtures, and hand-built views of the
nodes' stores (every node healthy unless told otherwise).
"""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from pcmkimg.core import cib, naming
from pcmkimg.core.images import Container, ImageInfo, Resolved
from pcmkimg.core.plan import Cluster
from pcmkimg.core.survey import Gathered, NodeView, Service, floating_bundles
from tests import fixtures

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
    cfg = fixtures.cib(config)
    m = fixtures.mon(mon)
    # crm_simulate (which made the fixtures) lists the bundles' guest nodes as members; a live
    # crm_mon lists them as type="remote", which is what node_facts expects.
    for node in m.iterfind("nodes/node"):
        if not node.get("id", "").isdigit():
            node.set("type", "remote")
    return Cluster(cfg, m, cib.cluster_status(m))


def resolved(node: str, image_id: str, real: str, name: str = FLOATING) -> Resolved:
    info = ImageInfo(
        id=image_id,
        digest="sha256:" + image_id[::-1],
        repo_digests=(),
        names=(real, name, "cluster.common.tag/mariadb:pcmkprevious"),
        created=datetime(2025, 1, 2, 3, 4, 5, tzinfo=timezone.utc),
    )
    return Resolved(node, name, info)


def container(node: str, bundle: str, image_id: str) -> Container:
    index = NODES.index(node)
    return Container(f"/{bundle}-podman-{index}", f"{index}" * 64, "x", image_id, "running")


def gathered(cl: Cluster, services: list[Service], views: dict | None = None) -> Gathered:  # type: ignore[type-arg]
    """Every node healthy: the floating name resolves to OLD and the container runs OLD."""
    g = Gathered(cl, services)
    for s in services:
        for f in s.nodes:
            g.views[(s.bundle.id, f.name)] = NodeView(
                f.name,
                resolved(f.name, OLD, REAL_OLD, s.floating),
                (container(f.name, s.bundle.id, OLD),) if f.name in NODES else (),
            )
    g.views.update(views or {})
    return g


def galera(cl: Cluster) -> list[Service]:
    return floating_bundles(cl, naming.DEFAULT_SCHEME, ["mariadb"])
