"""update heals a node whose guard refused to start because the floating name was missing."""

from __future__ import annotations

import json

from tests.sandbox.fixtures import guarded_bundle

BUNDLE = "heal-bundle"
FLOATING = "cluster.common.tag/heal:pcmklatest"
GUARD = f"{BUNDLE}-guard"
NEW = "ns2/svc:1.1"  # what the updates bring the stopped replica back on

guarded = guarded_bundle(BUNDLE, FLOATING)


def stopped_on_controller_2(cl, bundle: str) -> dict[str, tuple[str, str]]:
    """The bundle's containers (node -> container, image): none on controller-2, two others."""
    before = cl.containers(bundle)
    assert "controller-2" not in before and len(before) == 2, before
    return before


def update_starts_controller_2(sb, service: str, bundle: str, before) -> None:  # type: ignore[no-untyped-def]
    """``pcmkimg update SERVICE --image NEW --node controller-2`` starts the replica there on
    NEW and leaves the replicas ``before`` listed as they were."""
    cl = sb.cluster
    proc = cl.pcmkimg(
        "controller-0",
        "--json",
        "update",
        service,
        "--image",
        sb.ref(NEW),
        "--node",
        "controller-2",
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    (node,) = json.loads(proc.stdout)["report"]["nodes"]
    assert (node["node"], node["result"]) == ("controller-2", "started"), node
    after = cl.containers(bundle)
    assert after["controller-2"][1] == sb.images[NEW]
    assert {n: after[n] for n in before} == before  # the other replicas untouched


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
    refused = cl.failures(GUARD, "controller-2")
    assert refused and refused[0].get("exitcode") == "5"
    before = stopped_on_controller_2(cl, BUNDLE)
    update_starts_controller_2(sb, "heal", BUNDLE, before)
    assert cl.failures(GUARD) == []


PLAIN = "plain-bundle"
PLAIN_FLOATING = "cluster.common.tag/plain:pcmklatest"


def test_update_heals_a_failed_start_where_the_floating_name_was_missing(cluster_sandbox):
    """No guard: the name vanishes on controller-2 and its replica restarts, so the bundle
    tries to pull the floating name and the start fails (rc 1, banned there). ``update --node``
    retags, cleans that failure up and the replica starts on the new image (before: exit 3,
    the update refused because of that failed start)."""
    sb = cluster_sandbox
    cl = sb.cluster
    old = sb.ref("ns1/svc:1.0")
    cl.seed(old, PLAIN_FLOATING)
    cl.create_bundle(PLAIN, PLAIN_FLOATING)
    try:
        cl.podman("controller-2", "untag", old, PLAIN_FLOATING)
        cl.restart_replica(PLAIN, "controller-2")
        failed = cl.failures(f"{PLAIN}-", "controller-2")
        assert failed and failed[0].get("task") == "start", failed
        before = stopped_on_controller_2(cl, PLAIN)

        dry = cl.pcmkimg(
            "controller-0",
            "update",
            "plain",
            "--image",
            sb.ref(NEW),
            "--node",
            "controller-2",
            "--dry-run",
            check=False,
        )
        assert dry.returncode == 0, dry.stderr
        assert "clean up the replica's failed start" in dry.stdout, dry.stdout

        update_starts_controller_2(sb, "plain", PLAIN, before)
        assert cl.failures(f"{PLAIN}-") == []
    finally:
        cl.delete_bundle(PLAIN)
        for n in cl.names:
            cl.podman(n, "rmi", PLAIN_FLOATING, check=False)
