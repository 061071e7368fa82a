"""The sandbox is real: independent stores, a real cluster, the real problem."""

from __future__ import annotations

import json

from tests.sandbox.cluster import wait_idle

FLOATING = "cluster.common.tag/svc:pcmklatest"


def image_ids(sb, node) -> set[str]:
    out = sb.podman(node, "images", "--format", "json")
    return {img["Id"] for img in json.loads(out.stdout or "[]")}


def test_pull_on_one_podman_node_is_absent_on_the_others(podman_sandbox):
    sb = podman_sandbox
    first, *others = sb.podman_nodes
    ref = sb.ref("ns1/svc:1.0")
    sb.podman(first, "pull", "-q", ref)
    try:
        assert sb.images["ns1/svc:1.0"] in image_ids(sb, first)
        for node in others:
            assert sb.images["ns1/svc:1.0"] not in image_ids(sb, node)
    finally:
        sb.podman(first, "rmi", "-f", ref, check=False)


def test_images_are_reproducible_and_renamed_repo_shares_content(podman_sandbox):
    images = podman_sandbox.images
    assert images["ns1/svc:1.1"] == images["ns2/svc:1.1"]
    assert len({images["ns1/svc:1.0"], images["ns1/svc:1.1"], images["ns1/svc:broken"]}) == 3


def containers(cl, node: str) -> dict[str, str]:
    """Bundle container name -> container ID on a node."""
    out = cl.podman(node, "ps", "--format", "json")
    return {c["Names"][0]: c["Id"] for c in json.loads(out.stdout or "[]")}


def replicas(cl) -> dict[str, tuple[str, bool]]:
    """Replica container resource -> (node, active) from crm_mon XML."""
    mon = cl.crm_mon()
    found = {}
    for res in mon.iterfind(".//bundle[@id='smoke-bundle']/replica/resource"):
        if res.get("resource_agent") != "ocf:heartbeat:podman":
            continue
        node = res.find("node")
        found[res.get("id")] = (
            node.get("name") if node is not None else "",
            res.get("active") == "true",
        )
    return found


def test_bundle_on_floating_name_and_missing_tag_fails_the_start(cluster_sandbox):
    sb = cluster_sandbox
    cl = sb.cluster
    ref = sb.ref("ns1/svc:1.0")
    cl.seed(ref, FLOATING)
    cl.create_bundle("smoke-bundle", FLOATING)
    try:
        wait_idle(cl)
        placed = replicas(cl)
        assert sorted(n for n, active in placed.values() if active) == cl.names
        online = [n.get("name") for n in cl.crm_mon().iterfind("nodes/node[@online='true']")]
        assert sorted(online) == cl.names
        before = {n: containers(cl, n) for n in ("controller-0", "controller-1")}

        # The problem pcmkimg solves: the floating name vanishes on one node,
        # the replica restarts there, and the bundle tries to pull it.
        cl.podman("controller-2", "untag", ref, FLOATING)
        cl.restart_replica("smoke-bundle", "controller-2")
        placed = replicas(cl)
        assert ("controller-2", True) not in placed.values()
        failures = cl.crm_mon().findall("failures/failure[@node='controller-2']")
        assert any("pull" in (f.get("exitreason") or "") for f in failures), failures
        after = {n: containers(cl, n) for n in ("controller-0", "controller-1")}
        assert after == before
    finally:
        cl.delete_bundle("smoke-bundle")
        for node in cl.names:
            cl.podman(node, "rmi", "-f", ref, check=False)


def _processes() -> set[tuple[int, str]]:
    import os

    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    start = f.read().rsplit(")", 1)[1].split()[19]
            except (OSError, IndexError):
                continue
            found.add((int(entry), start))
    return found


def test_up_then_down_leaves_namespaces_and_processes_as_before(cluster_sandbox):
    """`python -m tests.sandbox down` after `up` leaves `ip netns list` and the process table
    as they were (another sandbox, so the session's own stays up)."""
    import subprocess
    import sys
    import time

    from tests.sandbox.require import in_ci
    from tests.sandbox.state import load, sandbox_dir

    def netns() -> str:
        return subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "tests.sandbox", "--name", "updown", *args],
            capture_output=True,
            text=True,
            timeout=300,
        )

    ns_before, procs_before = netns(), _processes()
    up = cli("up")
    assert up.returncode == 0, up.stderr
    state = load("updown")
    assert state is not None and len(state.netns) == 4
    assert "pcmkimg-updown-c0" in netns()
    recorded = {p.pid for p in state.procs}
    assert len(recorded) >= 15
    down = cli("down")
    assert down.returncode == 0, down.stderr
    assert "pcmkimg-updown" not in netns()
    if in_ci():  # nothing else runs on a CI machine: the list is exactly as before
        assert netns() == ns_before
    assert not sandbox_dir("updown").exists()
    assert not (sandbox_dir("updown").parent / "updown-keeper.log").exists()
    deadline = time.monotonic() + 10
    while True:
        new = {p for p in _processes() - procs_before}
        leftover = {p for p in new if p[0] in recorded or "updown" in _cmdline(p[0])}
        if not leftover or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert not leftover, [_cmdline(p[0]) for p in leftover]


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""
