"""Synthetic CIBs for the status and model benchmarks, grown from the real fixtures.

The fixtures in ``tests/fixtures/cib`` were made by pcs and crm_simulate. :func:`grow` takes
their cluster options and defaults, their plain ``haproxy-bundle`` (pcs-made) as the bundle
template, and their recorded operations (the start, the recurring monitor and the probe of
``haproxy-bundle-podman-0``) as the status templates, and makes a cluster of ``nodes`` nodes
and ``bundles`` bundles, each guarded (``cib.add_guard``), each with ``replicas`` replicas
placed round-robin, with the operation history Pacemaker keeps for it: on every node a probe
of every replica, and the start and the monitor where the replica runs, the same for every
guard instance. :func:`mon_xml` writes the matching ``crm_mon --output-as=xml`` document from
the templates of ``mon-ok.xml`` (``crm_mon`` itself takes minutes on the largest file).
``crm_verify -x`` checks what :func:`grow` writes (see ``bench/status_figures.py``).
"""

from __future__ import annotations

import copy
from pathlib import Path

from lxml import etree

from pcmkimg.core import cib as C
from tests import fixtures

TEMPLATE = "haproxy-bundle"


def service(i: int) -> str:
    return f"svc{i:03d}"


def bundle_id(i: int) -> str:
    return f"{service(i)}-bundle"


def floating(i: int) -> str:
    return f"cluster.common.tag/{service(i)}:pcmklatest"


def node_name(n: int) -> str:
    return f"controller-{n}"


def placement(i: int, replica: int, nodes: int) -> int:
    """The node (index) where replica ``replica`` of bundle ``i`` runs."""
    return (i + replica) % nodes


def _renamed(el: etree._Element, old: str, new: str) -> etree._Element:
    text = etree.tostring(el, encoding="unicode").replace(old, new)
    return etree.fromstring(text)


def _configuration(nodes: int, bundles: int, replicas: int, guards: bool) -> etree._Element:
    tree = fixtures.cib("status-ok.xml")
    status = tree.find("status")
    if status is not None:
        tree.remove(status)
    config = tree.find("configuration")
    assert config is not None
    node_section = config.find("nodes")
    assert node_section is not None
    for child in list(node_section):
        node_section.remove(child)
    for n in range(nodes):
        etree.SubElement(node_section, "node", id=str(n + 1), uname=node_name(n))
    resources = config.find("resources")
    assert resources is not None
    template = resources.find(f"bundle[@id='{TEMPLATE}']")
    assert template is not None, f"the fixture lost its {TEMPLATE}"
    for child in list(resources):
        resources.remove(child)
    constraints = config.find("constraints")
    if constraints is not None:
        for child in list(constraints):
            constraints.remove(child)
    for i in range(bundles):
        el = _renamed(template, "haproxy", service(i))
        runtime = el.find("podman")
        assert runtime is not None
        runtime.set("replicas", str(replicas))
        runtime.set("image", floating(i))
        resources.append(el)
    if guards:
        for i in range(bundles):
            tree = C.add_guard(tree, bundle_id(i), floating(i)).new_cib
    return tree


def _op_templates() -> dict[str, etree._Element]:
    status = fixtures.cib("status-ok.xml").find("status")
    assert status is not None
    rsc = f"{TEMPLATE}-podman-0"
    found: dict[str, etree._Element] = {}
    for lrm in status.iterfind(f".//lrm_resource[@id='{rsc}']"):
        for op in lrm.iterfind("lrm_rsc_op"):
            key = op.get("operation_key", "")
            kind = "probe" if key.endswith("_monitor_0") else op.get("operation", "")
            found.setdefault(kind, op)
    missing = {"probe", "start", "monitor"} - set(found)
    assert not missing, f"the fixture has no {missing} of {rsc}"
    return found


def _lrm_resource(
    rid: str, agent: tuple[str, str, str], ops: list[etree._Element], call: int
) -> etree._Element:
    rclass, provider, rtype = agent
    el = etree.Element("lrm_resource", id=rid, type=rtype)
    el.set("class", rclass)
    el.set("provider", provider)
    for n, template in enumerate(ops):
        op = copy.deepcopy(template)
        old = f"{TEMPLATE}-podman-0"
        for attr in ("id", "operation_key"):
            op.set(attr, op.get(attr, "").replace(old, rid))
        op.set("call-id", str(call + n))
        el.append(op)
    return el


def grow(nodes: int, bundles: int, replicas: int | None = None, guards: bool = True) -> bytes:
    """A CIB (``cibadmin --query`` form) of ``nodes`` nodes and ``bundles`` bundles."""
    replicas = nodes if replicas is None else replicas
    tree = _configuration(nodes, bundles, replicas, guards)
    ops = _op_templates()
    probe, started = [ops["probe"]], [ops["start"], ops["monitor"]]
    podman = ("ocf", "heartbeat", "podman")
    guard_agent = C.GUARD_AGENT
    status = etree.SubElement(tree, "status")
    for n in range(nodes):
        state = etree.SubElement(
            status,
            "node_state",
            id=str(n + 1),
            uname=node_name(n),
            in_ccm="true",
            crmd="online",
            join="member",
            expected="member",
        )
        state.set("crm-debug-origin", "do_update_resource")
        lrm = etree.SubElement(state, "lrm", id=str(n + 1))
        resources = etree.SubElement(lrm, "lrm_resources")
        call = 1
        for i in range(bundles):
            if guards:
                rid = f"{bundle_id(i)}-guard"
                resources.append(_lrm_resource(rid, guard_agent, started, call))
                call += 2
            for r in range(replicas):
                here = placement(i, r, nodes) == n
                rid = f"{bundle_id(i)}-podman-{r}"
                resources.append(_lrm_resource(rid, podman, started if here else probe, call))
                call += 2
    tree.set("num_updates", "1")
    return C.to_xml(tree)


def mon_xml(nodes: int, bundles: int, replicas: int | None = None, guards: bool = True) -> bytes:
    """The ``crm_mon --output-as=xml`` document of :func:`grow`'s cluster (all running)."""
    replicas = nodes if replicas is None else replicas
    mon = fixtures.mon("mon-ok.xml")
    node_list = mon.find("nodes")
    res_list = mon.find("resources")
    assert node_list is not None and res_list is not None
    node_template = node_list.find("node[@name='controller-0']")
    bundle_template = res_list.find(f"bundle[@id='{TEMPLATE}']")
    assert node_template is not None and bundle_template is not None
    replica_template = bundle_template.find("replica")
    assert replica_template is not None
    for parent in (node_list, res_list):
        for child in list(parent):
            parent.remove(child)
    for tag in ("failures", "node_attributes", "node_history"):
        for el in mon.findall(tag):
            mon.remove(el)
    for n in range(nodes):
        el = copy.deepcopy(node_template)
        el.set("name", node_name(n))
        el.set("id", str(n + 1))
        el.set("is_dc", "true" if n == 0 else "false")
        node_list.append(el)
    dc = mon.find("summary/current_dc")
    assert dc is not None
    dc.set("name", node_name(0))
    for i in range(bundles):
        b = etree.SubElement(res_list, "bundle", attrib=dict(bundle_template.attrib))
        b.set("id", bundle_id(i))
        b.set("image", floating(i))
        for r in range(replicas):
            rep = _renamed(replica_template, f"{TEMPLATE}-podman-0", f"{bundle_id(i)}-podman-{r}")
            rep.set("id", str(r))
            where = placement(i, r, nodes)
            for node in rep.iter("node"):
                node.set("name", node_name(where))
                node.set("id", str(where + 1))
            b.append(rep)
        if guards:
            clone = etree.SubElement(res_list, "clone", id=f"{bundle_id(i)}-guard-clone")
            for n in range(nodes):
                res = etree.SubElement(
                    clone,
                    "resource",
                    id=f"{bundle_id(i)}-guard",
                    resource_agent="ocf:pcmkimg:floating-image",
                    role="Started",
                    active="true",
                    failed="false",
                    managed="true",
                )
                etree.SubElement(res, "node", name=node_name(n), id=str(n + 1), cached="true")
    return C.to_xml(mon)


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path
