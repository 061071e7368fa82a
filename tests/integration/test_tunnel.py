"""Our own ssh tunnel to a podman socket, against a real sshd on 127.0.0.1."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pcmkimg.adapters import podman
from pcmkimg.adapters.config import Config, SshSettings
from pcmkimg.adapters.errors import HostKeyRejected, TunnelFailed
from pcmkimg.adapters.tunnel import open_tunnel
from pcmkimg.core.errors import NodeUnreachable
from pcmkimg.core.images import Unresolved
from tests.sandbox.proc import free_port, tcp_open, terminate, wait_for
from tests.sandbox.require import need, need_root, need_tools

SSHD = "/usr/sbin/sshd"


@dataclass(frozen=True)
class Sshd:
    port: int
    dir: Path
    known_hosts: Path
    identity: Path

    def url(self, socket: Path) -> str:
        return f"ssh://root@127.0.0.1:{self.port}{socket}"

    def config(self, known_hosts: Path | None = None) -> Config:
        return Config(ssh=SshSettings(known_hosts or self.known_hosts, self.identity, 5))


def keygen(path: Path) -> str:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "pcmkimg-test", "-f", str(path)],
        check=True,
        capture_output=True,
    )
    return path.with_suffix(".pub").read_text().strip()


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    need_root()
    need_tools("ssh", "ssh-keygen")
    need(os.access(SSHD, os.X_OK), f"needs {SSHD} (openssh-server)")
    base = tmp_path_factory.mktemp("sshd")
    port = free_port()
    host_pub = keygen(base / "host_key")
    (base / "authorized_keys").write_text(keygen(base / "client_key") + "\n")
    known_hosts = base / "known_hosts"
    known_hosts.write_text(f"[127.0.0.1]:{port} {' '.join(host_pub.split()[:2])}\n")
    config = base / "sshd_config"
    config.write_text(
        f"Port {port}\n"
        "ListenAddress 127.0.0.1\n"
        f"HostKey {base / 'host_key'}\n"
        f"PidFile {base / 'sshd.pid'}\n"
        f"AuthorizedKeysFile {base / 'authorized_keys'}\n"
        "StrictModes no\n"
        "UsePAM no\n"
        "PasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\n"
        "PermitRootLogin prohibit-password\n"
        "AllowStreamLocalForwarding yes\n"
        "X11Forwarding no\n"
        "PrintMotd no\n"
    )
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation dir
    with open(base / "sshd.log", "wb") as log:
        proc = subprocess.Popen(
            [SSHD, "-D", "-e", "-f", str(config)], stdout=log, stderr=subprocess.STDOUT
        )
    try:
        wait_for(lambda: tcp_open(port), f"sshd on 127.0.0.1:{port}", timeout=15)
        yield Sshd(port, base, known_hosts, base / "client_key")
    finally:
        terminate([proc.pid], timeout=10)


def test_tunnel_reaches_a_podman_node_and_is_torn_down(sshd, podman_sandbox) -> None:
    node = podman_sandbox.podman_nodes[0]
    url = sshd.url(node.socket)
    store = podman.connect(node.name, url, config=sshd.config())
    tunnel = store._tunnel
    assert tunnel is not None and Path(tunnel.local_socket).exists()
    with store:
        assert store.url == url
        found = store.resolve("cluster.common.tag/tunnel:pcmklatest")
        assert isinstance(found, Unresolved) and found.node == node.name
        with podman.connect(node.name, node.url) as direct:
            assert store.images() == direct.images()
    assert tunnel.process.poll() is not None
    assert not Path(tunnel.local_socket).exists()


def test_changed_host_key_is_refused_quickly_and_clearly(sshd, podman_sandbox) -> None:
    node = podman_sandbox.podman_nodes[1]
    wrong = sshd.dir / "wrong_known_hosts"
    other_pub = keygen(sshd.dir / "other_host_key")
    wrong.write_text(f"[127.0.0.1]:{sshd.port} {' '.join(other_pub.split()[:2])}\n")
    started = time.monotonic()
    with pytest.raises(HostKeyRejected) as caught:
        podman.connect(node.name, sshd.url(node.socket), config=sshd.config(wrong))
    assert time.monotonic() - started < 15
    line = caught.value.one_line()
    assert node.name in line and f"127.0.0.1:{sshd.port}" in line
    assert "Host key verification failed" in line  # ssh's own words
    assert "known_hosts" in caught.value.fix


def test_unknown_host_is_refused(sshd, podman_sandbox) -> None:
    empty = sshd.dir / "empty_known_hosts"
    empty.write_text("")
    with pytest.raises(HostKeyRejected, match="Host key verification failed"):
        podman.connect("n", sshd.url(Path("/nowhere.sock")), config=sshd.config(empty))


def test_ssh_to_a_closed_port_fails_fast_with_ssh_stderr(sshd) -> None:
    port = free_port()
    started = time.monotonic()
    with pytest.raises(TunnelFailed) as caught:
        open_tunnel(
            f"ssh://root@127.0.0.1:{port}/run/podman/podman.sock",
            known_hosts=sshd.known_hosts,
            identity_file=sshd.identity,
            connect_timeout=5,
        )
    assert time.monotonic() - started < 15
    assert "Connection refused" in caught.value.stderr and not caught.value.host_key


def test_wrong_client_key_is_an_unreachable_node(sshd, podman_sandbox) -> None:
    node = podman_sandbox.podman_nodes[2]
    stranger = sshd.dir / "stranger_key"
    if not stranger.exists():
        keygen(stranger)
    config = Config(ssh=SshSettings(sshd.known_hosts, stranger, 5))
    with pytest.raises(NodeUnreachable) as caught:
        podman.connect(node.name, sshd.url(node.socket), config=config)
    assert not isinstance(caught.value, HostKeyRejected)
    assert "Permission denied" in caught.value.message
    assert "authorize" in caught.value.fix
