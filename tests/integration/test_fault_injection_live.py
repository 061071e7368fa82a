"""Interrupted at any point, a re-run converges (issue 12 item 14), live on the sandbox.

``pcmkimg update SERVICE --image T --all`` is killed with SIGKILL at seeded random moments
spread over every phase of the update: taking the lease, the pulls, right after a retag, with
the restart's ban in place, while the replica is down, after the ban was cleared, after a node
was verified, during a rollback and around the release. After each kill a plain re-run of the
same command (which may have to wait out the lease, the sandbox's ``[lease] period``) must end
with exit 0, every node on T, no ``cli-ban``, no lease, and the journal must tell what happened
(the killed run without its ``done``, the re-run with it). Throughout, a thread polls every
node's podman API: the floating name must resolve on every node at every sample. The targets
alternate between two images, so every run has work. Prints ``N/N kills converged``.

The rollback moment needs a failure after a retag: the test places harmless constraints
(score 0) with the ids the restart is about to use, after the preflight; the restart then
refuses, the node is rolled back, and the kill lands in the rollback. They are the test's own
fault and it removes them before the re-run.
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pcmkimg.adapters import pacemaker as pm
from pcmkimg.core import cib, lease
from tests.sandbox.cluster import LEASE_PERIOD, Cluster, node_env, wait_idle
from tests.sandbox.fixtures import Sandbox, guarded_bundle
from tests.sandbox.polling import Polling

REPO = Path(__file__).resolve().parents[2]
BUNDLE = "fi-bundle"
SERVICE = "fi"
FLOATING = "cluster.common.tag/fi:pcmklatest"
IMAGES = ("ns1/svc:1.1", "ns1/svc:1.0")  # alternated: every run has work
SEED = int(os.environ.get("PCMKIMG_FAULT_SEED", "1214"))
ONLY = os.environ.get("PCMKIMG_FAULT_ONLY")  # e.g. "8,12": only those moments (1-based)

pytestmark = pytest.mark.timeout(900)
guarded = guarded_bundle(BUNDLE, FLOATING, "ns1/svc:1.0")


# --------------------------------------------------------------------------- observations


def resolves(sock: Path, name: str) -> bool | None:
    """Whether ``name`` exists in the store behind the podman API socket (None: no answer)."""
    path = f"/v1.41/libpod/images/{urllib.parse.quote(name, safe='')}/exists"
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(5)
            s.connect(str(sock))
            s.sendall(f"GET {path} HTTP/1.0\r\nHost: d\r\n\r\n".encode())
            answer = s.recv(64).decode("latin-1")
    except OSError:
        return None
    return answer.split(" ", 2)[1] == "204" if " " in answer else None


@dataclass
class NamePoller(Polling):
    """Polls, in a thread, the floating name on every node's podman API."""

    cl: Cluster
    samples: int = 0
    missing: list[tuple[float, str]] = field(default_factory=list)
    interval = 0.1
    join_timeout = 10.0

    def sample(self) -> None:
        for node in self.cl.nodes:
            if resolves(node.socket, FLOATING) is False:
                self.missing.append((time.time(), node.name))
        self.samples += 1


@dataclass
class Run:
    """A background ``pcmkimg update``: its stderr lines as they come."""

    child: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)
    _reader: threading.Thread | None = None

    def start_reading(self) -> Run:
        def read() -> None:
            assert self.child.stderr is not None
            for line in self.child.stderr:
                self.lines.append(line)

        self._reader = threading.Thread(target=read, daemon=True)
        self._reader.start()
        return self

    def said(self, text: str, count: int = 1) -> bool:
        return sum(text in line for line in list(self.lines)) >= count

    def text(self) -> str:
        return "".join(self.lines)


def spawn(cl: Cluster, node: str, *args: str) -> Run:
    env = node_env({"PCMKIMG_CONF": str(cl.conf), "PYTHONPATH": str(REPO)})
    argv = [*cl.node(node).enter(), sys.executable, "-m", "pcmkimg", *args]
    child = subprocess.Popen(
        argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    return Run(child).start_reading()


def own_bans(r: pm.Runner) -> list[str]:
    return [c.id for c in cib.cli_constraints(pm.query_cib(r)) if c.resource == BUNDLE]


def replica_down(r: pm.Runner, node: str) -> bool:
    replica = pm.status(r).replica_on(BUNDLE, node)
    return replica is None or not replica.active


# --------------------------------------------------------------------------- the moments


Trigger = Callable[[Run, pm.Runner, dict[str, object]], bool]


def after_start(run: Run, r: pm.Runner, seen: dict[str, object]) -> bool:
    return True


def line(text: str, count: int = 1) -> Trigger:
    return lambda run, r, seen: run.said(text, count)


def ban_placed(run: Run, r: pm.Runner, seen: dict[str, object]) -> bool:
    return run.said("restarting ") and bool(own_bans(r))


def replica_stopped(run: Run, r: pm.Runner, seen: dict[str, object]) -> bool:
    return run.said("restarting ") and bool(own_bans(r)) and replica_down(r, first_node(run))


def ban_cleared(run: Run, r: pm.Runner, seen: dict[str, object]) -> bool:
    if not run.said("restarting "):
        return False
    bans = own_bans(r)
    if bans:
        seen["banned"] = True
    return bool(seen.get("banned")) and not bans


def first_node(run: Run) -> str:
    for text in run.lines:
        if ": restarting " in text:
            return text.split(":", 1)[0]
    return "controller-0"


@dataclass(frozen=True)
class Moment:
    phase: str
    trigger: Trigger
    delay: tuple[float, float]  # random offset after the trigger, seconds
    conflict: bool = False  # place the constraints that make the first restart refuse


MOMENTS = [
    Moment("lease", after_start, (0.3, 0.9)),  # starting, planning, writing the lease
    Moment("lease", line("lease taken"), (0.0, 0.1)),  # the lease just written: preflight
    Moment("pulls", line("pulling "), (0.0, 0.3)),
    Moment("pulls", line("pulling "), (0.05, 0.15)),
    Moment("retag", line(" now names "), (0.0, 0.05)),
    Moment("ban", ban_placed, (0.0, 0.1)),
    Moment("wait", replica_stopped, (0.0, 0.3)),
    Moment("wait", ban_placed, (0.5, 1.5)),
    Moment("clear", ban_cleared, (0.0, 0.3)),
    Moment("verify", line(": healthy on "), (0.0, 0.1)),
    Moment("verify", line(": healthy on ", 2), (0.0, 0.2)),
    Moment("rollback", line(": rolling back to "), (0.0, 0.05), conflict=True),
    Moment("release", line(": healthy on ", 3), (0.0, 0.05)),
]


def conflict_xml(node: str) -> str:
    cid = f"cli-ban-{BUNDLE}-on-{node}"
    return f'<rsc_location id="{cid}" rsc="{BUNDLE}" node="{node}" score="0"/>'


# --------------------------------------------------------------------------- the test


@pytest.fixture
def stack(guarded: Sandbox) -> Iterator[tuple[Sandbox, Cluster, pm.Runner]]:
    cl = guarded.cluster
    assert cl is not None
    r = pm.Runner(prefix=tuple(cl.node("controller-0").enter()))
    for node in cl.names:
        cl.run(node, ["rm", "-f", "/var/lib/pcmkimg/journal.jsonl"], check=False)
    yield guarded, cl, r
    pm.update_cib(r, lambda c: lease.erase(c))


def floating_ids(cl: Cluster) -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for node in cl.names:
        out = cl.podman(node, "image", "inspect", "--format", "{{.Id}}", FLOATING, check=False)
        found[node] = out.stdout.strip() if out.returncode == 0 else None
    return found


def running_images(cl: Cluster) -> dict[str, set[str]]:
    found = {}
    for node in cl.names:
        ps = json.loads(cl.podman(node, "ps", "--format", "json").stdout or "[]")
        found[node] = {c["ImageID"] for c in ps if c["Names"][0].startswith(f"{BUNDLE}-podman-")}
    return found


def runs(entries: list[dict[str, object]]) -> dict[str, list[str]]:
    """Run id -> its events, in journal order."""
    found: dict[str, list[str]] = {}
    for e in entries:
        found.setdefault(str(e.get("run")), []).append(str(e.get("event")))
    return found


@dataclass(frozen=True)
class Done:
    returncode: int
    stderr: str


def rerun(cl: Cluster, node: str, args: tuple[str, ...], timeout: float) -> Done:
    """The plain re-run; on a timeout, what it said and what the cluster looks like."""
    run = spawn(cl, node, *args)
    try:
        run.child.wait(timeout)
    except subprocess.TimeoutExpired:
        run.child.kill()
        run.child.wait(30)
        mon = cl.run(node, ["crm_mon", "-1", "-r", "-f"], check=False).stdout
        cons = cl.run(node, ["cibadmin", "-Q", "-o", "constraints"], check=False).stdout
        return Done(-1, f"timed out after {timeout:g}s: {run.text()}\n{mon}\n{cons}")
    if run._reader is not None:
        run._reader.join(10)
    return Done(run.child.returncode, run.text())


def journal(cl: Cluster, node: str) -> list[dict[str, object]]:
    out = cl.pcmkimg(node, "--json", "history", SERVICE, "--limit", "100000", check=False)
    return json.loads(out.stdout) if out.returncode == 0 else []


def test_sigkill_at_any_moment_then_a_plain_rerun_converges(stack) -> None:  # type: ignore[no-untyped-def]
    sb, cl, r = stack
    rng = random.Random(SEED)
    ids = {path: sb.images[path].removeprefix("sha256:") for path in IMAGES}
    converged: list[str] = []
    failures: list[str] = []
    started = time.monotonic()
    with NamePoller(cl) as poller:
        for i, moment in enumerate(MOMENTS):
            if ONLY and str(i + 1) not in ONLY.split(","):
                continue
            path = IMAGES[i % 2]
            target, want = sb.ref(path), ids[path]
            on = cl.names[i % 3]  # where the killed run runs
            again = on if i % 4 else cl.names[(i + 1) % 3]  # the re-run: sometimes elsewhere
            args = ("update", SERVICE, "--image", target, "--all")
            label = f"#{i + 1} {moment.phase} (killed on {on}, re-run on {again}, {path})"
            run = spawn(cl, on, *args)
            seen: dict[str, object] = {}
            placed: list[str] = []
            try:
                deadline = time.monotonic() + 120
                while not moment.trigger(run, r, seen):
                    if moment.conflict and not placed and run.said("pulling "):
                        for node in cl.names:
                            xml = conflict_xml(node)
                            cl.run(
                                "controller-0",
                                ["cibadmin", "--create", "-o", "constraints", "--xml-text", xml],
                            )
                            placed.append(node)
                    if run.child.poll() is not None or time.monotonic() > deadline:
                        break
                    time.sleep(0.02)
                time.sleep(rng.uniform(*moment.delay))
                run.child.send_signal(signal.SIGKILL)
                hit = run.child.wait(30) == -signal.SIGKILL  # not exited before the kill
            finally:
                if run.child.poll() is None:
                    run.child.kill()
                    run.child.wait(30)
                for node in placed:
                    cid = f"cli-ban-{BUNDLE}-on-{node}"
                    cl.run(
                        "controller-0",
                        [
                            "cibadmin",
                            "--delete",
                            "-o",
                            "constraints",
                            "--xml-text",
                            f'<rsc_location id="{cid}"/>',
                        ],
                        check=False,
                    )
            killed = run.text()
            t0 = time.monotonic()
            out = rerun(cl, again, args, timeout=240)
            took = time.monotonic() - t0
            wait_idle(cl, again)
            problems = []
            if not hit:
                problems.append("the kill came too late: the run had already exited")
            if out.returncode != 0:
                problems.append(f"the re-run exited {out.returncode}: {out.stderr[-6000:]}")
            if set(floating_ids(cl).values()) != {want}:
                problems.append(f"floating names {floating_ids(cl)}")
            if running_images(cl) != {n: {want} for n in cl.names}:
                problems.append(f"running {running_images(cl)}")
            config = pm.query_cib(r)
            if cib.cli_constraints(config):
                problems.append(f"constraints {[c.id for c in cib.cli_constraints(config)]}")
            if lease.read(config) is not None:
                problems.append(f"lease {lease.read(config)}")
            rerun_id, events = (list(runs(journal(cl, again)).items()) or [("", [])])[-1]
            before = [ev for rid, ev in runs(journal(cl, on)).items() if rid != rerun_id]
            told = f"killed run's journal: {before[-1][-3:] if before else []}"
            if not events or events[0] != "start" or events[-1] != "done":
                problems.append(f"the re-run's journal: {events}")
            waited = "watching it" in out.stderr
            print(
                f"{label}: {'converged' if not problems else 'FAILED'}; {told}; re-run {took:.1f}s"
                + (f" (waited out the lease, {LEASE_PERIOD:g}s period)" if waited else ""),
                flush=True,
            )
            (converged if not problems else failures).append(label)
            if problems:
                failures[-1] += ": " + "; ".join(problems) + f"\n  killed run said:\n{killed}"
    total = len(converged) + len(failures)
    figure = f"{len(converged)}/{total} kills converged"
    print(
        f"{figure} (seed {SEED}, {time.monotonic() - started:.0f}s, "
        f"{poller.samples} samples of the floating name on {len(cl.names)} nodes)",
        flush=True,
    )
    assert not poller.missing, f"the floating name did not resolve: {poller.missing[:5]}"
    assert poller.samples > 100
    assert not failures, figure + "\n" + "\n".join(failures)
    assert {m.phase for m in MOMENTS} >= {
        "lease",
        "pulls",
        "retag",
        "ban",
        "wait",
        "clear",
        "verify",
        "rollback",
        "release",
    }
