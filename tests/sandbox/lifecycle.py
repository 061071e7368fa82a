"""Bring a sandbox up and take it down, leaving nothing behind."""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import cluster as cluster_mod
from . import podman_nodes, registry
from .proc import alive, mounts_under, pids_in_netns, run, start_time, terminate
from .state import State, load, sandbox_dir


@dataclass
class Sandbox:
    state: State
    registry: registry.Registry | None = None
    images: dict[str, str] = field(default_factory=dict)
    podman_nodes: list[podman_nodes.PodmanNode] = field(default_factory=list)
    cluster: cluster_mod.Cluster | None = None


def create(name: str) -> Sandbox:
    if load(name) is not None:
        down(name)
    shutil.rmtree(sandbox_dir(name), ignore_errors=True)
    state = State(name)
    state.dir.mkdir(parents=True, mode=0o700)
    state.save()
    return Sandbox(state)


def with_registry(sb: Sandbox) -> Sandbox:
    port = registry.free_port()
    registry.podman_conf(sb.state, port)
    sb.registry = registry.start(sb.state, port)
    sb.images = registry.build_and_push(sb.state, sb.registry)
    return sb


def up(name: str, *, podman: int = 0, cluster: bool = True) -> Sandbox:
    sb = with_registry(create(name))
    try:
        if podman:
            sb.podman_nodes = podman_nodes.start(sb.state, podman)
        if cluster:
            assert sb.registry is not None
            sb.cluster = cluster_mod.start(sb.state, sb.registry.port)
    except BaseException:
        down(name)
        raise
    return sb


def ours(pid: int, start: str | None) -> bool:
    return alive(pid) and start is not None and start_time(pid) == start


def down(name: str) -> list[str]:
    """End every process, mount and namespace of the sandbox; remove its directory."""
    notes: list[str] = []
    state = load(name)
    root = sandbox_dir(name)
    if state is not None:
        live = [p for p in state.procs if ours(p.pid, p.start)]
        first = [p.pid for p in live if p.what.split()[0] == "pacemakerd"]
        terminate(first, timeout=90)
        second = [p.pid for p in live if p.what.split()[0] == "corosync"]
        terminate(second, timeout=30)
        rest = [p.pid for p in live if ours(p.pid, p.start) and p.what != "keeper"]
        terminate(rest, timeout=20)
        for ns in state.netns:
            path = Path("/run/netns") / ns
            stray = pids_in_netns(path)
            if stray:
                notes.append(f"ended {len(stray)} stray processes in {ns}")
                terminate(stray, timeout=15)
            if path.exists():
                run(["ip", "netns", "del", ns], check=False)
        # The keeper leaves by itself once its children are gone.
        keeper = [p.pid for p in live if p.what == "keeper" and ours(p.pid, p.start)]
        deadline = time.monotonic() + 10
        while keeper and time.monotonic() < deadline and any(alive(k) for k in keeper):
            time.sleep(0.1)
        terminate(keeper, timeout=5)
    for point in mounts_under(root):
        run(["umount", "-l", point], check=False)
    shutil.rmtree(root, ignore_errors=True)
    (root.parent / f"{name}-keeper.log").unlink(missing_ok=True)
    try:
        root.parent.rmdir()  # the base too, once no sandbox is left
    except OSError:
        pass
    return notes


def summary(sb: Sandbox) -> dict[str, object]:
    """What a test needs to know of a running sandbox, as plain JSON data."""
    return {
        "name": sb.state.name,
        "dir": str(sb.state.dir),
        "registry": sb.registry.host if sb.registry else None,
        "images": sb.images,
        "podman_nodes": [{"name": n.name, "dir": str(n.dir)} for n in sb.podman_nodes],
        "cluster": bool(sb.cluster),
    }


def _set_subreaper() -> None:
    import ctypes

    pr_set_child_subreaper = 36
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(pr_set_child_subreaper, 1, 0, 0, 0)


def up_detached(name: str, *, podman: int = 0, cluster: bool = True) -> dict[str, object]:
    """Bring the sandbox up from a keeper process that outlives the caller.

    The keeper is the parent (and child subreaper) of every daemon, so the
    daemons and the processes they orphan (conmon) are reaped when ``down``
    ends them, instead of lingering as zombies under a PID 1 that does not reap.
    """
    import json
    import os
    import signal

    r, w = os.pipe()
    pid = os.fork()
    if pid:
        os.close(w)
        with os.fdopen(r, "rb") as pipe:
            data = pipe.read()
        if not data:
            raise RuntimeError("the sandbox keeper died before reporting")
        result = json.loads(data)
        if "error" in result:
            raise RuntimeError(result["error"])
        return result
    # The keeper.
    code = 1
    try:
        os.close(r)
        os.setsid()
        _set_subreaper()
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        sandbox_dir(name).parent.mkdir(parents=True, exist_ok=True)
        log = os.open(
            str(sandbox_dir(name).parent / f"{name}-keeper.log"),
            os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
            0o600,
        )
        os.dup2(log, 1)
        os.dup2(log, 2)
        try:
            sb = up(name, podman=podman, cluster=cluster)
            sb.state.add_proc(os.getpid(), "keeper")
            os.write(w, json.dumps(summary(sb)).encode())
        except BaseException as exc:  # reported to the caller through the pipe
            os.write(w, json.dumps({"error": f"{type(exc).__name__}: {exc}"}).encode())
            raise
        finally:
            os.close(w)
        # Reap until every child, adopted ones included, is gone; ``down`` ends them.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        while True:
            try:
                os.wait()
            except ChildProcessError:
                break
        code = 0
    finally:
        os._exit(code)
