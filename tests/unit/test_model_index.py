"""The model is linear in the bundles (issue 14): the configuration is walked a fixed number of
times whatever the number of bundles, and the indexed lookups answer as the scans did."""

from __future__ import annotations

import pytest
from lxml import etree

from bench import cibgen
from pcmkimg.core import cib, naming, plan
from pcmkimg.core.cib import read
from pcmkimg.core.survey import floating_bundles
from tests import fixtures


def _cluster(nodes: int, bundles: int) -> plan.Cluster:
    config = cib.parse_cib(cibgen.grow(nodes, bundles, replicas=2))
    mon = cib.parse_crm_mon(cibgen.mon_xml(nodes, bundles, replicas=2))
    return plan.Cluster(config, mon, cib.cluster_status(mon))


@pytest.mark.parametrize("bundles", [5, 40])
def test_the_configuration_is_walked_a_fixed_number_of_times(bundles: int) -> None:
    """Counted by the tree itself: its elements are of a class that counts every walk of the
    configuration section (``iter()`` on ``<configuration>``); nothing of pcmkimg is replaced."""
    walks: list[str] = []

    class Counted(etree.ElementBase):
        def iter(self, *tags, **kw):  # type: ignore[no-untyped-def,override]
            if self.tag == "configuration":
                walks.append(repr(tags))
            return super().iter(*tags, **kw)

    parser = etree.XMLParser(remove_blank_text=True)
    parser.set_element_class_lookup(etree.ElementDefaultClassLookup(element=Counted))
    config = etree.fromstring(cibgen.grow(4, bundles, replicas=2), parser)
    assert cib.cib_version(config) and isinstance(config.find("configuration"), Counted)
    cluster = _cluster(4, bundles)
    cluster = plan.Cluster(config, cluster.mon, cluster.status)
    found = floating_bundles(cluster, naming.DEFAULT_SCHEME)
    assert len(found) == bundles
    assert all(s.bundle.guard is not None and s.bundle.guard.complete for s in found)
    assert len(walks) == 1, walks  # one index, not one scan per bundle
    assert all(len(s.nodes) == 4 for s in found)
    # The count sees the walks it judges: one more lookup by id is one more walk.
    assert read._by_id(config, found[0].bundle.id) is not None
    assert len(walks) == 2


def test_indexed_lookups_answer_as_the_scans() -> None:
    status = fixtures.status("mon-failed-start.xml")
    for r in status.replicas:
        if r.node:
            first = next(
                x for x in status.replicas if x.bundle_id == r.bundle_id and x.node == r.node
            )
            assert status.replica_on(r.bundle_id, r.node) is first
        assert status.replicas_of(r.bundle_id) == [
            x for x in status.replicas if x.bundle_id == r.bundle_id
        ]
    for n in status.nodes:
        assert status.node(n.name) is next(x for x in status.nodes if x.name == n.name)
    assert status.node("nosuch") is None and status.replica_on("nosuch", "x") is None
    for bundle_id in {r.bundle_id for r in status.replicas}:
        got = [f for _, f in status.bundle_failures(bundle_id)]
        # crm_mon's order, every failure of the bundle's resources
        assert got == sorted(got, key=status.failures.index)
    assert any(status.bundle_failures(b) for b in {r.bundle_id for r in status.replicas})


def test_node_facts_of_every_bundle_equals_node_facts_of_each() -> None:
    cluster = _cluster(3, 6)
    every = plan.node_facts_of(cluster, cib.bundles(cluster.config))
    for b in cib.bundles(cluster.config):
        assert every[b.id] == plan.node_facts(cluster, b.id)
