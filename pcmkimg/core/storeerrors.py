"""How a node image store's failures are told apart: one type per failure kind, pure.

Every failure of a store operation is an :class:`ImageError` whose message names the node and
the reference and carries the fix. The store adapters raise them (:mod:`pcmkimg.adapters.podman`,
:mod:`pcmkimg.adapters.localstore`), as do the store port's rules (:mod:`pcmkimg.core.store`) and
the restore plan (:mod:`pcmkimg.core.tagplan`). A pull's own kinds build on these in
:mod:`pcmkimg.core.pulls`. Standard library only: the agent's monitor imports it.
"""

from __future__ import annotations

from pcmkimg.errors import Unreachable


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
