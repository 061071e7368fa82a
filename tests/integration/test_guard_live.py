"""The guard wired to a real bundle in the sandbox cluster (`pcmkimg guard`, the agent live).

One bundle for the module, on its own floating name. controller-0 and controller-1 run
``ns1/svc:1.0`` behind it, controller-2 ``ns1/svc:1.1``. The tests run in file order, and each
leaves the bundle as it found it: three replicas running, the name on every node, no failure.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from lxml import etree

from tests.sandbox.cluster import SAFE_PARSER, Cluster, wait_idle

SERVICE = "guardlive"
FLOATING = f"cluster.common.tag/{SERVICE}:pcmklatest"
BUNDLE = f"{SERVICE}-bundle"
GUARD = f"{BUNDLE}-guard"
CLONE = f"{GUARD}-clone"
NODES = ("controller-0", "controller-1", "controller-2")
REAL = {"controller-0": "ns1/svc:1.0", "controller-1": "ns1/svc:1.0", "controller-2": "ns1/svc:1.1"}
MONITOR_S = 5


@dataclass(frozen=True)
class Guarded:
    cl: Cluster
    refs: dict[str, str]
    #: resources and constraints before `guard add`
    before: str


def cib_config(cl: Cluster) -> tuple[str, str]:
    """(resources + constraints as canonical XML, the CIB's epoch)."""
    out = cl.run("controller-0", ["cibadmin", "-Q"], timeout=60).stdout
    cib = etree.fromstring(out.encode(), SAFE_PARSER)
    parts = [cib.find(f"configuration/{s}") for s in ("resources", "constraints")]
    text = "".join(etree.tostring(p, method="c14n").decode() for p in parts if p is not None)
    return text, cib.get("epoch", "")


def containers(cl: Cluster, node: str) -> dict[str, str]:
    out = cl.podman(node, "ps", "--format", "json")
    return {c["Names"][0]: c["Id"] for c in json.loads(out.stdout or "[]")}


def all_containers(cl: Cluster) -> dict[str, dict[str, str]]:
    return {n: containers(cl, n) for n in NODES}


def replica_nodes(mon: etree._Element) -> dict[str, bool]:
    """Node -> whether the bundle's replica container is active there."""
    found = {}
    for res in mon.iterfind(f".//bundle[@id='{BUNDLE}']/replica/resource"):
        if res.get("resource_agent") == "ocf:heartbeat:podman":
            node = res.find("node")
            if node is not None:
                found[node.get("name", "")] = res.get("active") == "true"
    return found


def guard_nodes(mon: etree._Element) -> set[str]:
    return {
        n.get("name", "")
        for r in mon.iterfind(f"resources/clone[@id='{CLONE}']/resource")
        if r.get("role") == "Started"
        for n in r.iterfind("node")
    }


def failures(mon: etree._Element) -> list[etree._Element]:
    return list(mon.iterfind("failures/failure"))


def mine(mon: etree._Element) -> list[etree._Element]:
    return [f for f in failures(mon) if (f.get("op_key") or "").startswith(BUNDLE)]


def settle(cl: Cluster) -> etree._Element:
    wait_idle(cl, timeout=90)
    return cl.crm_mon()


def assert_healthy(cl: Cluster) -> etree._Element:
    mon = settle(cl)
    assert replica_nodes(mon) == {n: True for n in NODES}, etree.tostring(mon).decode()
    assert guard_nodes(mon) == set(NODES)
    assert mine(mon) == []
    return mon


@pytest.fixture(scope="module")
def guarded(cluster_sandbox) -> Iterator[Guarded]:  # type: ignore[no-untyped-def]
    sb = cluster_sandbox
    cl = sb.cluster
    refs = {node: sb.ref(path) for node, path in REAL.items()}
    with cl.seeded_bundle(BUNDLE, FLOATING, refs["controller-0"], refs=refs):
        before, _ = cib_config(cl)
        # A shorter monitor than the default 30 s, so that degraded shows within seconds.
        cl.guard(BUNDLE, monitor=MONITOR_S)
        assert_healthy(cl)
        yield Guarded(cl, refs, before)


def test_missing_name_fails_the_guard_not_the_bundle(guarded: Guarded) -> None:
    cl = guarded.cl
    before = all_containers(cl)
    # A replica (re)starting on a node without the name: stop that node's guard instance,
    # which (order + colocation, interleaved) stops that node's replica only, take the name
    # away while it is stopped (a running guard gives it back), and start it again.
    cl.run("controller-0", ["crm_resource", "--ban", "-r", CLONE, "--node", "controller-2"])
    wait_idle(cl)
    cl.podman("controller-2", "untag", guarded.refs["controller-2"], FLOATING)
    cl.run("controller-0", ["crm_resource", "--clear", "-r", CLONE, "--node", "controller-2"])
    mon = settle(cl)

    failed = mine(mon)
    assert [(f.get("op_key"), f.get("node"), f.get("exitcode")) for f in failed] == [
        (f"{GUARD}_start_0", "controller-2", "5")
    ], etree.tostring(mon).decode()
    assert failed[0].get("exitreason") == (
        f"{FLOATING} missing on controller-2; "
        f"fix: pcmkimg update --node controller-2 {SERVICE} --image REF"
    )
    # The bundle never tried the pull: no failed container start, no "failed to pull".
    assert replica_nodes(mon).get("controller-2") is not True
    assert not any("pull" in (f.get("exitreason") or "") for f in failures(mon))
    text = cl.run("controller-0", ["crm_mon", "-1", "--show-detail"]).stdout
    assert "failed to pull" not in text
    for op in mon.iterfind(".//node_history/node/resource_history/operation_history"):
        rsc = op.getparent().get("id", "")
        if rsc.startswith(f"{BUNDLE}-podman-"):
            assert not (op.get("task") == "start" and op.get("rc") != "0"), rsc
    assert containers(cl, "controller-2") == {}
    after = all_containers(cl)
    for node in ("controller-0", "controller-1"):
        assert after[node] == before[node]
    cib, _ = cib_config(cl)
    assert "cli-ban" not in cib


def test_tag_again_and_cleanup_brings_the_replica_back(guarded: Guarded) -> None:
    cl = guarded.cl
    before = all_containers(cl)
    cl.podman("controller-2", "tag", guarded.refs["controller-2"], FLOATING)
    cl.run("controller-0", ["crm_resource", "--cleanup", "-r", CLONE, "--node", "controller-2"])
    assert_healthy(cl)
    after = all_containers(cl)
    assert len(after["controller-2"]) == 1
    for node in ("controller-0", "controller-1"):
        assert after[node] == before[node]


def test_node_attributes_show_each_nodes_real_image(guarded: Guarded) -> None:
    cl = guarded.cl
    mon = cl.run("controller-0", ["crm_mon", "-1", "-A", "--output-as=xml"]).stdout
    doc = etree.fromstring(mon.encode(), SAFE_PARSER)
    shown = {
        node.get("name"): attr.get("value")
        for node in doc.iterfind("node_attributes/node")
        for attr in node.iterfind(f"attribute[@name='pcmkimg-{SERVICE}']")
    }
    expected = {}
    for node, ref in guarded.refs.items():
        digest = cl.podman(node, "image", "inspect", "--format", "{{.Digest}}", ref).stdout
        expected[node] = f"{ref}@{digest.strip()}"
    assert shown == expected
    assert shown["controller-0"] != shown["controller-2"]


def floating_id(cl: Cluster, node: str) -> str:
    """The ID of the image behind the floating name on ``node``; empty when no image has it."""
    proc = cl.podman(node, "image", "inspect", "--format", "{{.Id}}", FLOATING, check=False)
    return proc.stdout.strip() if proc.returncode == 0 else ""


def test_name_vanishing_under_a_running_replica_is_healed_and_restarts_nothing(
    guarded: Guarded,
) -> None:
    cl = guarded.cl
    before = all_containers(cl)
    image_id = floating_id(cl, "controller-1")
    cl.podman("controller-1", "untag", guarded.refs["controller-1"], FLOATING)
    try:
        deadline = time.monotonic() + 4 * MONITOR_S
        while not floating_id(cl, "controller-1") and time.monotonic() < deadline:
            time.sleep(1)
        # The guard's monitor gave the name back to the image it recorded, without degrading.
        assert floating_id(cl, "controller-1") == image_id
        time.sleep(MONITOR_S + 1)  # one more monitor: nothing to do, nothing restarts
        mon = settle(cl)
        assert replica_nodes(mon) == {n: True for n in NODES}
        assert guard_nodes(mon) == set(NODES)
        assert mine(mon) == [], etree.tostring(mon).decode()
        assert all_containers(cl) == before
    finally:
        cl.podman("controller-1", "tag", guarded.refs["controller-1"], FLOATING)
    cl.run("controller-0", ["crm_resource", "--cleanup", "-r", CLONE, "--node", "controller-1"])
    assert_healthy(cl)
    assert all_containers(cl) == before


def test_guard_show_prints_the_wiring(guarded: Guarded) -> None:
    show = guarded.cl.pcmkimg("controller-0", "guard", "show", BUNDLE).stdout.splitlines()
    assert show[0] == f"{BUNDLE}: guard wired"
    assert f"clone {CLONE} (interleave=true) of {GUARD} image={FLOATING}" in show[1]
    assert f"order {GUARD}-order; colocation {GUARD}-colocation" in show[2]
    assert "bundle interleave=true" in show[2]


def test_guard_remove_restores_resources_and_constraints(guarded: Guarded) -> None:
    cl = guarded.cl
    cl.pcmkimg("controller-0", "guard", "remove", BUNDLE)
    try:
        assert cib_config(cl)[0] == guarded.before
    finally:
        cl.pcmkimg("controller-0", "guard", "add", BUNDLE)
        assert_healthy(cl)


def test_guard_remove_dry_run_add(guarded: Guarded) -> None:
    cl = guarded.cl
    cl.pcmkimg("controller-0", "guard", "remove", BUNDLE)
    removed = cib_config(cl)
    assert GUARD not in removed[0]
    assert "interleave" not in removed[0]
    none = cl.pcmkimg("controller-0", "guard", "show", BUNDLE).stdout
    assert none.strip() == f"{BUNDLE}: no guard (pcmkimg guard add {BUNDLE})"
    again = cl.pcmkimg("controller-0", "guard", "remove", BUNDLE).stdout
    assert again.strip() == f"{BUNDLE}: no guard"

    dry = cl.pcmkimg("controller-0", "guard", "add", "--dry-run", BUNDLE).stdout.splitlines()
    assert [ln.split()[:3] for ln in dry] == [
        ["pcs", "resource", "create"],
        ["crm_resource", "--wait"],
        ["pcs", "resource", "bundle"],
        ["pcs", "constraint", "order"],
        ["pcs", "constraint", "colocation"],
    ]
    assert f"image={FLOATING}" in dry[0]
    assert cib_config(cl) == removed  # not even the epoch moved

    unknown = cl.pcmkimg("controller-0", "guard", "add", "no-such-bundle", check=False)
    assert unknown.returncode == 2
    assert unknown.stdout == ""
    lines = unknown.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pcmkimg: error: "), unknown.stderr
    assert "no-such-bundle" in lines[0]
    assert cib_config(cl) == removed

    cl.pcmkimg("controller-0", "guard", "add", BUNDLE)
    again = cl.pcmkimg("controller-0", "guard", "add", BUNDLE).stdout
    assert again.strip() == f"{BUNDLE}: guard already wired"
    assert_healthy(cl)


def test_guard_add_on_a_running_bundle_restarts_nothing(guarded: Guarded) -> None:
    cl = guarded.cl
    cl.pcmkimg("controller-0", "guard", "remove", BUNDLE)
    settle(cl)
    before = all_containers(cl)
    assert all(before.values())
    try:
        cl.pcmkimg("controller-0", "guard", "add", BUNDLE)
        assert_healthy(cl)
        assert all_containers(cl) == before
    finally:
        cl.pcmkimg("controller-0", "guard", "add", BUNDLE)
        assert_healthy(cl)


def test_guard_add_with_another_name_restarts_no_replica(guarded: Guarded) -> None:
    """Issue 12.2: renaming an existing guard restarts the guard, never a replica; a new name
    missing on a node is refused, and the guard keeps its former name, wired."""
    cl = guarded.cl
    other = f"cluster.common.tag/{SERVICE}-b:pcmklatest"
    before = all_containers(cl)
    assert all(before.values())
    for node in NODES[:2]:
        cl.podman(node, "tag", guarded.refs[node], other)
    try:
        refused = cl.pcmkimg("controller-0", "guard", "add", "--image", other, BUNDLE, check=False)
        assert refused.returncode != 0, refused.stdout
        assert f"the guard keeps {FLOATING}" in refused.stderr
        cl.run("controller-0", ["crm_resource", "--cleanup", "-r", CLONE])
        assert_healthy(cl)
        assert all_containers(cl) == before
        show = cl.pcmkimg("controller-0", "guard", "show", BUNDLE).stdout.splitlines()
        assert show[0] == f"{BUNDLE}: guard wired" and f"image={FLOATING}" in show[1]

        cl.podman("controller-2", "tag", guarded.refs["controller-2"], other)
        cl.pcmkimg("controller-0", "guard", "add", "--image", other, BUNDLE)
        assert_healthy(cl)
        assert all_containers(cl) == before
        show = cl.pcmkimg("controller-0", "guard", "show", BUNDLE).stdout.splitlines()
        assert show[0] == f"{BUNDLE}: guard wired" and f"image={other}" in show[1]
    finally:
        cl.pcmkimg("controller-0", "guard", "add", "--image", FLOATING, BUNDLE, check=False)
        for node in NODES:
            cl.podman(node, "untag", guarded.refs[node], other, check=False)
    assert_healthy(cl)
    assert all_containers(cl) == before
