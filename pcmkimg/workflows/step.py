"""What one service's step on one node carries (the node step's record), and what its
rollback undoes.

The node step itself is :mod:`pcmkimg.workflows.nodestep`; putting a node back after a failed
step is :mod:`pcmkimg.workflows.noderollback`.
"""

from __future__ import annotations

from pcmkimg.adapters import podman as images
from pcmkimg.core import cib, plan
from pcmkimg.core.reference import Reference
from pcmkimg.core.report import NodeResult
from pcmkimg.records import dataclass, field
from pcmkimg.workflows.context import HoldsPort


@dataclass
class NodeStep:
    """What one service's step on one node carries: the bundle, the node's result (the
    report's), the target image (as named, and its ID), whether to restart; as the step goes,
    the retag it did (the previous image), the replica it restarts and the holds it runs
    under."""

    bundle: plan.BundleRef
    res: NodeResult
    """The node's result for this service, in the report from the step's start."""
    ref: Reference | str
    """The target image as named (for the operator's lines)."""
    target: str
    """The target's image ID on the node."""
    restart: bool = True
    """False with ``--no-restart``: retag only."""
    watch: bool = False
    """Watched during a soak (the plan has a replica of it on the node)."""
    retag: images.Retagged | None = field(default=None, repr=False)
    """What :func:`retag` did: the previous image is its ``old_id``."""
    replica: cib.ReplicaStatus | None = field(default=None, repr=False)
    """The replica :func:`prepare` chose to restart (None: none restarts)."""
    holds: HoldsPort | None = field(default=None, repr=False)
    """The holds of the node's turn, once placed."""

    @property
    def node(self) -> str:
        return self.res.node

    @property
    def service(self) -> str:
        return self.bundle.service

    @property
    def chosen(self) -> cib.ReplicaStatus:
        """The replica to restart, once chosen."""
        assert self.replica is not None, "prepare() first"
        return self.replica

    @property
    def moved(self) -> images.Retagged:
        """The retag, once done."""
        assert self.retag is not None, "retag() first"
        return self.retag


@dataclass(frozen=True)
class Undo:
    """One service to put back on a node: its step, and the retag to undo (this run's, or on
    a re-run an earlier run's)."""

    step: NodeStep
    retag: images.Retagged
