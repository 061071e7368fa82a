"""Our own ssh tunnel to a remote podman API socket.

podman-py's ``ssh://`` transport runs ssh with host-key checking off and waits up to five
minutes for its socket, so pcmkimg runs ssh itself::

    ssh -N -L LOCAL.sock:REMOTE.sock -o BatchMode=yes -o StrictHostKeyChecking=yes ...

The local end is a socket in a private temporary directory; podman-py then talks to it as to a
local ``unix://`` socket. Host keys are always checked. When ssh fails, :func:`open_tunnel`
raises :class:`TunnelFailed` within its timeout, quoting ssh's own words.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from pcmkimg.adapters.errors import TunnelFailed
from pcmkimg.adapters.sshurl import SshTarget, parse_url
from pcmkimg.core import commands as cmd

if TYPE_CHECKING:
    from pcmkimg.adapters.config import SshSettings

OPEN_TIMEOUT = 15.0
"""The longest :func:`open_tunnel` waits for the tunnel, in seconds."""

_HOST_KEY_WORDS = (
    "host key verification failed",
    "remote host identification has changed",
    "host key for",
    "no matching host key",
)


def ssh_argv(
    target: SshTarget,
    local_socket: str,
    *,
    known_hosts: str | os.PathLike[str] | None = None,
    identity_file: str | os.PathLike[str] | None = None,
    connect_timeout: int = 10,
) -> list[str]:
    """The ssh command line that forwards ``local_socket`` to the target's socket."""
    argv = [
        "ssh",
        "-N",
        "-L",
        f"{local_socket}:{target.socket_path}",
        "-o",
        "BatchMode=yes",
        "-o",
        "StrictHostKeyChecking=yes",
        "-o",
        f"ConnectTimeout={int(connect_timeout)}",
        "-o",
        "ExitOnForwardFailure=yes",
        "-o",
        "ServerAliveInterval=15",
        "-o",
        "ServerAliveCountMax=3",
        "-o",
        "ControlMaster=no",
        "-o",
        "ControlPath=none",
        "-o",
        "UpdateHostKeys=no",
        "-o",
        "LogLevel=ERROR",
    ]
    if known_hosts is not None:
        argv += ["-o", f"UserKnownHostsFile={known_hosts}", "-o", "GlobalKnownHostsFile=none"]
    if identity_file is not None:
        argv += ["-o", f"IdentityFile={identity_file}", "-o", "IdentitiesOnly=yes"]
    if target.port is not None:
        argv += ["-p", str(target.port)]
    return [*argv, "--", target.destination]


def _connectable(path: str) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(1)
        return sock.connect_ex(path) == 0


class Tunnel:
    """A running ``ssh -N -L`` forward; close it (or leave its ``with`` block) to stop ssh."""

    def __init__(self, url: str, process: subprocess.Popen[bytes], workdir: str) -> None:
        self.url = url
        self.process = process
        self._workdir = workdir
        self.local_socket = os.path.join(workdir, "podman.sock")

    @property
    def local_url(self) -> str:
        return f"unix://{self.local_socket}"

    def stderr(self) -> str:
        try:
            return Path(self._workdir, "ssh.err").read_text(errors="replace").strip()
        except OSError:
            return ""

    def close(self) -> None:
        """Stop ssh (by its PID) and remove the local socket. Safe to call twice."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self._workdir, ignore_errors=True)

    def __enter__(self) -> Tunnel:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _failure(url: str, stderr: str, what: str) -> TunnelFailed:
    said = " ".join(stderr.split())[-600:] or "(nothing)"
    host_key = any(words in stderr.lower() for words in _HOST_KEY_WORDS)
    if host_key:
        try:
            target = parse_url(url)
            scan = cmd.shown(cmd.ssh_keyscan(target.host.strip("[]"), target.port))
        except TunnelFailed:
            scan = "ssh-keyscan"
        fix = (
            "check that the host is the one you mean, then put its current key in the "
            "known_hosts file ([ssh] known_hosts in pcmkimg.conf, else ~/.ssh/known_hosts), "
            f"e.g. from {scan} checked against the host's own /etc/ssh/*.pub"
        )
    elif "permission denied" in stderr.lower():
        fix = "authorize the key of [ssh] identity_file for that user on the host"
    else:
        fix = "check that the host runs sshd and the podman socket exists on it"
    return TunnelFailed(
        f"ssh tunnel to {url} {what}; ssh said: {said}", fix, stderr=stderr, host_key=host_key
    )


def open_tunnel(
    url: str,
    *,
    known_hosts: str | os.PathLike[str] | None = None,
    identity_file: str | os.PathLike[str] | None = None,
    connect_timeout: int = 10,
    timeout: float = OPEN_TIMEOUT,
) -> Tunnel:
    """Start ssh and wait until the forwarded socket answers; raise TunnelFailed otherwise."""
    target = parse_url(url)
    workdir = tempfile.mkdtemp(prefix="pcmkimg-ssh-")
    local = os.path.join(workdir, "podman.sock")
    argv = ssh_argv(
        target,
        local,
        known_hosts=known_hosts,
        identity_file=identity_file,
        connect_timeout=min(int(connect_timeout), max(1, int(timeout))),
    )
    try:
        with open(os.path.join(workdir, "ssh.err"), "wb") as err:
            process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                env={**os.environ, "LC_ALL": "C"},  # its messages are classified below
            )
    except OSError as exc:
        shutil.rmtree(workdir, ignore_errors=True)
        raise TunnelFailed(
            f"cannot run ssh for {url}: {exc}", fix="install the openssh client"
        ) from exc
    tunnel = Tunnel(url, process, workdir)
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            stderr = tunnel.stderr()
            tunnel.close()
            raise _failure(url, stderr, f"failed (ssh exited {process.returncode})")
        if os.path.exists(local) and _connectable(local):
            return tunnel
        if time.monotonic() > deadline:
            stderr = tunnel.stderr()
            tunnel.close()
            raise _failure(url, stderr, f"did not open within {timeout:.0f} s")
        time.sleep(0.05)


def open_for_node(node: str, url: str, ssh: SshSettings, timeout: float = OPEN_TIMEOUT) -> Tunnel:
    """The tunnel to ``node``'s podman socket at the ``ssh://`` ``url``, with the [ssh]
    settings; a refusal is the store's error of that node (HostKeyRejected for a host key)."""
    from pcmkimg.adapters.errors import HostKeyRejected
    from pcmkimg.core.errors import NodeUnreachable

    try:
        return open_tunnel(
            url,
            known_hosts=ssh.known_hosts,
            identity_file=ssh.identity_file,
            connect_timeout=ssh.connect_timeout,
            timeout=timeout,
        )
    except TunnelFailed as err:
        kind = HostKeyRejected if err.host_key else NodeUnreachable
        raise kind(err.message, err.fix or NodeUnreachable.fix_for(url), node=node) from err
