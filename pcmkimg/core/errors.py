"""The error kinds of the pure core: one type per kind that a caller tells apart.

Each kind is in one exit family of :mod:`pcmkimg.errors` (the CLI maps the family to an exit
code, the agent to an OCF code) and carries its fix. Here: the input's (a reference, the
naming scheme, a release file), the CIB's, the plan's and a restart's refusals, a node image
store's failures, every one an :class:`ImageError` whose message names the node and the
reference (raised by the store adapters, the store port's rules in :mod:`pcmkimg.core.store`
and the restore plan in :mod:`pcmkimg.core.tagplan`), and a pull's own kinds (told apart by
:mod:`pcmkimg.core.pulls`). The lease's kinds stay with the lease (:mod:`pcmkimg.core.lease`):
their messages are made of its value. Standard library only, and nothing imported at run time
but :mod:`pcmkimg.errors`: the agent imports it.
"""

from __future__ import annotations

from pcmkimg.errors import BadInput, Refused, Unreachable, UsageError

# ---------------------------------------------------------------------------------------------
# A node's image store.


class ImageError(Unreachable):
    """A podman image operation on a node failed. ``node`` and ``ref`` say where and what."""

    def __init__(self, message: str, fix: str = "", *, node: str, ref: object = None) -> None:
        self.node = node
        self.ref = None if ref is None else str(ref)
        self.detail = message
        """The message without the node and the reference."""
        about = f" ({self.ref})" if self.ref is not None else ""
        super().__init__(f"node {node}{about}: {message}", fix)


class NodeUnreachable(ImageError):
    """The node's podman API service cannot be reached."""

    @staticmethod
    def fix_for(url: str) -> str:
        """The fix for a podman API service at ``url`` (``unix://`` or ``ssh://``) that does
        not answer."""
        if url.startswith("ssh://"):
            return "check ssh access to the node and that podman.socket runs there"
        path = url[len("unix://") :] if url.startswith("unix://") else url
        return f"start the podman API service on the node (systemctl start podman.socket; {path})"


class SocketDown(NodeUnreachable):
    """The local podman API socket (``unix://``) does not answer: pcmkimg can't reach that
    store, and the guard there falls back to the slower podman command."""


class NodesUnreachable(Unreachable):
    """One or more nodes' image stores can't be reached."""


class StoreError(ImageError):
    """The podman service refused a store operation (tag, untag, remove)."""


class PodmanCommandFailed(ImageError):
    """The ``podman`` command (the local fallback) failed."""


class InvalidName(ImageError):
    """A name given to the store is not a valid reference, or not one usable here."""


class ImageAbsent(ImageError):
    """A name that must be in the node's store is not there."""


class UnexpectedAnswer(ValueError):
    """An answer of podman's ``GET /images/NAME/json`` that is neither 404 nor a 200 JSON
    object."""


# ---------------------------------------------------------------------------------------------
# A pull's failures (:func:`pcmkimg.core.pulls.classify_pull_error` tells them apart).


class RegistryUnreachable(ImageError):
    """The registry did not answer, or answered with a server error (5xx). Transient."""


class TLSError(ImageError):
    """The TLS connection to the registry failed (certificate, or a plain-HTTP registry)."""


class AuthError(ImageError):
    """The registry refused the credentials, or asked for some."""


class ImageNotFound(ImageError):
    """The registry has no such repository or tag (or digest)."""


class DigestMismatch(ImageError, BadInput):
    """The image has another digest than the one expected."""


class StoreFull(ImageError):
    """The node ran out of disk space for the pull: its image store (``/var/lib/containers``)
    or the directory podman stages a pull's blobs in (``/var/tmp``, or ``TMPDIR``) is full."""


class PullFailed(ImageError):
    """A pull failed for a reason not classified above."""


# ---------------------------------------------------------------------------------------------
# What the user gave: a reference, the naming scheme, a release.


class InvalidReference(BadInput):
    """A string is not a valid image reference, or a part of one is not valid.

    ``text`` is the offending input, ``reason`` says what is wrong and ``position`` (when known)
    is the index in ``text`` of the first character at fault.
    """

    def __init__(
        self,
        text: object,
        reason: str,
        *,
        position: int | None = None,
        fix: str = "",
        what: str = "reference",
    ) -> None:
        self.text = text
        self.reason = reason
        self.position = position
        super().__init__(f"invalid {what} {_quote(text)}: {reason}", fix)


class InvalidScheme(BadInput):
    """The floating-name scheme (prefix or tags) is not usable."""


class NotFloatingName(BadInput):
    """A reference is neither a common-tag nor a legacy floating name."""


class ReleaseFileError(UsageError):
    """The release (file or SERVICE=REF arguments) is malformed."""


# ---------------------------------------------------------------------------------------------
# The CIB and crm_mon's XML, the plan, a restart.


class CibParseError(Unreachable):
    """The XML is malformed, or carries a DOCTYPE/entities (refused: never resolved)."""


class CibStructureError(Unreachable):
    """Well-formed XML that is not a CIB (or not crm_mon XML) as Pacemaker writes it."""


class BundleNotFoundError(BadInput):
    """No bundle with the given id in the CIB."""


class GuardConflictError(BadInput):
    """An id the guard needs is taken by something that is not the guard."""


class PreflightFailed(Refused):
    """The cluster is not in a state where an update (or another change) may start."""


class UnknownService(UsageError):
    """No bundle matches the service name."""


class UnknownNode(UsageError):
    """A node named on the command line is not a cluster node that can run the bundle."""


class NodeNotReady(Refused):
    """A target node is offline, in standby or in maintenance."""


class RestartRefusedError(Refused):
    """A replica restart was refused before touching anything (the reason says why)."""


class RestartNoQuorumError(RestartRefusedError):
    """A replica restart was refused: the cluster (partition) has no quorum."""


def _quote(text: object) -> str:
    import json

    if not isinstance(text, str):
        return f"{text!r} (type {type(text).__name__}, not str)"
    if len(text) > 300:
        text = text[:300] + "..."
    quoted = json.dumps(text, ensure_ascii=False)
    try:
        quoted.encode()
    except UnicodeEncodeError:  # lone surrogates, e.g. from undecodable bytes
        return json.dumps(text)
    return quoted
