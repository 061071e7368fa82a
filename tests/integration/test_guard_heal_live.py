"""The guard heals a floating name that vanished under a running replica (issue 9, item 3).

Another tool untags the name on one node (TripleO LP#1770598, rhbz#1727173). Before the heal,
the guard's monitor only reported 190, and the next restart of that replica made the bundle pull
the floating name (bundles force ``allow_pull=true``): a failed start, fail-count INFINITY, the
replica banned from that node. Now the guard's monitor tags the image it recorded at start with
the name again, and the restart runs the same image without trying a pull.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from lxml import etree

from tests.sandbox.cluster import SAFE_PARSER, Cluster

SERVICE = "guardheal"
BUNDLE = f"{SERVICE}-bundle"
FLOATING = f"cluster.common.tag/{SERVICE}:pcmklatest"
GUARD = f"{BUNDLE}-guard"
ATTRIBUTE = f"pcmkimg-{SERVICE}"
NODE = "controller-1"
MONITOR_S = 5


@pytest.fixture(scope="module")
def guarded(cluster_sandbox):  # type: ignore[no-untyped-def]
    cl = cluster_sandbox.cluster
    # A short monitor, so that the guard looks within seconds (the default is 30 s).
    with cl.guarded_bundle(BUNDLE, FLOATING, cluster_sandbox.ref("ns1/svc:1.0"), monitor=MONITOR_S):
        yield cluster_sandbox


def pacemaker_log(cl: Cluster, node: str) -> Path:
    return cl.node(node).dir / "log-pacemaker" / "pacemaker.log"


def attributes(cl: Cluster) -> dict[str, str]:
    """Node -> the value of the guard's node attribute there."""
    out = cl.run("controller-0", ["crm_mon", "-1", "-A", "--output-as=xml"]).stdout
    doc = etree.fromstring(out.encode(), SAFE_PARSER)
    return {
        node.get("name", ""): attr.get("value", "")
        for node in doc.iterfind("node_attributes/node")
        for attr in node.iterfind(f"attribute[@name='{ATTRIBUTE}']")
    }


def ours(mon: etree._Element) -> list[tuple[str | None, str | None, str | None]]:
    """The failures of the bundle and its guard: (op_key, node, exitcode)."""
    return [
        (f.get("op_key"), f.get("node"), f.get("exitcode"))
        for f in mon.iterfind("failures/failure")
        if (f.get("op_key") or "").startswith(BUNDLE)
    ]


def replica_active(mon: etree._Element, node: str) -> bool:
    for res in mon.iterfind(f".//bundle[@id='{BUNDLE}']/replica/resource"):
        where = res.find("node")
        if (
            res.get("resource_agent") == "ocf:heartbeat:podman"
            and where is not None
            and where.get("name") == node
        ):
            return res.get("active") == "true" and res.get("failed") == "false"
    return False


def floating_id(cl: Cluster, node: str) -> str | None:
    """The ID of the image the floating name names on ``node``, None when no image has it."""
    proc = cl.podman(node, "image", "inspect", "--format", "json", FLOATING, check=False)
    if proc.returncode != 0:
        return None
    return str(json.loads(proc.stdout)[0]["Id"]).removeprefix("sha256:")


def test_monitor_heals_a_vanished_name_and_a_restart_pulls_nothing(guarded) -> None:  # type: ignore[no-untyped-def]
    sb = guarded
    cl = sb.cluster
    ref, image_id = sb.ref("ns1/svc:1.0"), sb.images["ns1/svc:1.0"]
    before = cl.containers(BUNDLE)
    assert sorted(before) == sorted(cl.names) and before[NODE][1] == image_id
    shown = attributes(cl)
    assert shown[NODE].startswith(f"{ref}@sha256:")
    log = pacemaker_log(cl, NODE)
    start_of_test = log.stat().st_size

    # Another tool takes the name off the image under the running replica.
    cl.podman(NODE, "untag", ref, FLOATING)
    assert floating_id(cl, NODE) is None

    # Within a few monitors the guard has tagged the recorded image with the name again.
    deadline = time.monotonic() + 4 * MONITOR_S
    while floating_id(cl, NODE) is None and time.monotonic() < deadline:
        time.sleep(1)
    assert floating_id(cl, NODE) == image_id, "the guard did not put the floating name back"
    healed = log.read_bytes()[start_of_test:].decode(errors="replace")
    assert any(
        "floating-image(" in line and "WARNING" in line and FLOATING in line
        for line in healed.splitlines()
    ), healed[-3000:]
    # The state and the attribute still name the same image; the monitor was not degraded.
    assert attributes(cl) == shown
    mon = cl.crm_mon()
    assert ours(mon) == [], etree.tostring(mon).decode()
    assert cl.containers(BUNDLE) == before

    # Restart that replica only: it must start from the local image, with no pull.
    at_restart = log.stat().st_size
    cl.restart_replica(BUNDLE, NODE)
    after = cl.containers(BUNDLE)
    new_lines = log.read_bytes()[at_restart:].decode(errors="replace")
    assert f"{BUNDLE}-podman-" in new_lines  # the log of that restart is the one read here
    assert "Beginning pull" not in new_lines, [
        ln for ln in new_lines.splitlines() if "pull" in ln.lower()
    ]
    mon = cl.crm_mon()
    assert replica_active(mon, NODE), etree.tostring(mon).decode()
    assert ours(mon) == [], etree.tostring(mon).decode()
    for op in mon.iterfind(".//node_history/node/resource_history/operation_history"):
        rsc = op.getparent().get("id", "")
        if rsc.startswith(f"{BUNDLE}-podman-"):
            assert not (op.get("task") == "start" and op.get("rc") != "0"), rsc
    # That replica restarted, on the same image; the other two were not touched.
    assert after[NODE][0] != before[NODE][0]
    assert after[NODE][1] == image_id
    assert {n: after[n] for n in before if n != NODE} == {n: before[n] for n in before if n != NODE}
    cib = cl.run("controller-0", ["cibadmin", "--query", "--scope", "constraints"]).stdout
    assert "cli-ban" not in cib
