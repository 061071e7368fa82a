"""status and check on a live cluster: drift, and the failed start of a replica that stays
stopped; the fixes they print are run as printed and do what they say."""

from __future__ import annotations

import json
import re
import shlex

import pytest

from pcmkimg.core import commands

BUNDLE = "failstat-bundle"
SERVICE = "failstat"
FLOATING = "cluster.common.tag/failstat:pcmklatest"


def _ours(problems: list[dict[str, str]], kind: str) -> list[str]:
    """Messages of ``kind`` about this test's bundle (other tests' bundles may be there)."""
    return [p["message"] for p in problems if p["kind"] == kind and BUNDLE in p["message"]]


def _row(cl, node: str) -> dict:
    proc = cl.pcmkimg("controller-0", "--json", "status", SERVICE, check=False)
    assert proc.returncode == 0, proc.stderr
    (svc,) = json.loads(proc.stdout)["services"]
    return next(r for r in svc["nodes"] if r["node"] == node)


def _check(cl) -> list[dict[str, str]]:
    proc = cl.pcmkimg("controller-0", "--json", "check", check=False)
    assert proc.returncode == 3, proc.stdout + proc.stderr  # no guard at least
    return json.loads(proc.stdout)["report"]["problems"]


@pytest.fixture(scope="module")
def plain(cluster_sandbox):
    """A bundle without guard on FLOATING (a missing name makes its start pull)."""
    with cluster_sandbox.cluster.seeded_bundle(
        BUNDLE, FLOATING, cluster_sandbox.ref("ns1/svc:1.0")
    ):
        yield cluster_sandbox


def test_check_lists_drift_and_its_update_restarts_onto_the_named_image(plain):
    sb = plain
    cl = sb.cluster
    new = sb.ref("ns2/svc:1.1")
    # controller-1's floating name moves to another image; the replica keeps running its own.
    cl.seed(new, FLOATING, nodes=["controller-1"])
    row = _row(cl, "controller-1")
    assert row["drift"] is True and row["floating"]["image_id"] == sb.images["ns2/svc:1.1"]
    (drift,) = _ours(_check(cl), "drift")
    fix = re.search(r"fix: (pcmkimg update .*) restarts it", drift)
    assert fix, drift
    argv = shlex.split(fix.group(1))
    assert argv[:-1] == commands.update("controller-1", SERVICE, new)[:-1], argv
    assert argv[-1] != "REF", argv  # a name of the image the floating name names
    done = cl.pcmkimg("controller-0", *argv[1:], check=False, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert cl.containers(BUNDLE)["controller-1"][1] == sb.images["ns2/svc:1.1"]
    assert _row(cl, "controller-1")["drift"] is False
    assert _ours(_check(cl), "drift") == []


def test_status_and_check_show_a_stopped_replicas_failed_start(plain):
    sb = plain
    cl = sb.cluster
    old = sb.ref("ns1/svc:1.0")
    # controller-2 loses the floating name and its replica restarts: the container's start
    # tries to pull the name and fails; the replica stays stopped there.
    cl.podman("controller-2", "untag", old, FLOATING)
    cl.restart_replica(BUNDLE, "controller-2")
    assert "controller-2" not in cl.containers(BUNDLE)
    row = _row(cl, "controller-2")
    assert (row["role"], row["container"], row["floating"]) == ("Stopped", None, None)
    starts = [f for f in row["failures"] if f["operation"] == "start"]
    assert starts, row
    assert starts[0]["resource"].startswith(f"{BUNDLE}-podman-") and not starts[0]["degraded"]

    problems = _check(cl)
    failed = _ours(problems, "failed")
    assert failed and all("on controller-2" in m for m in failed), problems
    cleanup = commands.shown(commands.cleanup(BUNDLE, "controller-2"))
    assert all(m.endswith(f"then: {cleanup}") for m in failed), failed
    assert any("on controller-2," in m for m in _ours(problems, "unresolved")), problems

    # The fix as printed: the name back, then the cleanup; the replica starts again.
    cl.podman("controller-2", "tag", old, FLOATING)
    cl.run("controller-0", shlex.split(cleanup), timeout=120)
    cl.run("controller-0", ["crm_resource", "--wait", "--timeout=120s"], timeout=150)
    assert cl.containers(BUNDLE)["controller-2"][1] == sb.images["ns1/svc:1.0"]
    assert _row(cl, "controller-2")["failures"] == []
    assert _ours(_check(cl), "failed") == []
