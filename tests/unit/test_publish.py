"""The node attribute an update writes is the guard's: its ``attribute`` parameter if set.

Before, the update wrote ``pcmkimg-SERVICE`` whatever the guard was configured with, so a guard
with its own attribute got a second, wrong one beside it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from lxml import etree

from pcmkimg.core import cib, naming
from tests.fakes import FakeCluster
from tests.unit.test_execute_paths import cluster_of, make_session, store_on_old, update


def with_attribute(cluster: FakeCluster, value: str) -> None:
    prim = cluster.config.find(".//primitive[@id='galera-bundle-guard']")
    attrs = prim.find("instance_attributes")
    etree.SubElement(attrs, "nvpair", id="guard-attribute", name="attribute", value=value)


@pytest.mark.parametrize("configured", [None, "mariadb-real-image"])
def test_the_update_writes_the_guards_attribute(tmp_path: Path, configured: str | None) -> None:
    store = store_on_old("controller-0")
    cluster = cluster_of({"controller-0": store}, config="guard.xml")
    if configured:
        with_attribute(cluster, configured)
    guard = cib.bundle(cluster.config, "galera-bundle").guard
    assert guard is not None and guard.attribute == configured
    res, raised = update(make_session(tmp_path, cluster), "controller-0")
    assert raised is None and res.result == "ok"
    names = {e[2] for e in cluster.kinds("attribute")}
    assert names == {configured or "pcmkimg-mariadb"}
    assert naming.attribute_name("mariadb", configured) in names
