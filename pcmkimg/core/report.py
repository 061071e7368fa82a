"""What an update did, node by node: the report ``update --json`` prints. Pure data."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pcmkimg.records import dataclass, field

Result = Literal[
    "pending",
    "ok",
    "unchanged",
    "started",
    "retag-only",
    "rolled-back",
    "rollback-failed",
    "failed",
]
"""What happened on a node (the README's table of ``update --json`` results)."""


@dataclass
class NodeResult:
    node: str
    before: str | None = None  # image ID behind the floating name before
    after: str | None = None
    retagged: bool = False
    restarted: bool = False
    rolled_back: bool = False
    down_seconds: float | None = None
    """How long no container of the replica ran: from the old container's death to the new
    one's start, as podman's events tell it (None: no restart, or the events did not say)."""
    restart_seconds: float = 0.0
    """Wall time of the restart step: the constraint, the stop, the start, the checks."""
    container_before: str | None = None
    container_after: str | None = None
    result: Result = "pending"
    """"pending" only while the node is being worked on, or when an interruption stopped it."""

    def as_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


@dataclass
class UpdateReport:
    bundle: str
    service: str
    target: str
    nodes: list[NodeResult] = field(default_factory=list)

    def turn(self, node: str, services: Sequence[str]) -> dict[str, NodeResult]:
        """The result of ``node``'s turn (its one service's), in the report from its start
        (also when the turn fails)."""
        res = NodeResult(node)
        self.nodes.append(res)
        return {s: res for s in services}

    @property
    def restarted(self) -> int:
        return sum(1 for n in self.nodes if n.restarted)

    @property
    def longest_down(self) -> float | None:
        return max((n.down_seconds for n in self.nodes if n.down_seconds is not None), default=None)

    @property
    def longest_restart(self) -> float:
        return max((n.restart_seconds for n in self.nodes), default=0.0)

    def summary(self) -> str:
        done = [
            n.node for n in self.nodes if n.result in ("ok", "unchanged", "started", "retag-only")
        ]
        text = f"{len(done)} node(s) updated, {self.restarted} container(s) restarted"
        if self.restarted:
            down = self.longest_down
            text += (
                f", longest replica downtime {down:.1f}s" if down is not None else ""
            ) + f", longest restart step {self.longest_restart:.1f}s"
        return text

    def as_dict(self) -> dict[str, object]:
        down = self.longest_down
        return {
            "bundle": self.bundle,
            "service": self.service,
            "target": self.target,
            "nodes": [n.as_dict() for n in self.nodes],
            "restarted": self.restarted,
            "longest_down_seconds": None if down is None else round(down, 3),
            "longest_restart_seconds": round(self.longest_restart, 3),
        }


@dataclass
class ReleaseReport:
    """Per node, per service, what a release did."""

    nodes: list[dict[str, NodeResult]] = field(default_factory=list)
    """Each node's turn so far, in order: its services' results."""
    names: list[str] = field(default_factory=list)
    """The node of each turn in :attr:`nodes`."""

    def turn(self, node: str, services: Sequence[str]) -> dict[str, NodeResult]:
        """The results of ``node``'s turn, one per service, in the report from its start (also
        when the turn fails)."""
        results = {s: NodeResult(node) for s in services}
        self.nodes.append(results)
        self.names.append(node)
        return results

    def restarted(self) -> int:
        return sum(r.restarted for per in self.nodes for r in per.values())

    def summary(self) -> str:
        done = sum(all(r.result != "pending" for r in per.values()) for per in self.nodes)
        return f"{done} node(s) done, {self.restarted()} container(s) restarted"

    def as_dict(self) -> dict[str, object]:
        return {
            "nodes": [
                {"node": node, "services": {s: r.as_dict() for s, r in per.items()}}
                for node, per in zip(self.names, self.nodes)
            ],
            "restarted": self.restarted(),
        }
