"""Faults of the node's world in the middle of an update (issue 22 items 3-6), live on the sandbox.

Each test injects one fault into a real ``pcmkimg update fi --image T --all`` at seeded moments,
then checks what the cluster and the node stores look like (floating and rollback names, the
images in each store, the running containers, bans, pins, the lease, the journal), then runs the
same command again once the fault is gone and checks that it converged:

- the target node's podman API service is killed after its retag, before or during its restart;
- the registry dies in the middle of the pulls (a throttling relay in front of it, on every
  node's 127.0.0.1, killed at a seeded byte count; started again for the re-run);
- another operator edits the CIB during the update (``pcs resource update`` of another
  resource, a location constraint, a permanent attribute of another node);
- a node's disk is full: its pull staging directory (a small tmpfs as the node's podman
  ``TMPDIR``) or its image store (the sandbox node's own tmpfs, filled but a chosen room).

``PCMKIMG_FAULT_SEED`` sets the seed (printed), ``PCMKIMG_FAULT_MOMENTS=N`` the number of moments
tried per fault (default 2 in CI; every listed moment, and seeded repeats of them, beyond).
The bundle and the helpers are those of ``test_fault_injection_live`` (imported, not copied).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pcmkimg.adapters import pacemaker as pm
from pcmkimg.core import cib, lease, restart
from tests.integration.test_fault_injection_live import (  # noqa: F401 - fixtures
    BUNDLE,
    FLOATING,
    SERVICE,
    Done,
    Run,
    floating_ids,
    guarded,
    journal,
    own_bans,
    replica_down,
    running_images,
)
from tests.integration.test_fault_injection_live import stack as fi_stack  # noqa: F401
from tests.sandbox import registry as sandbox_registry
from tests.sandbox.cluster import STORE, Cluster, node_env, wait_idle
from tests.sandbox.fixtures import Sandbox
from tests.sandbox.lifecycle import ours
from tests.sandbox.proc import free_port, run, spawn, unix_open, wait_for
from tests.sandbox.state import BASE, load

REPO = Path(__file__).resolve().parents[2]
SEED = int(os.environ.get("PCMKIMG_FAULT_SEED") or "2207")
MOMENTS = int(os.environ.get("PCMKIMG_FAULT_MOMENTS") or "2")
ROLLBACK = FLOATING.rsplit(":", 1)[0] + ":pcmkprevious"
OTHER = "fw-other"  # another operator's resource (item 5)

pytestmark = pytest.mark.timeout(900)


@pytest.fixture
def world(fi_stack):  # type: ignore[no-untyped-def]  # noqa: F811
    """The fault-injection test's guarded bundle (fi-bundle on ns1/svc:1.0), journals emptied;
    the lease removed afterwards."""
    return fi_stack


def pick(kind: str, moments: list[Moment], first: int | None = None) -> list[tuple[int, Moment]]:
    """The moments tried for a fault: the first MOMENTS of a seeded order of all of them
    (more than there are: seeded repeats), each with its index in ``moments``; ``first``
    (an index) always comes first: the moment that found a bug."""
    rng = random.Random(f"{SEED}-{kind}")
    order = list(range(len(moments)))
    rng.shuffle(order)
    if first is not None:
        order.remove(first)
        order.insert(0, first)
    while len(order) < MOMENTS:
        order.append(rng.randrange(len(moments)))
    chosen = order[:MOMENTS]
    print(f"{kind}: seed {SEED}, moments {[moments[i].name for i in chosen]}", flush=True)
    return [(i, moments[i]) for i in chosen]


@dataclass(frozen=True)
class Moment:
    name: str
    trigger: Callable[[Run, pm.Runner], bool]
    delay: tuple[float, float] = (0.0, 0.0)


# --------------------------------------------------------------------------- the world


def proc_of(cl: Cluster, what: str) -> int | None:
    """The pid of the sandbox process recorded as ``what`` (the latest one alive)."""
    state = load(cl.state.name)
    assert state is not None
    alive = [p.pid for p in state.procs if p.what == what and ours(p.pid, p.start)]
    return alive[-1] if alive else None


def daemon(cl: Cluster, node: str, what: str, argv: list[str], **env: str) -> int:
    """Start a daemon on a node, recorded in the sandbox's state (its ``down`` ends it)."""
    n = cl.node(node)
    child = spawn(
        [*n.enter(), *argv], log=n.dir / f"{what.replace(' ', '-')}.log", env=node_env(env)
    )
    state = load(cl.state.name)
    assert state is not None
    state.add_proc(child.pid, what)
    DAEMONS.append(child)
    return child.pid


DAEMONS: list[subprocess.Popen[bytes]] = []  # ours, reaped at the end of the module


def kill_service(cl: Cluster, node: str) -> None:
    """SIGKILL the node's podman API service (the socket file stays; nothing answers)."""
    pid = proc_of(cl, f"podman {node}")
    assert pid is not None, f"no podman service on {node}"
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not ours(pid, "x") and not unix_open(cl.node(node).socket), "the kill", 10)
    for child in DAEMONS:
        child.poll()


def start_service(cl: Cluster, node: str, **env: str) -> None:
    """The node's podman API service, as the sandbox starts it (``env``: its extra variables)."""
    n = cl.node(node)
    daemon(cl, node, f"podman {node}", ["podman", "system", "service", "--time=0", n.url], **env)
    wait_for(lambda: unix_open(n.socket), f"podman socket of {node}", timeout=30)


def conf_with(cl: Cluster, host: str) -> Path:
    """The sandbox's pcmkimg.conf with one more plain-HTTP registry."""
    text = cl.conf.read_text().replace(
        "[registries]\n", f"[registries]\n{host} = tls_verify=false\n"
    )
    path = cl.state.dir / "pcmkimg-faults.conf"
    path.write_text(text)
    return path


def spawn_run(cl: Cluster, node: str, conf: Path, *args: str) -> Run:
    env = node_env({"PCMKIMG_CONF": str(conf), "PYTHONPATH": str(REPO)})
    argv = [*cl.node(node).enter(), sys.executable, "-m", "pcmkimg", *args]
    child = subprocess.Popen(
        argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    return Run(child).start_reading()


def finish(run_: Run, timeout: float = 240) -> Done:
    try:
        run_.child.wait(timeout)
    except subprocess.TimeoutExpired:
        run_.child.kill()
        run_.child.wait(30)
        return Done(-1, f"timed out after {timeout:g}s: {run_.text()}")
    if run_._reader is not None:
        run_._reader.join(10)
    return Done(run_.child.returncode, run_.text())


def wait_trigger(run_: Run, r: pm.Runner, moment: Moment, rng: random.Random) -> bool:
    """Wait for the moment; False when the run ended first."""
    deadline = time.monotonic() + 120
    while not moment.trigger(run_, r):
        if run_.child.poll() is not None or time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    time.sleep(rng.uniform(*moment.delay))
    return run_.child.poll() is None


def image_ids(cl: Cluster, node: str) -> set[str]:
    out = cl.podman(node, "images", "-a", "-q", "--no-trunc").stdout.split()
    return {i.removeprefix("sha256:") for i in out}


def name_id(cl: Cluster, node: str, name: str) -> str | None:
    out = cl.podman(node, "image", "inspect", "--format", "{{.Id}}", name, check=False)
    return out.stdout.strip() if out.returncode == 0 else None


@dataclass(frozen=True)
class Names:
    """The floating and rollback name of every node."""

    floating: dict[str, str | None]
    rollback: dict[str, str | None]

    @classmethod
    def read(cls, cl: Cluster) -> Names:
        return cls(floating_ids(cl), {n: name_id(cl, n, ROLLBACK) for n in cl.names})


def leftovers(r: pm.Runner) -> list[str]:
    """Bans, pins and the lease in the CIB: none may stay after a run."""
    config = pm.query_cib(r)
    found = [c.id for c in cib.cli_constraints(config)]
    found += [f"pin {b}" for b in restart.pinned_bundles(config)]
    if restart.defaults_pinned(config):
        found.append("rsc_defaults pin")
    if lease.read(config) is not None:
        found.append(f"lease {lease.read(config)}")
    return found


def last_run(cl: Cluster, node: str) -> list[dict[str, object]]:
    """The journal lines of the last run on ``node``."""
    entries = journal(cl, node)
    if not entries:
        return []
    rid = entries[-1].get("run")
    return [e for e in entries if e.get("run") == rid]


def events(entries: list[dict[str, object]]) -> list[str]:
    return [str(e.get("event")) for e in entries]


def converged(cl: Cluster, r: pm.Runner, want: str, out: Done, on: str) -> list[str]:
    """What is wrong after a re-run that should have converged on image ``want``."""
    problems = []
    if out.returncode != 0:
        problems.append(f"the re-run exited {out.returncode}: {out.stderr[-4000:]}")
    if set(floating_ids(cl).values()) != {want}:
        problems.append(f"floating names {floating_ids(cl)}")
    if running_images(cl) != {n: {want} for n in cl.names}:
        problems.append(f"running {running_images(cl)}")
    if leftovers(r):
        problems.append(f"left in the CIB: {leftovers(r)}")
    done = events(last_run(cl, on))
    if not done or done[0] != "start" or done[-1] != "done":
        problems.append(f"the re-run's journal: {done}")
    return problems


def rerun(cl: Cluster, r: pm.Runner, on: str, conf: Path, args: tuple[str, ...], want: str):  # type: ignore[no-untyped-def]
    """The same command again, the fault gone: what is wrong afterwards, and its seconds."""
    t0 = time.monotonic()
    again = finish(spawn_run(cl, on, conf, *args))
    wait_idle(cl, on)
    return converged(cl, r, want, again, on), time.monotonic() - t0


def nothing_moved(
    cl: Cluster, r: pm.Runner, on: str, before: Names, stores: dict[str, set[str]], want: str
) -> list[str]:
    """What is wrong after an update that failed in its pulls: every name as before, no image
    but the target's (a pull that ended before the fault) new in any store, nothing of ours in
    the CIB, a journal with the failed pulls and no retag."""
    problems = []
    after = Names.read(cl)
    if after != before:
        problems.append(f"names moved: {before} -> {after}")
    for n in cl.names:
        extra = image_ids(cl, n) - stores[n] - {want}
        if extra:
            problems.append(f"{n}: images left by the failed pulls: {extra}")
    if leftovers(r):
        problems.append(f"left in the CIB: {leftovers(r)}")
    told = last_run(cl, on)
    if "retag" in events(told) or events(told)[-1:] != ["aborted"]:
        problems.append(f"the failed run's journal: {events(told)}")
    if not [e for e in told if e.get("event") == "pull" and e.get("ok") is False]:
        problems.append("the journal has no failed pull")
    return problems


def tell(failures: list[str], label: str, problems: list[str], detail: str, said: str) -> None:
    """Print a moment's outcome; a failed one goes to ``failures`` with what the run said."""
    print(f"{label}: {'converged' if not problems else 'FAILED'}; {detail}", flush=True)
    if problems:
        failures.append(f"{label}: " + "; ".join(problems) + f"\n{said}")


def target_for(sb: Sandbox, cl: Cluster) -> tuple[str, str]:
    """One of ns1/svc:1.0 and 1.1 that is not what the floating name names now."""
    now = set(floating_ids(cl).values())
    for path in ("ns1/svc:1.1", "ns1/svc:1.0"):
        want = sb.images[path].removeprefix("sha256:")
        if now != {want}:
            return sb.ref(path), want
    raise AssertionError("unreachable")


def fresh_image(sb: Sandbox, host: str, tag: str, pad: int, rng: random.Random) -> tuple[str, str]:
    """A runnable image no node has: the test service with ``pad`` random bytes, pushed to the
    sandbox registry as ``ns1/fw:TAG``; its reference at ``host`` and its ID."""
    state = load(sb.name)
    assert state is not None
    buf = io.BytesIO(sandbox_registry.rootfs_tar(f"fw-{tag}"))
    with tarfile.open(fileobj=buf, mode="a") as tar:
        info = tarfile.TarInfo("pad")
        info.size, info.mtime, info.mode = pad, 0, 0o644
        tar.addfile(info, io.BytesIO(rng.randbytes(pad)))
    work = state.dir / "build" / f"fw-{tag}.tar"
    work.write_bytes(buf.getvalue())
    cli = sandbox_registry._build_cli(state)
    env = sandbox_registry.podman_env(state)
    change = 'CMD ["/bin/sh", "-c", ' + json.dumps(sandbox_registry.SERVICE_CMD) + "]"
    out = run([*cli, "import", "--change", change, str(work), f"localhost/build/fw:{tag}"], env=env)
    image_id = out.stdout.strip().splitlines()[-1].removeprefix("sha256:")
    pushed = f"{sb.registry}/ns1/fw:{tag}"
    run([*cli, "tag", image_id, pushed], env=env)
    run([*cli, "push", "--tls-verify=false", pushed], env=env, timeout=120)
    run([*cli, "rmi", "-f", pushed, f"localhost/build/fw:{tag}"], env=env, check=False)
    work.unlink()
    return f"{host}/ns1/fw:{tag}", image_id


# --------------------------------------------------------------------------- item 4: the registry


class Relay:
    """The registry as the nodes see it at 127.0.0.1:PORT: a socat on each node into a unix
    socket where this relay forwards to the real registry, serving each connection at most
    ``rate`` bytes a second (a pull of a few MB takes seconds). :meth:`die` kills every node's
    socat with its connections, as the registry's death would: refused from then on."""

    def __init__(self, cl: Cluster, rate: int) -> None:
        self.cl = cl
        self.rate = rate
        self.port = free_port()
        self.sock_path = cl.state.dir / "fw-relay.sock"
        self.sock_path.unlink(missing_ok=True)
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(self.sock_path))
        self.listener.listen(64)
        self.sent = 0
        self._lock = threading.Lock()
        self.forwarders: dict[str, int] = {}
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            up = socket.create_connection(("127.0.0.1", self.cl.registry_port), timeout=30)
        except OSError:
            conn.close()
            return
        threading.Thread(target=self._pump, args=(conn, up, False), daemon=True).start()
        self._pump(up, conn, True)

    def _pump(self, src: socket.socket, dst: socket.socket, slow: bool) -> None:
        try:
            while True:
                data = src.recv(16384)
                if not data:
                    break
                dst.sendall(data)
                if slow:
                    with self._lock:
                        self.sent += len(data)
                    time.sleep(len(data) / self.rate)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def start(self) -> None:
        for node in self.cl.names:
            argv = [
                "socat",
                f"TCP-LISTEN:{self.port},bind=127.0.0.1,fork,reuseaddr",
                f"UNIX-CONNECT:{self.sock_path}",
            ]
            self.forwarders[node] = daemon(self.cl, node, f"socat relay {node}", argv)
        probe = f"import socket; socket.create_connection(('127.0.0.1', {self.port}), 1).close()"
        for node in self.cl.names:
            wait_for(
                lambda n=node: (
                    self.cl.run(n, [sys.executable, "-c", probe], check=False).returncode == 0
                ),
                f"the relay on {node}",
                timeout=20,
            )

    def die(self) -> None:
        for pid in self.forwarders.values():
            try:
                os.killpg(pid, signal.SIGKILL)  # socat and its children: every connection
            except ProcessLookupError:
                pass
        for child in DAEMONS:
            child.poll()
        self.forwarders.clear()

    def close(self) -> None:
        self.die()
        self.listener.close()
        self.sock_path.unlink(missing_ok=True)


def partial_files(cl: Cluster, node: str) -> set[str]:
    """The files the node's podman service has open in /var/tmp (podman's image_copy_tmp_dir;
    the sandbox's own files aside): a pull's blobs in flight."""
    pid = proc_of(cl, f"podman {node}")
    found = set()
    if pid is None:
        return found
    fds = Path(f"/proc/{pid}/fd")
    for fd in fds.iterdir() if fds.exists() else ():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("/var/tmp/") and not target.startswith(f"{BASE}/"):
            found.add(target.removesuffix(" (deleted)"))
    return found


@pytest.fixture
def relay(world) -> Iterator[Relay]:  # type: ignore[no-untyped-def]
    _, cl, _ = world
    r = Relay(cl, rate=1_000_000)
    r.start()
    yield r
    r.close()


def test_the_registry_dies_in_the_middle_of_the_pulls(world, relay: Relay) -> None:  # type: ignore[no-untyped-def]
    """Each moment: the update's pulls cut at a seeded byte count, checked; then, the registry
    back, one re-run of the same command converges."""
    sb, cl, r = world
    conf = conf_with(cl, relay.host)
    pad = 3_000_000  # per node; 3 nodes pull at once, each served at 1 MB/s
    fractions = [
        Moment("first bytes", lambda run_, r_: relay.sent > 20_000),
        Moment("a third in", lambda run_, r_: relay.sent > pad),
        Moment("two thirds in", lambda run_, r_: relay.sent > 2 * pad),
    ]
    rng = random.Random(SEED)
    target, want = fresh_image(sb, relay.host, f"{SEED}-{rng.randrange(10**6)}", pad, rng)
    args = ("update", SERVICE, "--image", target, "--all")
    failures: list[str] = []
    on = cl.names[0]
    for i, moment in pick("registry", fractions):
        on = cl.names[i % 3]
        for n in cl.names:  # a pull that ended before an earlier death: pull it again
            if want in image_ids(cl, n):
                cl.podman(n, "rmi", want)
        before = Names.read(cl)
        stores = {n: image_ids(cl, n) for n in cl.names}
        relay.sent = 0
        run_ = spawn_run(cl, on, conf, *args)
        hit = wait_trigger(run_, r, moment, rng)
        open_then = {n: partial_files(cl, n) for n in cl.names}
        relay.die()
        died = relay.sent
        out = finish(run_)
        relay.start()
        problems = []
        if not hit:
            problems.append("the pulls ended before the registry died")
        if out.returncode != 5 or "nothing was retagged or restarted" not in out.stderr:
            problems.append(f"exit {out.returncode}: {out.stderr[-3000:]}")
        problems += nothing_moved(cl, r, on, before, stores, want)
        for n in cl.names:
            left = {p for p in open_then[n] if os.path.exists(p)}
            if left:
                problems.append(f"{n}: partial files left: {left}")
        pulled = sorted(n for n in cl.names if want in image_ids(cl, n))
        detail = (
            f"exit {out.returncode} after {died} bytes, "
            f"{sum(len(v) for v in open_then.values())} blobs open, all gone after; "
            f"complete before on {pulled or 'no node'}"
        )
        tell(failures, f"registry #{i + 1} {moment.name}", problems, detail, out.stderr)
    relay.rate = 100_000_000
    wrong, took = rerun(cl, r, on, conf, args, want)
    tell(failures, "registry back: the re-run", wrong, f"{took:.1f}s", "")
    assert not failures, "\n".join(failures)


# --------------------------------------------------------------------------- item 6: a full disk


@dataclass(frozen=True)
class Full:
    name: str
    where: str  # "staging": the node's pull staging directory; "store": its image store
    room: int  # bytes left free there (whole pages of a tmpfs)


STAGING = "/run/fw-tmp"  # a tmpfs of this size, the node's podman API service's TMPDIR
FILL = f"{STORE}/fw-fill"  # a file that fills the node's image store (a tmpfs of the sandbox)
WHERE = {"staging": "its pull staging directory", "store": "its image store"}  # as the fix says
PAD = 2_000_000  # the new image: one layer, busybox (2 MB) and this many random bytes
FULL = [
    Full("staging: no room for a blob", "staging", 64 * 1024),
    Full("staging: room for half the blob", "staging", 1000 * 1024),
    Full("store: no room for the layer", "store", 0),
    Full("store: room for half the layer", "store", 2048 * 1024),
]


def store_entries(cl: Cluster, node: str) -> set[str]:
    """The layers, images and staged layers in the node's image store (podman's overlay
    driver), without its lock files and indexes: a partial layer or image shows here."""
    dirs = [f"{STORE}/storage/{d}" for d in ("overlay", "overlay/l", "overlay-layers")]
    dirs += [f"{STORE}/storage/{d}" for d in ("overlay-images", "tmp")]
    found = cl.run(node, ["find", *dirs, "-mindepth", "1", "-maxdepth", "1"], check=False)
    return {p for p in found.stdout.split() if not p.endswith((".lock", ".json"))}


def free_bytes(cl: Cluster, node: str, path: str) -> int:
    avail, size = cl.run(node, ["stat", "-f", "-c", "%a %S", path]).stdout.split()
    return int(avail) * int(size)


@contextlib.contextmanager
def full_disk(cl: Cluster, node: str, full: Full) -> Iterator[None]:
    """The node's staging directory or image store with ``full.room`` bytes free; the space
    back afterwards."""
    if full.where == "staging":
        cl.run(node, ["mkdir", "-p", STAGING])
        cl.run(node, ["mount", "-t", "tmpfs", "-o", f"size={full.room}", "tmpfs", STAGING])
        try:
            kill_service(cl, node)
            start_service(cl, node, TMPDIR=STAGING)
            yield
        finally:
            kill_service(cl, node)
            start_service(cl, node)
            cl.run(node, ["umount", STAGING], check=False)
        return
    try:
        cl.run(node, ["fallocate", "-l", str(free_bytes(cl, node, STORE) - full.room), FILL])
        assert free_bytes(cl, node, STORE) == full.room
        yield
    finally:
        cl.run(node, ["rm", "-f", FILL])


def test_a_node_whose_disk_is_full_fails_the_pull_there(world) -> None:  # type: ignore[no-untyped-def]
    """Each moment: one node's pull staging directory or image store full during the update,
    checked; then, the space back, one re-run of the same command converges."""
    sb, cl, r = world
    rng = random.Random(SEED + 6)
    target, want = fresh_image(sb, sb.registry, f"{SEED}-full-{rng.randrange(10**6)}", PAD, rng)
    args = ("update", SERVICE, "--image", target, "--all")
    failures: list[str] = []
    on = cl.names[0]
    for i, full in pick("full disk", FULL):  # type: ignore[arg-type]
        node = cl.names[rng.randrange(3)]
        on = cl.names[(i + 1) % 3]
        for n in cl.names:  # the other nodes' pulls of an earlier moment completed
            if want in image_ids(cl, n):
                cl.podman(n, "rmi", want)
        t0 = time.monotonic()
        with full_disk(cl, node, full):
            before = Names.read(cl)
            stores = {n: image_ids(cl, n) for n in cl.names}
            entries = store_entries(cl, node)
            running = running_images(cl)
            out = finish(spawn_run(cl, on, cl.conf, *args))
            problems = []
            if out.returncode != 5 or "nothing was retagged or restarted" not in out.stderr:
                problems.append(f"exit {out.returncode}: {out.stderr[-3000:]}")
            error = next((x for x in out.stderr.splitlines() if "pcmkimg: error" in x), "")
            if f"{node}: " not in error or "no space left on device" not in error:
                problems.append(f"the error does not name {node} and the full disk")
            fix = error.split("fix:")[-1]
            named = [w for w in WHERE.values() if w in fix]
            if "free disk space on the node" not in fix or named != [WHERE[full.where]]:
                problems.append(f"the fix does not say to free disk space in {WHERE[full.where]}")
            problems += nothing_moved(cl, r, on, before, stores, want)
            if want in image_ids(cl, node):
                problems.append(f"{node} has the image its pull failed for")
            left = store_entries(cl, node) - entries
            if left:
                problems.append(f"{node}: a partial layer or image left in its store: {left}")
            if full.where == "staging":
                staged = cl.run(node, ["ls", "-A", STAGING]).stdout.split()
                if staged:
                    problems.append(f"{node}: partial blobs left in {STAGING}: {staged}")
            if running_images(cl) != running:
                problems.append(f"the replicas moved: {running} -> {running_images(cl)}")
            told = last_run(cl, on)
            failed = [e.get("node") for e in told if e.get("event") == "pull" and not e.get("ok")]
            if failed != [node]:
                problems.append(f"the journal's failed pulls: {failed}")
        label = f"full disk #{i + 1} {full.name} on {node}"
        detail = f"exit {out.returncode}, {time.monotonic() - t0:.1f}s\n  {error[:400]}"
        tell(failures, label, problems, detail, out.stderr)
    wrong, took = rerun(cl, r, on, cl.conf, args, want)
    tell(failures, "space back: the re-run", wrong, f"{took:.1f}s", "")
    assert not failures, "\n".join(failures)


# --------------------------------------------------------------------------- item 3: the API


def updated_node(run_: Run) -> str | None:
    """The node whose floating name the run moved first."""
    for text in run_.lines:
        if f": {FLOATING} now names " in text:
            return text.split(":", 1)[0]
    return None


def restarting(run_: Run, r: pm.Runner) -> bool:
    return run_.said(": restarting ") and bool(own_bans(r))


def restarting_moved(run_: Run, r: pm.Runner) -> bool:
    """The restart of the node whose name this run moved, its ban placed."""
    node = updated_node(run_)
    return node is not None and run_.said(f"{node}: restarting ") and bool(own_bans(r))


def stopped(run_: Run, r: pm.Runner) -> bool:
    """The replica of the node whose name this run moved is down in its restart. Not with
    its ban: the ban on the node goes as soon as the replica stopped, and where every node
    has a replica no other ban is left to see (CI missed a 1.2 s downtime that way)."""
    node = updated_node(run_)
    return node is not None and run_.said(f"{node}: restarting ") and replica_down(r, node)


SOCKET_MOMENTS = [
    Moment("after the retag", lambda run_, r: updated_node(run_) is not None, (0.0, 0.05)),
    Moment("ban placed", restarting_moved, (0.0, 0.1)),
    Moment("replica stopped", stopped, (0.0, 0.3)),
    Moment("replica starting", restarting_moved, (0.6, 1.5)),
]


def test_the_target_nodes_podman_api_goes_away_after_its_retag(world) -> None:  # type: ignore[no-untyped-def]
    """Each moment: the same update again, the API of the first node whose name it moves
    killed (so each moment hits the next node, the one before finished by that run); then, the
    API back, one more run of the same command converges."""
    sb, cl, r = world
    rng = random.Random(SEED + 3)
    failures: list[str] = []
    target, want = target_for(sb, cl)
    on = cl.names[0]
    for i, moment in pick("podman API", SOCKET_MOMENTS):
        on = cl.names[(i + 2) % 3]
        if set(floating_ids(cl).values()) == {want}:  # every name moved: a new target
            target, want = target_for(sb, cl)
        before = Names.read(cl)
        args = ("update", SERVICE, "--image", target, "--all")
        run_ = spawn_run(cl, on, cl.conf, *args)
        node = None
        try:
            hit = wait_trigger(run_, r, moment, rng)
            node = updated_node(run_)
            if node is not None:
                kill_service(cl, node)
            out = finish(run_)
        finally:
            if node is not None:
                start_service(cl, node)
        problems = []
        if not hit or node is None:
            problems.append("the run ended before the moment")
        told = [e for e in last_run(cl, on) if e.get("node") in (None, node)]
        said = events(told)
        after = Names.read(cl)
        retag = [e for e in told if e.get("event") == "retag" and e.get("moved")]
        if node is not None and retag:
            # Exactly as the journal says: rolled back to its "before", else on its "after".
            says = retag[-1]["before" if "rolled-back" in said else "after"]
            if after.floating[node] != says:
                problems.append(f"{node} names {after.floating[node]}, the journal says {says}")
            if after.rollback[node] != retag[-1]["before"] and "rolled-back" not in said:
                problems.append(f"{node}: the rollback name is not {retag[-1]['before']}")
            for n in cl.names:
                if n != node and after.floating[n] != before.floating[n]:
                    problems.append(f"{n} was moved by the failed run")
        elif node is not None:
            problems.append(f"the journal has no retag of {node}: {said}")
        if out.returncode not in (6, 7) or "podman" not in out.stderr:
            problems.append(f"exit {out.returncode}: {out.stderr[-3000:]}")
        if out.returncode == 7 and "podman.socket" not in out.stderr.split("fix:")[-1]:
            problems.append("the fix does not name the podman API socket")
        if leftovers(r):
            problems.append(f"left in the CIB: {leftovers(r)}")
        label = f"podman API #{i + 1} {moment.name} on {node}"
        tell(failures, label, problems, f"exit {out.returncode}, journal {said[-3:]}", out.stderr)
    wrong, took = rerun(cl, r, on, cl.conf, ("update", SERVICE, "--image", target, "--all"), want)
    tell(failures, "API back: the re-run", wrong, f"{took:.1f}s", "")
    assert not failures, "\n".join(failures)


# --------------------------------------------------------------------------- item 5: the CIB


@pytest.fixture
def other_resource(world) -> Iterator[None]:  # type: ignore[no-untyped-def]
    _, cl, _ = world
    cl.run("controller-0", ["pcs", "resource", "create", OTHER, "ocf:pacemaker:Dummy"])
    wait_idle(cl)
    yield
    cl.run("controller-0", ["pcs", "resource", "delete", OTHER, "--force"], check=False)
    for node in cl.names:
        cl.run("controller-0", ["crm_attribute", "--node", node, "--name", "fw-mark", "--delete"])
    wait_idle(cl)


def edit_cib(cl: Cluster, r: pm.Runner, where: str, tag: str, *, stale: str | None) -> list[str]:
    """Another operator's edits on ``where``: a ``pcs resource update`` of another resource, a
    constraint, then 20 writes of a permanent attribute of another node 0.1 s apart (some
    land between a read and a write of pcmkimg's). What each left, to check afterwards.

    ``stale`` (a node restarting): the resource update the way of a slow pcs (or of an
    operator's ``pcs cluster cib`` copy): the CIB read now (with the restart's ban on that
    node), edited offline (``crm_resource`` on the copy), and pushed as ``pcs cluster
    cib-push --config`` pushes it
    (the configuration section replaced whole) once the restart removed that ban: the push
    writes the ban back."""
    if stale:
        copy = cl.state.dir / f"fw-cib-{tag}.xml"
        copy.write_text(cl.run(where, ["cibadmin", "--query"]).stdout)
        # The edit, fast (pcs -f takes seconds): the push must come while the restart runs.
        edit = ["crm_resource", "--resource", OTHER, "--set-parameter", "fake"]
        cl.run(where, [*edit, "--parameter-value", tag], env={"CIB_file": str(copy)})
        cid = f"cli-ban-{BUNDLE}-on-{stale}"
        wait_for(lambda: cid not in own_bans(r), "the restart to remove its ban", 120, 0.02)
        # What `pcs cluster cib-push --config` (and `pcs resource update`) run, without pcs's
        # second of start-up: the push lands while the restart's replica is still starting.
        push = ["cibadmin", "--replace", "--scope", "configuration", "--xml-file", str(copy)]
        cl.run(where, push)
        copy.unlink()
    else:
        cl.run(where, ["pcs", "resource", "update", OTHER, f"fake={tag}"])
    xml = f'<rsc_location id="fw-edit-{tag}" rsc="{OTHER}" node="controller-1" score="7"/>'
    cl.run(where, ["cibadmin", "--create", "-o", "constraints", "--xml-text", xml])
    for k in range(20):
        cl.run(
            where,
            [
                "crm_attribute",
                "--node",
                "controller-2",
                "--name",
                "fw-mark",
                "--update",
                f"{tag}-{k}",
            ],
        )
        time.sleep(0.1)
    return [f'name="fake" value="{tag}"', f'id="fw-edit-{tag}"', f'value="{tag}-19"']


CIB_MOMENTS = [
    Moment("lease taken", lambda run_, r: run_.said("lease taken"), (0.0, 0.2)),
    Moment("pulls", lambda run_, r: run_.said("pulling "), (0.0, 0.2)),
    Moment("mid-restart", restarting, (0.0, 0.3)),
    Moment("between nodes", lambda run_, r: run_.said(": healthy on "), (0.0, 0.1)),
    Moment("a stale push over a restart", restarting, (0.0, 0.1)),
]
STALE = len(CIB_MOMENTS) - 1


def test_another_operators_cib_edits_mid_update_survive_it(world, other_resource) -> None:  # type: ignore[no-untyped-def]
    sb, cl, r = world
    rng = random.Random(SEED + 5)
    failures: list[str] = []
    # The stale push first: it wrote our ban back after we had removed it (found live).
    for i, moment in pick("CIB edits", CIB_MOMENTS, first=STALE):
        on = cl.names[i % 3]
        where = cl.names[(i + 1) % 3]
        target, want = target_for(sb, cl)
        tag = f"{SEED}x{i}x{rng.randrange(10**6)}"
        args = ("update", SERVICE, "--image", target, "--all")
        run_ = spawn_run(cl, on, cl.conf, *args)
        hit = wait_trigger(run_, r, moment, rng)
        node = next((x.split(":")[0] for x in run_.lines if ": restarting " in x), None)
        wanted = edit_cib(cl, r, where, tag, stale=node if i == STALE else None)
        out = finish(run_)
        wait_idle(cl, on)
        problems = converged(cl, r, want, out, on)
        if not hit:
            problems.append("the run ended before the edits began")
        now = cl.run(on, ["cibadmin", "--query"]).stdout
        lost = [w for w in wanted if w not in now]
        if lost:
            problems.append(f"the other operator's edits were lost: {lost}")
        label = f"CIB edits #{i + 1} at {moment.name} (update on {on}, edits on {where})"
        back = sum("another CIB writer" in x for x in out.stderr.splitlines())
        if i == STALE and not back:
            problems.append("the stale push wrote no ban of ours back")
        detail = f"the other edits kept; a ban of ours written back by them removed {back}x"
        tell(failures, label, problems, detail, out.stderr)
    assert not failures, "\n".join(failures)


@pytest.fixture(scope="module", autouse=True)
def _reap() -> Iterator[None]:
    yield
    for child in DAEMONS:
        child.poll()
