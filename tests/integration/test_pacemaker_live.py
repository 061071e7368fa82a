"""The Pacemaker adapter against the real sandbox cluster, with a real podman bundle."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pcmkimg.adapters import pacemaker as pm
from pcmkimg.adapters.errors import NotFoundError, RestartFailedError
from pcmkimg.core import cib
from pcmkimg.core.errors import RestartRefusedError
from tests.sandbox.cluster import Cluster

REPO = Path(__file__).resolve().parents[2]
BUNDLE = "pm-bundle"
FLOATING = "cluster.common.tag/pmsvc:pcmklatest"


def containers(cl: Cluster, node: str) -> dict[str, str]:
    """Container name -> container ID of the running containers on a node."""
    out = cl.podman(node, "ps", "--format", "json")
    return {c["Names"][0]: c["Id"] for c in json.loads(out.stdout or "[]")}


def all_containers(cl: Cluster) -> dict[str, dict[str, str]]:
    return {node: containers(cl, node) for node in cl.names}


def bans(r: pm.Runner) -> list[str]:
    return [c.id for c in cib.cli_constraints(pm.query_cib(r)) if c.is_ban]


def active_nodes(r: pm.Runner) -> list[str]:
    return sorted(x.node or "" for x in pm.status(r).replicas_of(BUNDLE) if x.active)


@pytest.fixture(scope="module")
def bundle(cluster_sandbox) -> Iterator[tuple[Cluster, pm.Runner, str]]:
    cl = cluster_sandbox.cluster
    ref = cluster_sandbox.ref("ns1/svc:1.0")
    runner = pm.Runner(prefix=tuple(cl.node("controller-0").enter()))
    with cl.seeded_bundle(BUNDLE, FLOATING, ref):
        assert active_nodes(runner) == cl.names
        yield cl, runner, ref


def heal(cl: Cluster, runner: pm.Runner, ref: str) -> None:
    """Back to three running replicas (after a test that broke one)."""
    for node in cl.names:
        cl.podman(node, "tag", ref, FLOATING)
    pm.cleanup(runner, BUNDLE)
    pm.wait(runner, 120)
    assert active_nodes(runner) == cl.names
    assert bans(runner) == []


def node_attribute(runner: pm.Runner, node: str, name: str) -> str | None:
    """A transient node attribute as crm_attribute reads it (None: not set)."""
    argv = ["crm_attribute", "--lifetime", "reboot", "--node", node, "--name", name]
    try:
        value = runner.run([*argv, "--query", "--quiet"]).stdout.strip()
    except NotFoundError:
        return None
    return value or None


def test_queries_and_node_attributes(bundle) -> None:
    cl, runner, _ = bundle
    on_1 = pm.Runner(prefix=tuple(cl.node("controller-1").enter()))
    assert pm.local_node(runner) == "controller-0"
    assert pm.local_node(on_1) == "controller-1"
    assert cib.bundle(pm.query_cib(runner), BUNDLE).image == FLOATING
    assert pm.status(runner).have_quorum
    pm.set_node_attribute(on_1, "controller-2", "pcmkimg-test-image", "reg:5000/ns/svc:1.0")
    try:
        assert node_attribute(runner, "controller-2", "pcmkimg-test-image") == (
            "reg:5000/ns/svc:1.0"
        )
    finally:
        pm.delete_node_attribute(runner, "controller-2", "pcmkimg-test-image")
    assert node_attribute(runner, "controller-2", "pcmkimg-test-image") is None
    with pytest.raises(NotFoundError):
        pm.cleanup(runner, "no-such-resource")


def test_restart_restarts_exactly_one_container(bundle) -> None:
    cl, runner, _ = bundle
    before = all_containers(cl)
    report = pm.restart_replica(runner, BUNDLE, "controller-1", timeout=60)
    after = all_containers(cl)
    assert (report.node, report.bundle) == ("controller-1", BUNDLE)
    assert report.container == f"{BUNDLE}-podman-{report.replica}"
    assert after["controller-0"] == before["controller-0"]
    assert after["controller-2"] == before["controller-2"]
    assert set(after["controller-1"]) == set(before["controller-1"])  # same container name
    assert set(after["controller-1"].values()).isdisjoint(before["controller-1"].values())
    assert bans(runner) == []


def test_failed_start_is_reported_as_a_failure(bundle) -> None:
    cl, runner, ref = bundle
    cl.podman("controller-1", "untag", ref, FLOATING)
    try:
        with pytest.raises(RestartFailedError, match="failed to pull") as info:
            pm.restart_replica(runner, BUNDLE, "controller-1", timeout=60)
        assert [f.task for f in info.value.failures] == ["start"]
        assert bans(runner) == []
        # The restart returns at the first failure: the replica is failed or already stopped.
        with pytest.raises(RestartRefusedError, match="has failed|no active replica"):
            pm.restart_replica(runner, BUNDLE, "controller-1", timeout=60)
    finally:
        heal(cl, runner, ref)


def test_refused_when_unmanaged(bundle) -> None:
    cl, runner, _ = bundle
    before = all_containers(cl)
    meta = ["crm_resource", "--resource", BUNDLE, "--meta"]
    runner.run([*meta, "--set-parameter", "is-managed", "--parameter-value", "false"])
    try:
        with pytest.raises(RestartRefusedError, match="unmanaged"):
            pm.restart_replica(runner, BUNDLE, "controller-1")
    finally:
        runner.run([*meta, "--delete-parameter", "is-managed"])
    assert cib.bundle(pm.query_cib(runner), BUNDLE).is_managed
    assert all_containers(cl) == before


def test_refused_on_a_standby_node(bundle) -> None:
    cl, runner, ref = bundle
    standby = ["crm_attribute", "--node", "controller-2", "--name", "standby"]
    cl.run("controller-0", [*standby, "--update", "on"])
    try:
        pm.wait(runner, 60)
        with pytest.raises(RestartRefusedError, match="standby"):
            pm.restart_replica(runner, BUNDLE, "controller-2")
    finally:
        cl.run("controller-0", [*standby, "--delete"])
        heal(cl, runner, ref)


# Restart in a child process with the node prefix; the parent signals it once the ban is in.
RESTART = """
import sys
from pcmkimg.adapters import pacemaker as pm
pm.restart_replica(pm.Runner(prefix=tuple(sys.argv[1:])), "pm-bundle", "controller-1", 60)
"""


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_interrupted_restart_leaves_no_ban(bundle, signum: int) -> None:
    cl, runner, ref = bundle
    child = subprocess.Popen(
        [sys.executable, "-c", RESTART, *cl.node("controller-2").enter()],
        cwd=REPO,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while f"cli-ban-{BUNDLE}-on-controller-1" not in bans(runner):
            assert child.poll() is None and time.monotonic() < deadline, "no ban appeared"
            time.sleep(0.05)
        child.send_signal(signum)
        _, err = child.communicate(timeout=60)
        assert child.returncode != 0, err
        assert ("Terminated" if signum == signal.SIGTERM else "KeyboardInterrupt") in err
        assert bans(runner) == []
    finally:
        if child.poll() is None:
            child.kill()
        heal(cl, runner, ref)
