"""Process helpers for the sandbox: argument lists only, PIDs only."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path


class SandboxError(RuntimeError):
    """The sandbox could not be brought up or torn down."""


def run(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    timeout: float = 120,
    check: bool = True,
    input: bytes | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run a command, capture its output, raise SandboxError on failure."""
    full_env = dict(os.environ if env is None else env)
    full_env.setdefault("LC_ALL", "C")
    proc = subprocess.run(
        list(argv),
        env=full_env,
        capture_output=True,
        timeout=timeout,
        input=input,
        check=False,
    )
    out = proc.stdout.decode(errors="replace")
    err = proc.stderr.decode(errors="replace")
    result = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    if check and proc.returncode != 0:
        raise SandboxError(f"{' '.join(argv)} exited {proc.returncode}: {err.strip()[-2000:]}")
    return result


def spawn(
    argv: Sequence[str], *, log: Path, env: Mapping[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start a long-running daemon in its own session, its output in ``log``."""
    with open(log, "ab") as out:
        return subprocess.Popen(
            list(argv),
            env=dict(os.environ if env is None else env),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(predicate, what: str, timeout: float = 30, interval: float = 0.05) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while True:
        try:
            if predicate():
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise SandboxError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def tcp_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def unix_open(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex(str(path)) == 0


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child of ours counts as gone.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def start_time(pid: int) -> str | None:
    """The kernel's start time of ``pid``: tells a reused PID from ours."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def terminate(pids: Sequence[int], timeout: float = 30) -> list[int]:
    """SIGTERM the PIDs, wait up to ``timeout``, then SIGKILL the rest."""
    pids = [p for p in pids if alive(p)]
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout
    while pids and time.monotonic() < deadline:
        for pid in pids:
            reap(pid)
        pids = [p for p in pids if alive(p)]
        if pids:
            time.sleep(0.1)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for pid in pids:
        reap(pid)
    return pids


def ns_inode(pid: int, kind: str) -> int | None:
    try:
        return os.stat(f"/proc/{pid}/ns/{kind}").st_ino
    except OSError:
        return None


def pids_in_netns(netns_path: Path) -> list[int]:
    """Every process whose network namespace is the one bound at ``netns_path``."""
    try:
        target = os.stat(netns_path).st_ino
    except OSError:
        return []
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            if ns_inode(int(entry), "net") == target:
                found.append(int(entry))
    return found


def mounts_under(root: Path) -> list[str]:
    """Mount points at or below ``root`` in our mount namespace, deepest first."""
    prefix = str(root.resolve())
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if point == prefix or point.startswith(prefix + "/"):
            points.append(point)
    return sorted(points, key=len, reverse=True)
