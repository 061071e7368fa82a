"""The error kinds of the pure core: one type per kind that a caller tells apart.

Each kind is in one exit family of :mod:`pcmkimg.errors` (the CLI maps the family to an exit
code, the agent to an OCF code) and carries its fix. Here: a node image store's failures, every
one an :class:`ImageError` whose message names the node and the reference (raised by the store
adapters, the store port's rules in :mod:`pcmkimg.core.store` and the restore plan in
:mod:`pcmkimg.core.tagplan`), and a pull's own kinds (told apart by :mod:`pcmkimg.core.pulls`).
Standard library only: the agent imports it.
"""

from __future__ import annotations

from pcmkimg.errors import BadInput, Unreachable


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


class PullFailed(ImageError):
    """A pull failed for a reason not classified above."""
