"""pcmkimg rollback: the floating name goes back to the rollback image on one node only."""

from __future__ import annotations

import json

from tests.sandbox.fixtures import guarded_bundle

BUNDLE = "rb-bundle"
FLOATING = "cluster.common.tag/rb:pcmklatest"
PREVIOUS = "cluster.common.tag/rb:pcmkprevious"

guarded = guarded_bundle(BUNDLE, FLOATING)


def test_rollback_restores_the_previous_image_on_that_node_only(guarded):
    sb = guarded
    cl = sb.cluster
    old, new = sb.images["ns1/svc:1.0"], sb.images["ns1/svc:1.1"]
    upd = cl.pcmkimg(
        "controller-0",
        "update",
        BUNDLE,
        "--image",
        sb.ref("ns1/svc:1.1"),
        "--node",
        "controller-1",
        check=False,
    )
    assert upd.returncode == 0, upd.stderr
    before = cl.containers(BUNDLE)
    assert before["controller-1"][1] == new
    assert before["controller-0"][1] == before["controller-2"][1] == old

    back = cl.pcmkimg(
        "controller-0", "--json", "rollback", "rb", "--node", "controller-1", check=False
    )
    assert back.returncode == 0, back.stderr
    assert json.loads(back.stdout)["result"] == "ok"
    after = cl.containers(BUNDLE)
    assert after["controller-1"][1] == old
    assert after["controller-1"][0] != before["controller-1"][0]
    for node in ("controller-0", "controller-2"):
        assert after[node] == before[node]
    # The rollback name now holds the image it replaced: a second rollback undoes the first.
    inspect = cl.podman("controller-1", "image", "inspect", PREVIOUS, "--format", "{{.Id}}")
    assert inspect.stdout.strip() == new


def test_rollback_without_a_rollback_image_changes_nothing(guarded):
    cl = guarded.cluster
    before = cl.containers(BUNDLE)
    proc = cl.pcmkimg("controller-0", "rollback", "rb", "--node", "controller-2", check=False)
    assert proc.returncode == 3
    assert "nothing to roll back to" in proc.stderr
    assert cl.containers(BUNDLE) == before
    constraints = cl.run("controller-0", ["cibadmin", "--query", "--scope", "constraints"])
    assert "cli-ban" not in constraints.stdout
    lease = cl.run(
        "controller-0",
        ["crm_ticket", "--ticket", "pcmkimg-lease", "--get-attr", "lease"],
        check=False,
    )
    assert lease.returncode != 0


def test_prune_removes_old_images_but_never_the_floating_one(guarded):
    sb = guarded
    cl = sb.cluster
    for path in ("ns1/svc:1.1", "ns1/svc:broken"):
        cl.podman("controller-0", "pull", "-q", sb.ref(path))
    before = cl.containers(BUNDLE)
    proc = cl.pcmkimg(
        "controller-0",
        "--json",
        "prune",
        "rb",
        "--node",
        "controller-0",
        "--keep",
        "0",
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)["controller-0"]
    assert set(result["removed"]) == {sb.images["ns1/svc:1.1"], sb.images["ns1/svc:broken"]}
    assert sb.images["ns1/svc:1.0"] in result["protected"]
    ids = cl.podman("controller-0", "images", "--format", "{{.ID}}").stdout.split()
    assert not {i for i in ids if sb.images["ns1/svc:1.1"].startswith(i)}
    floating = cl.podman("controller-0", "image", "inspect", FLOATING, "--format", "{{.Id}}")
    assert floating.stdout.strip() == sb.images["ns1/svc:1.0"]
    assert cl.containers(BUNDLE) == before
    bad = cl.pcmkimg("controller-0", "prune", "rb", "--node", "nowhere", check=False)
    assert bad.returncode == 2 and "nowhere" in bad.stderr
