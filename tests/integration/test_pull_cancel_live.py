"""Ctrl-C or SIGTERM during the parallel pulls (issue 12 item 7), live: three real podman
stores pull from a registry on loopback that accepts connections and never answers. The
update's pull step must end within 1 s of the signal instead of waiting for the pulls."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sandbox.fixtures import Sandbox

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(180)


class StallingRegistry:
    """A TCP server on 127.0.0.1 that accepts every connection, reads, and never answers."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.accepted: list[socket.socket] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted.append(conn)  # kept open, never answered

    def close(self) -> None:
        self.sock.close()
        for conn in self.accepted:
            conn.close()


@pytest.fixture
def stalling() -> Iterator[StallingRegistry]:
    registry = StallingRegistry()
    yield registry
    registry.close()


# The update's pull step (Session.pull_all over the real stores), under the CLI's signal
# handling; prints "pulling" once it started, then how it ended.
CHILD = """
import sys, tempfile
from pathlib import Path
from pcmkimg.adapters import config, journal, signals
from pcmkimg.adapters import pacemaker as pm
from pcmkimg.adapters import podman
from pcmkimg.core.reference import parse
from pcmkimg.workflows.session import Session

conf = config.parse(Path(sys.argv[1]).read_text())
ref = parse(sys.argv[2])
nodes = list(conf.nodes)
try:
    with signals.sigterm_raises():
        with podman.open_stores(conf, None) as stores:
            jrnl = journal.open_journal(Path(tempfile.mkdtemp()))
            session = Session(pm.Pacemaker(), stores, jrnl, lambda t: print(t, flush=True))
            session.pull_all(nodes, ref, None)
except (KeyboardInterrupt, signals.Terminated) as exc:
    print(f"stopped: {type(exc).__name__}", flush=True)
    sys.exit(1)
print("finished", flush=True)
"""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["Ctrl-C", "SIGTERM"])
def test_a_signal_during_stalled_pulls_ends_the_update_within_a_second(
    podman_sandbox: Sandbox, stalling: StallingRegistry, tmp_path: Path, signum: int
) -> None:
    registry = f"127.0.0.1:{stalling.port}"
    conf = tmp_path / "pcmkimg.conf"
    lines = ["[nodes]", *(f"{n.name} = {n.url}" for n in podman_sandbox.podman_nodes)]
    lines += ["[registries]", f"{registry} = tls_verify=false"]
    conf.write_text("\n".join(lines) + "\n")
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(conf), f"{registry}/ns1/svc:1.0"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().startswith("pulling "), child.stderr
        deadline = time.monotonic() + 30
        while len(stalling.accepted) < len(podman_sandbox.podman_nodes):
            assert time.monotonic() < deadline, "the stores never reached the registry"
            assert child.poll() is None
            time.sleep(0.05)
        time.sleep(1.0)  # every pull is now waiting for the registry
        assert child.poll() is None
        sent = time.monotonic()
        child.send_signal(signum)
        out, err = child.communicate(timeout=60)
        took = time.monotonic() - sent
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    assert "stopped: " in out, out + err
    assert child.returncode == 1
    assert took < 1.0, f"{took:.2f}s from the signal to the exit"
