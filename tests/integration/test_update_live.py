"""``pcmkimg update/status/check/history`` end to end (issue 6), live in the sandbox cluster.

One guarded bundle (``svc-bundle`` on ``cluster.common.tag/svc:pcmklatest``, 3 replicas) is
shared by the whole module. The tests run in file order, which is chosen so that each one
starts from the state the one before left (1.0 everywhere for the refusals, then the renamed
image, ...); every test still starts with :func:`ensure`, which checks the state and repairs
it when a test before it failed half-way. Every pcmkimg command runs ON a node through
``nsenter``, as an operator logged in there would run it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pcmkimg.adapters import pacemaker as pm
from pcmkimg.core import cib, lease
from tests.sandbox.cluster import REPO, Cluster, node_env, wait_idle
from tests.sandbox.fixtures import Sandbox
from tests.sandbox.proc import SandboxError, free_port

BUNDLE = "svc-bundle"
SERVICE = "svc"
FLOATING = "cluster.common.tag/svc:pcmklatest"
ROLLBACK = "cluster.common.tag/svc:pcmkprevious"
OLD = "ns1/svc:1.0"
NEW = "ns2/svc:1.1"  # the renamed image: same ID as ns1/svc:1.1
BROKEN = "ns1/svc:broken"
ON = "controller-0"  # where the operator runs pcmkimg

pytestmark = pytest.mark.timeout(300)


@dataclass(frozen=True)
class Stack:
    sb: Sandbox
    cl: Cluster
    runner: pm.Runner

    def ref(self, path: str) -> str:
        return self.sb.ref(path)

    def id_of(self, path: str) -> str:
        return self.sb.images[path].removeprefix("sha256:")

    def pcmkimg(self, *args: str, node: str = ON, timeout: float = 240):  # type: ignore[no-untyped-def]
        return self.cl.pcmkimg(node, *args, check=False, timeout=timeout)


# --------------------------------------------------------------------------- observations


def floating_ids(cl: Cluster) -> dict[str, str | None]:
    """Node -> the image ID behind the floating name there (None: it does not resolve)."""
    found: dict[str, str | None] = {}
    for node in cl.names:
        out = cl.podman(node, "image", "inspect", "--format", "{{.Id}}", FLOATING, check=False)
        found[node] = out.stdout.strip() if out.returncode == 0 else None
    return found


def containers(cl: Cluster, node: str) -> dict[str, tuple[str, str]]:
    """The bundle's running containers on a node: name -> (container ID, image ID)."""
    out = cl.podman(node, "ps", "--format", "json")
    return {
        c["Names"][0]: (c["Id"], c["ImageID"])
        for c in json.loads(out.stdout or "[]")
        if c["Names"][0].startswith(f"{BUNDLE}-podman-")
    }


def container_ids(cl: Cluster) -> dict[str, set[str]]:
    return {n: {cid for cid, _ in containers(cl, n).values()} for n in cl.names}


def running_images(cl: Cluster) -> dict[str, set[str]]:
    return {n: {img for _, img in containers(cl, n).values()} for n in cl.names}


def active_replicas(runner: pm.Runner) -> list[str]:
    return sorted(r.node or "" for r in pm.status(runner).replicas_of(BUNDLE) if r.active)


def leftovers(runner: pm.Runner) -> tuple[list[str], lease.Lease | None]:
    """(cli- constraints, the lease) in the live CIB: both must be empty after any command."""
    config = pm.query_cib(runner)
    return [c.id for c in cib.cli_constraints(config)], lease.read(config)


def epoch(runner: pm.Runner) -> tuple[str | None, str | None]:
    config = pm.query_cib(runner)
    return config.get("admin_epoch"), config.get("epoch")


def snapshot(st: Stack) -> dict[str, object]:
    """Everything an update could change: names, containers, the CIB configuration."""
    return {
        "floating": floating_ids(st.cl),
        "containers": container_ids(st.cl),
        "epoch": epoch(st.runner),
        "leftovers": leftovers(st.runner),
    }


def one_line_error(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("pcmkimg: error: ")]
    assert len(errors) == 1, stderr
    return errors[0]


def json_doc(stdout: str) -> Any:
    return json.loads(stdout)


# --------------------------------------------------------------------------- samplers


@dataclass
class Sampler:
    """Samples, in two threads, the active replicas (crm_mon XML every ``interval`` s) and
    the bundle's container IDs on each node (podman ps) while an update runs."""

    cl: Cluster
    interval: float = 0.3
    active: list[int] = field(default_factory=list)
    seen: dict[str, list[str]] = field(default_factory=dict)  # node -> container IDs in order
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)

    def _mon(self) -> None:
        while not self._stop.is_set():
            try:
                mon = self.cl.crm_mon()
            except (SandboxError, subprocess.TimeoutExpired) as exc:
                self.errors.append(str(exc))
            else:
                replicas = cib.cluster_status(mon).replicas_of(BUNDLE)
                self.active.append(sum(1 for r in replicas if r.active))
            self._stop.wait(self.interval)

    def _containers(self) -> None:
        while not self._stop.is_set():
            for node in self.cl.names:
                try:
                    ids = sorted(cid for cid, _ in containers(self.cl, node).values())
                except (SandboxError, subprocess.TimeoutExpired, ValueError) as exc:
                    self.errors.append(str(exc))
                    continue
                history = self.seen.setdefault(node, [])
                for cid in ids:
                    if cid not in history:
                        history.append(cid)
            self._stop.wait(self.interval)

    def __enter__(self) -> Sampler:
        for work in (self._mon, self._containers):
            thread = threading.Thread(target=work, daemon=True)
            thread.start()
            self._threads.append(thread)
        time.sleep(2 * self.interval)  # a first sample of each before the update starts
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=60)


# --------------------------------------------------------------------------- the bundle


def heal(st: Stack) -> None:
    """Undo whatever a failed test left: bans, the lease, a missing floating name, failures."""
    cl, runner = st.cl, st.runner
    bans, held = leftovers(runner)
    for ban in cib.cli_constraints(pm.query_cib(runner)):
        cl.run(ON, ["crm_resource", "--clear", "--resource", ban.resource, "--node", ban.node])
    if held is not None:
        pm.update_cib(runner, lambda c: lease.erase(c))
    for node, image in floating_ids(cl).items():
        if image is None:
            cl.seed(st.ref(OLD), FLOATING, nodes=[node])
    pm.cleanup(runner, BUNDLE)
    wait_idle(cl)
    del bans


def ensure(st: Stack, path: str, **other: str) -> None:
    """The state every test starts from: ``path`` (or ``other[node]``) behind the floating name
    and running on every node, 3 active replicas, no failure, no ban, no lease. Repaired with
    pcmkimg if needed."""
    want = {n: st.id_of(other.get(n.replace("-", "_"), path)) for n in st.cl.names}

    def good() -> bool:
        status = pm.status(st.runner)
        return (
            floating_ids(st.cl) == want
            and running_images(st.cl) == {n: {want[n]} for n in st.cl.names}
            and active_replicas(st.runner) == st.cl.names
            and not status.failures_of([BUNDLE, *(f"{BUNDLE}-podman-{i}" for i in range(3))])
            and leftovers(st.runner) == ([], None)
        )

    if good():
        return
    heal(st)
    for node in st.cl.names if not good() else ():
        image = st.ref(other.get(node.replace("-", "_"), path))
        out = st.pcmkimg("update", SERVICE, "--image", image, "--node", node)
        assert out.returncode == 0, out.stderr
        wait_idle(st.cl)
    assert good(), snapshot(st)


@pytest.fixture(scope="module")
def stack(cluster_sandbox: Sandbox) -> Iterator[Stack]:
    """The guarded bundle on the floating name, running ns1/svc:1.0 on all 3 nodes."""
    sb = cluster_sandbox
    cl = sb.cluster
    assert cl is not None
    st = Stack(sb, cl, pm.Runner(prefix=tuple(cl.node(ON).enter())))
    try:
        # Removed afterwards with FLOATING, ROLLBACK and every registry name (OLD, NEW, BROKEN).
        with cl.guarded_bundle(BUNDLE, FLOATING, sb.ref(OLD)):
            try:
                assert active_replicas(st.runner) == cl.names
                yield st
            finally:
                pm.update_cib(st.runner, lambda c: lease.erase(c))
                for ban in cib.cli_constraints(pm.query_cib(st.runner)):
                    cl.run(ON, ["crm_resource", "--clear", "--resource", ban.resource], check=False)
    finally:
        for node in cl.names:
            cl.run(node, ["rm", "-f", "/var/lib/pcmkimg/journal.jsonl"], check=False)


# --------------------------------------------------------------------------- a background run


def spawn_update(st: Stack, *args: str, node: str = ON) -> subprocess.Popen[str]:
    """``pcmkimg ARGS`` on ``node`` in the background: the argv that ``Cluster.pcmkimg`` runs.

    nsenter without ``--fork`` (no PID namespace) execs python in place, so the child's PID
    is the pcmkimg process itself (checked by :func:`wait_exec`).
    """
    env = node_env({"PCMKIMG_CONF": str(st.cl.conf), "PYTHONPATH": str(REPO)})
    argv = [*st.cl.node(node).enter(), sys.executable, "-m", "pcmkimg", *args]
    return subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def wait_exec(child: subprocess.Popen[str]) -> None:
    """Until nsenter has exec'd python: the PID runs ``python -m pcmkimg`` itself."""
    deadline = time.monotonic() + 15
    while True:
        cmd = Path(f"/proc/{child.pid}/cmdline").read_bytes().split(b"\0")
        if b"pcmkimg" in cmd and b"nsenter" not in cmd[0]:
            assert Path(cmd[0].decode()).name.startswith("python"), cmd
            return
        assert child.poll() is None and time.monotonic() < deadline, cmd
        time.sleep(0.02)


def wait_until(what: str, predicate, child: subprocess.Popen[str], timeout: float = 120) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        if child.poll() is not None:
            out, err = child.communicate()
            pytest.fail(f"the update exited {child.returncode} before {what}: {err}{out}")
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


# =========================================================================== the tests
# Phase 1: ns1/svc:1.0 everywhere; commands that must change nothing.


def test_status_json_matches_the_schema_and_check_passes(stack: Stack) -> None:
    ensure(stack, OLD)
    try:
        import jsonschema
    except ImportError:
        pytest.fail("jsonschema is missing: add it to the deps of [testenv] in tox.ini")
    out = stack.pcmkimg("--json", "status")
    assert out.returncode == 0, out.stderr
    doc = json_doc(out.stdout)
    schema = json.loads((REPO / "pcmkimg" / "status_schema.json").read_text())
    jsonschema.validate(doc, schema)
    (svc,) = [s for s in doc["services"] if s["bundle"] == BUNDLE]
    assert (svc["service"], svc["floating"], svc["guard"], svc["interleave"]) == (
        SERVICE,
        FLOATING,
        "wired",
        True,
    )
    assert [n["node"] for n in svc["nodes"]] == stack.cl.names
    for row in svc["nodes"]:
        assert row["floating"]["image_id"] == stack.id_of(OLD), row
        assert stack.ref(OLD) in row["floating"]["names"]
        assert row["container"]["image_id"] == stack.id_of(OLD)
        assert (row["drift"], row["role"], row["guard"]) == (False, "Started", "Started")
    human = stack.pcmkimg("status", SERVICE)
    assert human.returncode == 0 and stack.ref(OLD) in human.stdout, human.stderr

    out = stack.pcmkimg("check", node="controller-2")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "ok: no problems found" in out.stdout


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("update", SERVICE, "--image", "REG/NS1/Svc:1.0", "--all"), "image"),
        (("update", "nosuchsvc", "--image", "REG/ns1/svc:1.0", "--all"), "nosuchsvc"),
        (
            ("update", SERVICE, "--image", "REG/ns1/svc:1.0", "--node", "controller-9"),
            "controller-9",
        ),
        (
            ("update", SERVICE, "--image", "REG/ns1/svc:1.0", "--node", ON, "--all"),
            "--node",
        ),
        (("update", SERVICE, "--image", "REG/ns1/svc:1.0"), "--node"),
        (("update", SERVICE, "--image", "REG/ns1/svc:1.0", "--all", "--digest", "md5:x"), ""),
        (("rollback", "nosuchsvc", "--node", ON), "nosuchsvc"),
        (("status", "nosuchsvc"), "nosuchsvc"),
    ],
    ids=[
        "malformed-image",
        "unknown-service",
        "unknown-node",
        "node-and-all",
        "neither-node-nor-all",
        "malformed-digest",
        "rollback-unknown-service",
        "status-unknown-service",
    ],
)
def test_bad_input_is_exit_2_one_line_and_changes_nothing(
    stack: Stack, args: tuple[str, ...], says: str
) -> None:
    ensure(stack, OLD)
    before = snapshot(stack)
    registry = stack.sb.registry
    out = stack.pcmkimg(*(a.replace("REG", registry) for a in args))
    assert out.returncode == 2, out.stdout + out.stderr
    line = one_line_error(out.stderr)
    assert says in line
    assert "internal error" not in line
    assert snapshot(stack) == before


def test_dry_run_prints_the_plan_and_changes_nothing(stack: Stack) -> None:
    ensure(stack, OLD)
    before = snapshot(stack)
    out = stack.pcmkimg("update", SERVICE, "--image", stack.ref(NEW), "--all", "--dry-run")
    assert out.returncode == 0, out.stderr
    assert f"update {SERVICE} (bundle {BUNDLE}) to {stack.ref(NEW)}" in out.stdout
    assert "lease" in out.stdout and "pull" in out.stdout
    for node in stack.cl.names:
        assert f"{node}: {FLOATING} -> {stack.ref(NEW)}" in out.stdout
    out = stack.pcmkimg(
        "--json", "update", SERVICE, "--image", stack.ref(NEW), "--all", "--dry-run"
    )
    assert out.returncode == 0, out.stderr
    doc = json_doc(out.stdout)
    assert doc["dry_run"] is True and sorted(doc["targets"]) == stack.cl.names
    assert snapshot(stack) == before


@pytest.mark.parametrize("where", ["registry-stopped", "missing-tag"])
def test_pull_failure_is_exit_5_and_nothing_is_retagged_or_restarted(
    stack: Stack, where: str
) -> None:
    ensure(stack, OLD)
    if where == "registry-stopped":
        ref = f"127.0.0.1:{free_port()}/ns1/svc:1.1"
    else:
        ref = stack.ref("ns1/svc:no-such-tag")
    before = snapshot(stack)
    del before["epoch"]  # the lease was taken and released
    out = stack.pcmkimg("--json", "update", SERVICE, "--image", ref, "--all")
    assert out.returncode == 5, out.stdout + out.stderr
    line = one_line_error(out.stderr)
    assert "pull failed" in line and "nothing was retagged or restarted" in line
    doc = json_doc(out.stdout)
    assert doc["exit_code"] == 5 and doc["report"]["nodes"] == []
    after = snapshot(stack)
    del after["epoch"]
    assert after == before


def registry_digest(st: Stack, path: str) -> str:
    """The manifest digest of a test image in the registry (skopeo on the host, loopback)."""
    out = subprocess.run(
        ["skopeo", "inspect", "--tls-verify=false", f"docker://{st.ref(path)}"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return str(json.loads(out.stdout)["Digest"])


def names_on(cl: Cluster, node: str, image_id: str) -> set[str]:
    out = cl.podman(node, "image", "inspect", "--format", "json", image_id)
    return set(json.loads(out.stdout)[0].get("RepoTags") or ())


def test_a_digest_of_another_tag_is_refused_exit_2_and_nothing_moves(stack: Stack) -> None:
    """Before: the pull went by the digest and the result was tagged NAME:TAG, so the node
    ran 1.1 and its local ns1/svc:1.0 named 1.1."""
    ensure(stack, OLD)
    other = registry_digest(stack, "ns1/svc:1.1")
    own = registry_digest(stack, OLD)
    before = snapshot(stack)
    del before["epoch"]  # the lease was taken and released
    out = stack.pcmkimg("update", SERVICE, "--image", stack.ref(OLD), "--digest", other, "--all")
    assert out.returncode == 2, out.stdout + out.stderr
    line = one_line_error(out.stderr)
    assert other in line and own in line, line
    assert "nothing was retagged or restarted" in line
    after = snapshot(stack)
    del after["epoch"]
    assert after == before
    for node in stack.cl.names:
        assert stack.ref(OLD) in names_on(stack.cl, node, stack.id_of(OLD)), node


def test_a_reference_with_a_digest_is_pulled_by_it_and_no_real_name_is_made(
    stack: Stack,
) -> None:
    ensure(stack, OLD)
    digest = registry_digest(stack, "ns1/svc:1.1")
    tagged = stack.ref("ns1/svc:1.1")
    stack.cl.podman(ON, "rmi", tagged, check=False)  # never in use here: 1.0 runs
    out = stack.pcmkimg("--json", "update", SERVICE, "--image", f"{tagged}@{digest}", "--node", ON)
    assert out.returncode == 0, out.stdout + out.stderr
    (node,) = json_doc(out.stdout)["report"]["nodes"]
    assert node["result"] == "ok", node
    new_id = stack.id_of("ns1/svc:1.1")
    assert floating_ids(stack.cl)[ON] == new_id
    assert running_images(stack.cl)[ON] == {new_id}
    # Only the names of our scheme were made: no ns1/svc:1.1 tag on the node.
    assert tagged not in names_on(stack.cl, ON, new_id)
    assert stack.cl.podman(ON, "image", "exists", tagged, check=False).returncode == 1
    assert leftovers(stack.runner) == ([], None)


def test_broken_image_fails_on_the_first_node_which_is_rolled_back(stack: Stack) -> None:
    ensure(stack, OLD)
    before = container_ids(stack.cl)
    out = stack.pcmkimg("--json", "update", SERVICE, "--image", stack.ref(BROKEN), "--all")
    assert out.returncode == 6, out.stdout + out.stderr
    line = one_line_error(out.stderr)
    assert "failed on controller-0 and was rolled back" in line
    assert "start" in line, line  # the failed operation is named
    doc = json_doc(out.stdout)
    assert doc["exit_code"] == 6 and "start" in doc["error"]
    (first,) = doc["report"]["nodes"]
    assert (first["node"], first["result"], first["rolled_back"]) == (ON, "rolled-back", True)
    wait_idle(stack.cl)
    assert set(floating_ids(stack.cl).values()) == {stack.id_of(OLD)}
    assert running_images(stack.cl) == {n: {stack.id_of(OLD)} for n in stack.cl.names}
    assert active_replicas(stack.runner) == stack.cl.names
    after = container_ids(stack.cl)
    assert after["controller-1"] == before["controller-1"]  # not touched
    assert after["controller-2"] == before["controller-2"]
    assert leftovers(stack.runner) == ([], None)


# Phase 2: the renamed image, one node, the same image again.


def test_update_to_the_renamed_image_restarts_each_replica_once_keeping_two(
    stack: Stack,
) -> None:
    ensure(stack, OLD)
    before = container_ids(stack.cl)
    with Sampler(stack.cl) as sampler:
        out = stack.pcmkimg("--json", "update", SERVICE, "--image", stack.ref(NEW), "--all")
    assert out.returncode == 0, out.stderr
    report = json_doc(out.stdout)["report"]
    assert report["restarted"] == 3
    assert sorted((n["node"], n["result"]) for n in report["nodes"]) == [
        (n, "ok") for n in stack.cl.names
    ]
    after = container_ids(stack.cl)
    for node in stack.cl.names:
        assert len(before[node]) == len(after[node]) == 1
        assert before[node].isdisjoint(after[node]), node
        # exactly one restart: the sampler saw the old container, then the new one, no other
        assert sampler.seen[node] == [*before[node], *after[node]], (node, sampler.seen)
    assert len(sampler.active) >= 10, (sampler.active, sampler.errors)
    assert min(sampler.active) >= 2, sampler.active
    assert 3 in sampler.active[-3:]

    out = stack.pcmkimg("--json", "status", SERVICE)
    assert out.returncode == 0, out.stderr
    (svc,) = json_doc(out.stdout)["services"]
    for row in svc["nodes"]:
        assert row["floating"]["image_id"] == stack.id_of(NEW), row
        assert stack.ref(NEW) in row["floating"]["names"]
        assert row["container"]["image_id"] == stack.id_of(NEW)
        assert row["drift"] is False and row["role"] == "Started"
    assert leftovers(stack.runner) == ([], None)


def test_the_same_image_again_restarts_nothing(stack: Stack) -> None:
    ensure(stack, NEW)
    before = container_ids(stack.cl)
    out = stack.pcmkimg("--json", "update", SERVICE, "--image", stack.ref(NEW), "--all")
    assert out.returncode == 0, out.stderr
    report = json_doc(out.stdout)["report"]
    assert report["restarted"] == 0
    assert {n["result"] for n in report["nodes"]} == {"unchanged"}
    assert container_ids(stack.cl) == before


def test_update_one_node_restarts_only_that_replica(stack: Stack) -> None:
    ensure(stack, NEW)
    before = container_ids(stack.cl)
    out = stack.pcmkimg(
        "--json", "update", SERVICE, "--image", stack.ref(OLD), "--node", "controller-1"
    )
    assert out.returncode == 0, out.stderr
    report = json_doc(out.stdout)["report"]
    assert report["restarted"] == 1
    (node,) = report["nodes"]
    # The real downtime (podman's events: the old container's death to the new one's start)
    # is shorter than the restart step around it, and both are reported.
    assert node["down_seconds"] is not None, node
    assert 0 < node["down_seconds"] < node["restart_seconds"], node
    assert report["longest_down_seconds"] == node["down_seconds"]
    after = container_ids(stack.cl)
    assert after["controller-0"] == before["controller-0"]
    assert after["controller-2"] == before["controller-2"]
    assert after["controller-1"].isdisjoint(before["controller-1"])
    ids = floating_ids(stack.cl)
    assert ids == {
        "controller-0": stack.id_of(NEW),
        "controller-1": stack.id_of(OLD),
        "controller-2": stack.id_of(NEW),
    }
    assert running_images(stack.cl)["controller-1"] == {stack.id_of(OLD)}
    # The rollback name keeps the image that was there before.
    out = stack.cl.podman("controller-1", "image", "inspect", "--format", "{{.Id}}", ROLLBACK)
    assert out.stdout.strip() == stack.id_of(NEW)


def rollback_id(cl: Cluster, node: str) -> str | None:
    out = cl.podman(node, "image", "inspect", "--format", "{{.Id}}", ROLLBACK, check=False)
    return out.stdout.strip() if out.returncode == 0 else None


def test_a_rolled_back_attempt_leaves_both_names_as_they_were(stack: Stack) -> None:
    """controller-1 runs 1.0 with 1.1 kept under the rollback name. A failed update to the
    broken image is rolled back; the rollback name still names 1.1 (before: the broken
    image, so that ``rollback`` then failed, exit 6), and ``rollback`` goes to 1.1."""
    ensure(stack, NEW, controller_1=OLD)
    node = "controller-1"
    if rollback_id(stack.cl, node) != stack.id_of(NEW):
        stack.cl.podman(node, "tag", stack.ref(NEW), ROLLBACK)
    out = stack.pcmkimg("update", SERVICE, "--image", stack.ref(BROKEN), "--node", node)
    assert out.returncode == 6, out.stdout + out.stderr
    wait_idle(stack.cl)
    assert floating_ids(stack.cl)[node] == stack.id_of(OLD)
    assert rollback_id(stack.cl, node) == stack.id_of(NEW)
    assert running_images(stack.cl)[node] == {stack.id_of(OLD)}

    out = stack.pcmkimg("--json", "rollback", SERVICE, "--node", node)
    assert out.returncode == 0, out.stdout + out.stderr
    assert json_doc(out.stdout)["result"] == "ok"
    assert floating_ids(stack.cl)[node] == stack.id_of(NEW)
    assert running_images(stack.cl)[node] == {stack.id_of(NEW)}
    assert rollback_id(stack.cl, node) == stack.id_of(OLD)  # a second rollback undoes it
    assert leftovers(stack.runner) == ([], None)


# Phase 3: concurrency (controller-1 on 1.0, the others on 1.1), interruption (back to 1.0).


def test_a_second_update_while_one_runs_is_refused_naming_the_holder(stack: Stack) -> None:
    # Three restarts (about 2 s each): the first run holds the lease, renewing it, for longer
    # than the second needs to see it renewed (one restart alone may end before).
    ensure(stack, OLD)
    child = spawn_update(stack, "update", SERVICE, "--image", stack.ref(NEW), "--all")
    try:
        wait_exec(child)
        taken = lambda: lease.read(pm.query_cib(stack.runner)) is not None  # noqa: E731
        wait_until("the lease is taken", taken, child)
        holder = lease.read(pm.query_cib(stack.runner))
        assert holder is not None and holder.pid == child.pid
        out = stack.pcmkimg(
            "--json", "update", SERVICE, "--image", stack.ref(NEW), "--all", node="controller-2"
        )
        assert out.returncode == 4, out.stdout + out.stderr
        line = one_line_error(out.stderr)
        assert f"pid {child.pid} on host {holder.host}" in line
        assert json_doc(out.stdout)["exit_code"] == 4
        _, err = child.communicate(timeout=240)
        assert child.returncode == 0, err
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    assert leftovers(stack.runner) == ([], None)
    # The first run updated every node; the refused one changed nothing anywhere.
    assert set(floating_ids(stack.cl).values()) == {stack.id_of(NEW)}


@pytest.mark.parametrize(
    ("signum", "code", "said"),
    [(signal.SIGTERM, 143, "terminated"), (signal.SIGINT, 130, "interrupted")],
    ids=["SIGTERM", "Ctrl-C"],
)
def test_a_signal_during_a_restart_leaves_no_ban_no_lease_and_a_rerun_finishes(
    stack: Stack, signum: int, code: int, said: str
) -> None:
    ensure(stack, NEW)
    args = ("update", SERVICE, "--image", stack.ref(OLD), "--all")
    child = spawn_update(stack, *args)
    ban = pm.ban_id(BUNDLE, ON)
    try:
        wait_exec(child)
        wait_until(
            f"{ban} (a restart under way)",
            lambda: ban in [c.id for c in cib.cli_constraints(pm.query_cib(stack.runner))],
            child,
        )
        os.kill(child.pid, signum)
        out, err = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    assert child.returncode == code, out + err
    assert said in one_line_error(err)
    assert leftovers(stack.runner) == ([], None)
    ids = floating_ids(stack.cl)
    assert None not in ids.values(), ids
    assert ids[ON] == stack.id_of(OLD)  # retagged before the restart
    wait_idle(stack.cl)
    history = stack.pcmkimg("--json", "history", SERVICE)
    events = [e["event"] for e in json_doc(history.stdout)]
    assert events[-2:] == ["restart", "aborted"], events[-6:]

    out = stack.cl.pcmkimg(ON, "--json", *args, check=False, timeout=240)
    assert out.returncode == 0, out.stderr
    wait_idle(stack.cl)
    assert set(floating_ids(stack.cl).values()) == {stack.id_of(OLD)}
    assert running_images(stack.cl) == {n: {stack.id_of(OLD)} for n in stack.cl.names}
    assert active_replicas(stack.runner) == stack.cl.names
    assert leftovers(stack.runner) == ([], None)


# Phase 4: check with problems, then the journal.


def test_check_lists_problems_and_exits_3(stack: Stack) -> None:
    ensure(stack, OLD)
    stack.cl.run(ON, ["crm_resource", "--ban", "--resource", BUNDLE, "--node", "controller-1"])
    try:
        for _ in range(3):
            # The running guard puts a vanished name back at its next monitor (every 30 s):
            # when that happened between the untag and the check, take it away again.
            stack.cl.podman("controller-2", "untag", FLOATING, FLOATING, check=False)
            out = stack.pcmkimg("--json", "check")
            human = stack.pcmkimg("check")
            if "unresolved" in out.stdout and human.stdout.count("problem: ") == 2:
                break
        assert out.returncode == 3, out.stdout + out.stderr
        # --json: one document, the error with the check's report
        error = json.loads(out.stdout)
        assert error["exit_code"] == 3 and "2 problem(s)" in error["error"]
        doc = error["report"]
        kinds = sorted(p["kind"] for p in doc["problems"])
        assert doc["ok"] is False
        assert kinds == ["leftover-ban", "unresolved"], doc
        text = " ".join(p["message"] for p in doc["problems"])
        assert "controller-2" in text and f"cli-ban-{BUNDLE}-on-controller-1" in text
        assert human.returncode == 3
        assert human.stdout.count("problem: ") == 2, human.stdout
    finally:
        stack.cl.run(
            ON, ["crm_resource", "--clear", "--resource", BUNDLE, "--node", "controller-1"]
        )
        stack.cl.podman("controller-2", "tag", stack.ref(OLD), FLOATING)
        wait_idle(stack.cl)
    assert stack.pcmkimg("check").returncode == 0


def test_history_shows_the_runs_and_the_journal_is_private(stack: Stack) -> None:
    out = stack.pcmkimg("--json", "history", "--limit", "1000", SERVICE)
    assert out.returncode == 0, out.stderr
    entries = json_doc(out.stdout)
    assert len(entries) < 1000
    runs: dict[str, list[str]] = {}
    for e in entries:
        runs.setdefault(e["run"], []).append(e["event"])
    finished = [events for events in runs.values() if events[-1] == "done"]
    failed = [events for events in runs.values() if "rolled-back" in events]
    assert finished and failed, runs
    assert any(events.count("updated") == 3 for events in finished), runs
    human = stack.pcmkimg("history", "--limit", "3")
    assert human.returncode == 0
    assert len(human.stdout.splitlines()) == 3 and " done " in human.stdout
    state = stack.cl.node(ON).dir / "var-lib-pcmkimg"
    assert (state.stat().st_mode & 0o777) == 0o700
    assert ((state / "journal.jsonl").stat().st_mode & 0o777) == 0o600
