"""update heals a node whose guard refused to start because the floating name was missing."""

from __future__ import annotations

import json

import pytest

BUNDLE = "heal-bundle"
FLOATING = "cluster.common.tag/heal:pcmklatest"
GUARD = f"{BUNDLE}-guard"


@pytest.fixture(scope="module")
def guarded(cluster_sandbox):
    with cluster_sandbox.cluster.guarded_bundle(
        BUNDLE, FLOATING, cluster_sandbox.ref("ns1/svc:1.0")
    ):
        yield cluster_sandbox


def test_update_of_a_refused_node_brings_its_replica_back(guarded):
    sb = guarded
    cl = sb.cluster
    # controller-2 loses the floating name; its guard restarts and refuses (rc 5).
    cl.podman("controller-2", "untag", sb.ref("ns1/svc:1.0"), FLOATING)
    cl.run(
        "controller-0",
        [
            "crm_resource",
            "--restart",
            "-r",
            f"{GUARD}-clone",
            "--node",
            "controller-2",
            "--timeout=60s",
        ],
        check=False,
    )
    cl.run("controller-0", ["crm_resource", "--wait"])
    refused = [
        f
        for f in cl.crm_mon().iterfind("failures/failure")
        if f.get("node") == "controller-2" and f.get("op_key", "").startswith(GUARD)
    ]
    assert refused and refused[0].get("exitcode") == "5"
    before = cl.containers(BUNDLE)
    assert "controller-2" not in before and len(before) == 2

    proc = cl.pcmkimg(
        "controller-0",
        "--json",
        "update",
        "heal",
        "--image",
        sb.ref("ns2/svc:1.1"),
        "--node",
        "controller-2",
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    node = json.loads(proc.stdout)["report"]["nodes"][0]
    assert node["node"] == "controller-2" and node["result"] == "started"
    after = cl.containers(BUNDLE)
    assert after["controller-2"][1] == sb.images["ns2/svc:1.1"]
    assert {n: after[n] for n in before} == before
    left = [
        f
        for f in cl.crm_mon().iterfind("failures/failure")
        if f.get("op_key", "").startswith(GUARD)
    ]
    assert not left
