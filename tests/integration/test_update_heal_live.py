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
    # controller-2 loses the floating name while its guard is stopped (a running guard would
    # put the name back at its next monitor); the guard then starts and refuses (rc 5).
    ban = ["--resource", f"{GUARD}-clone", "--node", "controller-2"]
    cl.run("controller-0", ["crm_resource", "--ban", *ban])
    cl.run("controller-0", ["crm_resource", "--wait"])
    cl.podman("controller-2", "untag", sb.ref("ns1/svc:1.0"), FLOATING)
    cl.run("controller-0", ["crm_resource", "--clear", *ban])
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


PLAIN = "plain-bundle"
PLAIN_FLOATING = "cluster.common.tag/plain:pcmklatest"


def test_update_heals_a_failed_start_where_the_floating_name_was_missing(cluster_sandbox):
    """No guard: the name vanishes on controller-2 and its replica restarts, so the bundle
    tries to pull the floating name and the start fails (rc 1, banned there). ``update --node``
    retags, cleans that failure up and the replica starts on the new image (before: exit 3,
    the update refused because of that failed start)."""
    sb = cluster_sandbox
    cl = sb.cluster
    old, new = sb.ref("ns1/svc:1.0"), sb.ref("ns2/svc:1.1")
    cl.seed(old, PLAIN_FLOATING)
    cl.create_bundle(PLAIN, PLAIN_FLOATING)
    try:
        cl.podman("controller-2", "untag", old, PLAIN_FLOATING)
        cl.run(
            "controller-0",
            ["crm_resource", "--restart", "-r", PLAIN, "--node", "controller-2", "--timeout=60s"],
            check=False,
            timeout=150,
        )
        cl.run("controller-0", ["crm_resource", "--wait", "--timeout=120s"], timeout=150)
        failed = [
            f
            for f in cl.crm_mon().iterfind("failures/failure")
            if f.get("node") == "controller-2" and f.get("op_key", "").startswith(f"{PLAIN}-")
        ]
        assert failed and failed[0].get("task") == "start", [dict(f.attrib) for f in failed]
        before = cl.containers(PLAIN)
        assert "controller-2" not in before and len(before) == 2

        dry = cl.pcmkimg(
            "controller-0",
            "update",
            "plain",
            "--image",
            new,
            "--node",
            "controller-2",
            "--dry-run",
            check=False,
        )
        assert dry.returncode == 0, dry.stderr
        assert "clean up the replica's failed start" in dry.stdout, dry.stdout

        proc = cl.pcmkimg(
            "controller-0",
            "--json",
            "update",
            "plain",
            "--image",
            new,
            "--node",
            "controller-2",
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        (node,) = json.loads(proc.stdout)["report"]["nodes"]
        assert (node["node"], node["result"]) == ("controller-2", "started"), node
        after = cl.containers(PLAIN)
        assert after["controller-2"][1] == sb.images["ns2/svc:1.1"]
        assert {n: after[n] for n in before} == before  # the other replicas untouched
        left = [
            dict(f.attrib)
            for f in cl.crm_mon().iterfind("failures/failure")
            if f.get("op_key", "").startswith(f"{PLAIN}-")
        ]
        assert left == []
    finally:
        cl.delete_bundle(PLAIN)
        for n in cl.names:
            cl.podman(n, "rmi", PLAIN_FLOATING, check=False)
