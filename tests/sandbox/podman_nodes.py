"""Podman-only mode: N independent image stores, one API socket each."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .proc import run, spawn, unix_open, wait_for
from .registry import podman_env
from .state import State

STORE_OPTIONS = "size=1g,mode=700"
"""Every sandbox node's image store (its podman graphroot: ``/var/lib/containers`` on a cluster
node, ``storage`` in a podman-only node's directory) is a tmpfs of its own with these options, so
that a test can fill it (``tests/integration/test_faults_world_live.py``). Podman's overlay driver
works on tmpfs (podman 4.3 and 5.4); the store costs RAM for what it holds only, and the
sandbox's stores live as long as the sandbox, as they did on the machine's disk."""


def store_mount(path: Path) -> list[str]:
    """The command that gives a node's image store at ``path`` its own filesystem."""
    return ["mount", "-t", "tmpfs", "-o", STORE_OPTIONS, "tmpfs", str(path)]


class ApiSocket:
    """Where a node's podman API service listens: ``podman.sock`` in the node's ``dir``."""

    dir: Path

    @property
    def socket(self) -> Path:
        return self.dir / "podman.sock"

    @property
    def url(self) -> str:
        return f"unix://{self.socket}"


@dataclass(frozen=True)
class PodmanNode(ApiSocket):
    """One simulated node: its own store and the API socket that serves it."""

    name: str
    dir: Path

    def cli(self) -> list[str]:
        """The podman command line that works on this node's store directly."""
        return [
            "podman",
            "--root",
            str(self.dir / "storage"),
            "--runroot",
            str(self.dir / "run"),
            "--tmpdir",
            str(self.dir / "tmp"),
        ]


def start(state: State, count: int) -> list[PodmanNode]:
    nodes = []
    env = podman_env(state)
    for i in range(count):
        node = PodmanNode(f"node-{i}", state.dir / "pnodes" / f"node-{i}")
        for sub in ("storage", "run", "tmp"):
            (node.dir / sub).mkdir(parents=True, exist_ok=True)
        run(store_mount(node.dir / "storage"))  # under the sandbox: ``down`` unmounts it
        proc = spawn(
            [*node.cli(), "system", "service", "--time=0", node.url],
            log=node.dir / "service.log",
            env=env,
        )
        state.add_proc(proc.pid, f"podman service {node.name}")
        nodes.append(node)
    for node in nodes:
        wait_for(lambda n=node: unix_open(n.socket), f"podman socket of {node.name}", timeout=30)
    state.info["podman_nodes"] = [str(n.dir) for n in nodes]
    state.save()
    return nodes


def podman(node: PodmanNode, state: State, *args: str, check: bool = True):  # type: ignore[no-untyped-def]
    """Run the podman command on a node's store (for test set-up and checks)."""
    return run([*node.cli(), *args], env=podman_env(state), check=check)
