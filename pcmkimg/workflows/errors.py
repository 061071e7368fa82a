"""The error kinds of the workflows: one type per kind that a caller tells apart.

Each kind is in one exit family of :mod:`pcmkimg.errors` (the CLI maps the family to an exit
code) and carries its fix. An update's and a release's failures are here (rollback and release
run the update's node step and catch :class:`UpdateFailed`); the kinds of the core and of the
adapters are in :mod:`pcmkimg.core.errors` and :mod:`pcmkimg.adapters.errors`. A workflow that
leaves something for a person to do and that no caller tells apart raises the family itself
(:class:`pcmkimg.errors.LeftBehind`), its message saying what.
"""

from __future__ import annotations

from pcmkimg.errors import BadInput, LeftBehind, NodeFailed, Unreachable


class PullsFailed(Unreachable):
    """A pull failed on at least one node; nothing was retagged or restarted."""


class DigestRefused(BadInput):
    """The image pulled under the given tag has another digest than the one asked for;
    nothing was retagged or restarted."""


class UpdateFailed(NodeFailed):
    """The update failed on a node, and that node was rolled back."""


class RollbackFailed(LeftBehind):
    """The update failed on a node and rolling that node back failed too."""
