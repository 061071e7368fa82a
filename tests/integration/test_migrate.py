"""pcmkimg migrate: a bundle on a real image name moves to its floating name, no restart."""

from __future__ import annotations

import json

import pytest

from tests.sandbox.cluster import wait_idle

BUNDLE = "mig-bundle"
FLOATING = "cluster.common.tag/svc:pcmklatest"


def containers(cl) -> dict[str, str]:
    found = {}
    for node in cl.names:
        out = cl.podman(node, "ps", "--format", "json")
        for c in json.loads(out.stdout or "[]"):
            if c["Names"][0].startswith(BUNDLE):
                found[c["Names"][0]] = c["Id"]
    return found


def bundle_image(cl) -> str:
    out = cl.run("controller-0", ["cibadmin", "--query", "--xpath", f"//bundle[@id='{BUNDLE}']"])
    return out.stdout.split('image="')[1].split('"')[0]


@pytest.fixture(scope="module")
def real_bundle(cluster_sandbox):
    sb = cluster_sandbox
    cl = sb.cluster
    ref = sb.ref("ns1/svc:1.0")
    cl.seed(ref)
    cl.create_bundle(BUNDLE, ref)
    yield sb, ref
    cl.delete_bundle(BUNDLE)
    for node in cl.names:
        cl.podman(node, "rmi", "-f", ref, FLOATING, check=False)


def test_migrate_refuses_when_a_node_lacks_the_image(real_bundle):
    sb, ref = real_bundle
    cl = sb.cluster
    cl.podman("controller-2", "tag", ref, "localhost/keep/svc:1.0")
    cl.podman("controller-2", "untag", ref, ref)
    try:
        proc = cl.pcmkimg("controller-0", "migrate", BUNDLE, check=False)
        assert proc.returncode == 3, proc.stderr
        assert "not in the store of controller-2" in proc.stderr
        errors = [line for line in proc.stderr.splitlines() if line.startswith("pcmkimg: error:")]
        assert len(errors) == 1 and proc.stderr.strip().endswith(errors[0])
        assert bundle_image(cl) == ref
        for node in ("controller-0", "controller-1"):
            assert cl.podman(node, "image", "exists", FLOATING, check=False).returncode == 1
    finally:
        cl.podman("controller-2", "tag", "localhost/keep/svc:1.0", ref)
        cl.podman("controller-2", "untag", ref, "localhost/keep/svc:1.0")


def test_migrate_moves_to_the_floating_name_without_restart(real_bundle):
    sb, _ = real_bundle
    cl = sb.cluster
    before = containers(cl)
    assert len(before) == 3
    dry = cl.pcmkimg("controller-0", "migrate", BUNDLE, "--dry-run")
    assert FLOATING in dry.stdout
    assert bundle_image(cl) != FLOATING
    proc = cl.pcmkimg("controller-0", "--json", "migrate", BUNDLE)
    result = json.loads(proc.stdout)
    assert result["to"] == FLOATING and result["restarted"] == []
    wait_idle(cl)
    assert bundle_image(cl) == FLOATING
    assert containers(cl) == before
    managed = cl.run(
        "controller-0",
        ["crm_resource", "--resource", BUNDLE, "--meta", "--get-parameter", "is-managed"],
        check=False,
    )
    assert "false" not in managed.stdout
    again = cl.pcmkimg("controller-0", "migrate", BUNDLE)
    assert "already runs on the floating name" in again.stdout
