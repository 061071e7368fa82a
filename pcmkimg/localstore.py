"""The local node's image store, read-only, with the standard library only: the agent's path.

The OCF agent's monitor runs every 30 seconds on every cluster node, next to the bundle's own
podman monitor, and must cost a fraction of it. This module resolves a name in the local store
through the podman API socket (a plain HTTP/1.0 request) or, when the socket does not answer,
the ``podman`` command, and imports nothing of pcmkimg but its error base: no podman-py, no
configuration, no reference parser. :mod:`pcmkimg.images` re-exports everything here; use it
from there everywhere else.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

from pcmkimg.errors import PcmkimgError

# typing is not imported at run time: it would cost every monitor a few milliseconds.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Union

LOCAL_URL = "unix:///run/podman/podman.sock"
"""The podman API socket of the local node (the same as :data:`pcmkimg.config.LOCAL_URL`)."""

_URL_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-~/:@")
"""What ``urllib.parse.quote(name, safe="/:@")`` leaves as it is."""


# ---------------------------------------------------------------------------------------------
# Errors: the ones raised here. The other kinds are in pcmkimg.images.


class ImageError(PcmkimgError):
    """A podman image operation on a node failed. ``node`` and ``ref`` say where and what."""

    def __init__(self, message: str, fix: str = "", *, node: str, ref: object = None) -> None:
        self.node = node
        self.ref = None if ref is None else str(ref)
        about = f" ({self.ref})" if self.ref is not None else ""
        super().__init__(f"node {node}{about}: {message}", fix)


class NodeUnreachable(ImageError):
    """The node's podman API service cannot be reached."""


class StoreError(ImageError):
    """The podman service refused a store operation (tag, untag, remove)."""


class PodmanCommandFailed(ImageError):
    """The ``podman`` command (the local fallback) failed."""


# ---------------------------------------------------------------------------------------------
# Results.


@dataclass(frozen=True)
class ImageInfo:
    """One image of a store, as podman inspects it."""

    id: str
    """64 hex digits, no ``sha256:``."""
    digest: str | None
    repo_digests: tuple[str, ...]
    names: tuple[str, ...]
    """Every name (RepoTags) the image holds now."""
    names_history: tuple[str, ...] = ()
    """Every name the image has held, newest first (podman's NamesHistory)."""
    created: datetime | None = None


@dataclass(frozen=True)
class Resolved:
    """A name found in a node's store, and the image it names."""

    node: str
    name: str
    image: ImageInfo

    @property
    def id(self) -> str:
        return self.image.id

    @property
    def image_id(self) -> str:
        """The same as :attr:`id`."""
        return self.image.id

    @property
    def names(self) -> tuple[str, ...]:
        """Every name of the image, the resolved one included."""
        return self.image.names

    @property
    def digest(self) -> str | None:
        return self.image.digest

    @property
    def repo_digests(self) -> tuple[str, ...]:
        return self.image.repo_digests

    @property
    def created(self) -> datetime | None:
        return self.image.created

    @property
    def other_names(self) -> tuple[str, ...]:
        """The image's names other than the one resolved: its real names."""
        return tuple(n for n in self.image.names if n != self.name)


@dataclass(frozen=True)
class Unresolved:
    """A name that is not in a node's store (the normal "not here" answer)."""

    node: str
    name: str
    reason: str = "no image has this name"


if TYPE_CHECKING:
    Resolution = Union[Resolved, Unresolved]


# ---------------------------------------------------------------------------------------------
# Reading podman's answers.


_CREATED = re.compile(
    r"(?P<date>\d{4}-\d\d-\d\d)[T ](?P<time>\d\d:\d\d:\d\d)(?:\.(?P<frac>\d+))?"
    r"\s*(?P<tz>Z|[+-]\d\d:?\d\d)?(?:\s+[A-Z]+)?"
)


def parse_created(value: object) -> datetime | None:
    """An image's creation time from podman (RFC 3339 with nanoseconds, or Unix seconds)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return datetime.fromtimestamp(value, timezone.utc)
    if not isinstance(value, str):
        return None
    found = _CREATED.fullmatch(value.strip())
    if not found:
        return None
    frac = (found["frac"] or "0")[:6].ljust(6, "0")
    tz = found["tz"] or "Z"
    tz = "+00:00" if tz == "Z" else tz if ":" in tz else f"{tz[:3]}:{tz[3:]}"
    return datetime.fromisoformat(f"{found['date']}T{found['time']}.{frac}{tz}")


def image_info(attrs: Mapping[str, Any]) -> ImageInfo:
    """An ImageInfo from podman's image inspect data (API or ``podman image inspect``)."""
    image_id = str(attrs.get("Id") or attrs.get("ID") or "")
    if image_id.startswith("sha256:"):
        image_id = image_id[len("sha256:") :]
    return ImageInfo(
        id=image_id,
        digest=attrs.get("Digest") or None,
        repo_digests=tuple(attrs.get("RepoDigests") or ()),
        names=tuple(attrs.get("RepoTags") or ()),
        names_history=tuple(attrs.get("NamesHistory") or ()),
        created=parse_created(attrs.get("Created")),
    )


def _unreachable_fix(url: str) -> str:
    if url.startswith("ssh://"):
        return "check ssh access to the node and that podman.socket runs there"
    path = url[len("unix://") :] if url.startswith("unix://") else url
    return f"start the podman API service on the node (systemctl start podman.socket; {path})"


# ---------------------------------------------------------------------------------------------
# Resolving a name: the API socket, else the podman command.


def _quote(name: str) -> str:
    """``name`` as a URL path segment, percent-encoded as ``quote(name, safe="/:@")`` does it."""
    return "".join(chr(b) if b in _URL_SAFE else f"%{b:02X}" for b in name.encode())


def resolve_with_cli(
    floating: str,
    *,
    node: str = "local",
    podman_command: Sequence[str] = ("podman",),
    timeout: float = 30.0,
) -> Resolution:
    """Resolve ``floating`` with ``podman image inspect`` (no API service needed)."""
    import subprocess

    argv = [*podman_command, "image", "inspect", "--format", "json", "--", floating]
    try:
        proc = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env={**os.environ, "LC_ALL": "C"},  # "image not known" is matched below
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        raise PodmanCommandFailed(
            f"cannot run {argv[0]}: {err}",
            "install podman, or check that its storage is not locked",
            node=node,
            ref=floating,
        ) from err
    if proc.returncode != 0:
        said = " ".join(proc.stderr.split())
        if "image not known" in said or "no such image" in said.lower():
            return Unresolved(node, floating)
        raise PodmanCommandFailed(
            f"'podman image inspect' exited {proc.returncode}: {said[-500:]}",
            "run the same podman command on the node to see the cause",
            node=node,
            ref=floating,
        )
    try:
        data = json.loads(proc.stdout)
        return Resolved(node, floating, image_info(data[0]))
    except (ValueError, LookupError, TypeError, AttributeError) as err:
        raise PodmanCommandFailed(
            f"cannot read the output of 'podman image inspect': {err}",
            "check the podman version on the node",
            node=node,
            ref=floating,
        ) from err


def inspect_over_socket(
    path: str, name: str, *, node: str = "local", timeout: float = 10.0
) -> ImageInfo | None:
    """``GET /libpod/images/NAME/json`` on a local API socket, with the standard library only.

    The agent's monitor runs every few seconds on every node: this keeps it free of podman-py's
    import cost. None when no image has the name; NodeUnreachable when the socket does not
    answer; StoreError on any other answer.
    """
    import socket

    request = (
        f"GET /v4.0.0/libpod/images/{_quote(name)}/json HTTP/1.0\r\n"
        "Host: podman\r\nAccept: application/json\r\n\r\n"
    ).encode()
    chunks = []
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            sock.connect(path)
            sock.sendall(request)
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
    except OSError as err:
        raise NodeUnreachable(
            f"the podman API socket {path} does not answer: {err}",
            _unreachable_fix(f"unix://{path}"),
            node=node,
            ref=name,
        ) from err
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    status_line = head.split(b"\r\n", 1)[0].decode(errors="replace")
    parts = status_line.split()
    code = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
    if code == 404:
        return None
    try:
        data = json.loads(body) if code == 200 else None
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise StoreError(
            f"unexpected answer from {path}: {status_line or 'nothing'}",
            "check the podman service on the node (podman system service)",
            node=node,
            ref=name,
        )
    return image_info(data)


def resolve_local(
    floating: str,
    url: str = LOCAL_URL,
    *,
    node: str = "local",
    podman_command: Sequence[str] = ("podman",),
    timeout: float = 10.0,
) -> Resolution:
    """Resolve on the local node: through the API socket at ``url``, else the podman command
    (the bundle's own agent uses the command, so a stopped API service must not fail us)."""
    if url.startswith("unix://"):
        try:
            found = inspect_over_socket(url[len("unix://") :], floating, node=node, timeout=timeout)
            return Resolved(node, floating, found) if found else Unresolved(node, floating)
        except NodeUnreachable:
            pass
    return resolve_with_cli(floating, node=node, podman_command=podman_command, timeout=timeout)


__all__ = [
    "LOCAL_URL",
    "ImageError",
    "ImageInfo",
    "NodeUnreachable",
    "PodmanCommandFailed",
    "Resolved",
    "StoreError",
    "Unresolved",
    "image_info",
    "inspect_over_socket",
    "parse_created",
    "resolve_local",
    "resolve_with_cli",
]
