"""An ``ssh://[USER@]HOST[:PORT]/PATH`` podman URL, parsed: the same check when the
configuration is read (:mod:`pcmkimg.adapters.config`) as when the tunnel opens
(:mod:`pcmkimg.adapters.tunnel`)."""

from __future__ import annotations

import re

from pcmkimg.adapters.errors import TunnelFailed
from pcmkimg.records import dataclass

_URL = re.compile(
    r"ssh://(?:(?P<user>[^@/\s]+)@)?(?P<host>[^:/\s\[\]]+|\[[0-9a-fA-F:]+\])"
    r"(?::(?P<port>[0-9]{1,5}))?(?P<path>/\S+)"
)


@dataclass(frozen=True)
class SshTarget:
    """Where an ``ssh://[USER@]HOST[:PORT]/PATH`` URL points."""

    host: str
    socket_path: str
    user: str | None = None
    port: int | None = None

    @property
    def destination(self) -> str:
        host = self.host.strip("[]")
        return f"{self.user}@{host}" if self.user else host


def parse_url(url: str) -> SshTarget:
    """Split an ``ssh://`` podman URL; raise TunnelFailed for anything else."""
    found = _URL.fullmatch(url)
    port = int(found["port"]) if found and found["port"] else None
    if not found or (port is not None and not 0 < port < 65536) or found["host"].startswith("-"):
        raise TunnelFailed(
            f"{url!r} is not an ssh podman URL",
            fix="write ssh://USER@HOST[:PORT]/run/podman/podman.sock",
        )
    return SshTarget(found["host"], found["path"], found["user"], port)
