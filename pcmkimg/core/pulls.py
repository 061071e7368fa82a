"""Pull failures told apart: which error kind a failed pull is, its fix, and the retry rule. Pure.

podman reports a failed pull as text, in the pull stream's ``error`` record (podman 4; podman 5
in the libpod stream), or as the HTTP status and message of a refusal before any stream (podman
5 in its Docker-compatible mode: 404 "manifest unknown", 500 "connection refused", ...). The words
here, and the status when the words say nothing, classify it, so that only a transient failure
(registry down, timeout, 5xx) is retried.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType

from pcmkimg.core import commands as cmd
from pcmkimg.core.errors import (
    AuthError,
    ImageError,
    ImageNotFound,
    InvalidName,
    PullFailed,
    RegistryUnreachable,
    StoreFull,
    TLSError,
)

# ---------------------------------------------------------------------------------------------
# Pure helpers (unit-tested with plain data).

_TRANSIENT_WORDS = (
    "connection refused",
    "connection reset",
    "no route to host",
    "network is unreachable",
    "i/o timeout",
    "handshake timeout",
    "deadline exceeded",
    "timed out",
    "timeout",
    "no such host",
    "temporary failure in name resolution",
    "unexpected eof",
    ": eof",
    "too many requests",
    "toomanyrequests",
)
_TLS_WORDS = (
    "x509:",
    "certificate",
    "tls:",
    "server gave http response to https client",
    "first record does not look like a tls handshake",
)
_AUTH_WORDS = (
    "unauthorized",
    "authentication required",
    "access to the resource is denied",
    "denied:",
    "invalid username/password",
)
_NOT_FOUND_WORDS = ("manifest unknown", "name unknown", "not found", "no such image")
# HTTP statuses in the text, as whole numbers: never a part of a port (127.0.0.1:38401).
_AUTH_STATUS = re.compile(r"(?<![\d:])40[13]\b")
_NOT_FOUND_STATUS = re.compile(r"(?<![\d:])404\b")
_NAME_WORDS = (
    "repository name must",
    "invalid reference format",
    "invalid reference",
    "invalid tag",
    "parsing reference",
)
_SERVER_ERROR = re.compile(r"(?<![\d:])5[0-9][0-9]\b")
_TLS_FIX = (
    "give the registry a certificate the node trusts (/etc/containers/certs.d/HOST:PORT/ca.crt), "
    "or, for a plain-HTTP registry, write 'HOST:PORT = tls_verify=false' in the [registries] "
    "section of pcmkimg.conf"
)
_IMAGE_STORE = "its image store (/var/lib/containers: pcmkimg prune removes a service's old images)"
_STAGING = "its pull staging directory (/var/tmp, or the podman service's TMPDIR)"
# Where podman ran out of space, by its words: a blob written to the staging directory before it
# is stored, or the layer unpacked into the image store (and the store's own indexes).
_STAGING_WORDS = ("storing blob to file",)
_IMAGE_STORE_WORDS = ("adding layer", "processing tar file", "applying layer", "/storage/")
PULL_FIXES: Mapping[type[ImageError], str] = MappingProxyType(
    {
        RegistryUnreachable: "check that the registry runs and that the node can reach it, "
        "then run the command again",
        TLSError: _TLS_FIX,
        AuthError: f"log in on the node ({cmd.shown(cmd.podman_login())}) or check the "
        "credentials; a repository that does not exist may also be reported as denied",
        ImageNotFound: "check the repository and tag in the registry "
        f"({cmd.shown(cmd.skopeo_list_tags())})",
        InvalidName: "give a valid reference such as registry.example.com:8787/ns/image:tag",
        StoreFull: f"free disk space on the node, in {_IMAGE_STORE} or {_STAGING}, "
        "then run the command again",
        PullFailed: f"read the podman message above; run {cmd.quoted(cmd.podman_pull())} on the "
        "node to see more",
    }
)


def classify_pull_error(text: str, status: int | None = None) -> type[ImageError]:
    """The error type for a pull failure message of podman.

    ``status`` is the HTTP status of podman's answer when it refused the pull before streaming
    (None for an ``error`` record in the stream). The message decides; the status only when the
    message says nothing known: 404 not found, 401/403 refused credentials. A 500 alone says
    nothing (podman answers 500 for most failures). Only :class:`RegistryUnreachable` is
    transient (worth a retry).
    """
    kind = _classify_text(text)
    if kind is PullFailed and status is not None:
        return _STATUS_KINDS.get(status, kind)
    return kind


def pull_fix(kind: type[ImageError], text: str) -> str:
    """The fix of a pull failure of ``kind`` with podman's message ``text``: for a full disk,
    the one that is full (the image store or the staging directory) when podman's words say
    which."""
    if kind is StoreFull:
        low = text.lower()
        if any(w in low for w in _STAGING_WORDS):
            return f"free disk space on the node, in {_STAGING}, then run the command again"
        if any(w in low for w in _IMAGE_STORE_WORDS):
            return f"free disk space on the node, in {_IMAGE_STORE}, then run the command again"
    return PULL_FIXES[kind]


def _classify_text(text: str) -> type[ImageError]:
    low = text.lower()
    if "no space left on device" in low:
        return StoreFull
    if any(w in low for w in _NAME_WORDS):
        return InvalidName
    if "handshake timeout" not in low and any(w in low for w in _TLS_WORDS):
        return TLSError
    if any(w in low for w in _TRANSIENT_WORDS) or _SERVER_ERROR.search(low):
        if "status: 401" not in low and "status: 403" not in low:
            return RegistryUnreachable
    if any(w in low for w in _AUTH_WORDS) or _AUTH_STATUS.search(low):
        return AuthError
    if any(w in low for w in _NOT_FOUND_WORDS) or _NOT_FOUND_STATUS.search(low):
        return ImageNotFound
    return PullFailed


_STATUS_KINDS: Mapping[int, type[ImageError]] = MappingProxyType(
    {404: ImageNotFound, 401: AuthError, 403: AuthError}
)


def backoff_delays(retries: int, base: float = 1.0, cap: float = 30.0) -> list[float]:
    """The waits before each retry: ``base``, twice that, ... never more than ``cap``."""
    return [min(cap, base * 2**i) for i in range(max(0, retries))]
