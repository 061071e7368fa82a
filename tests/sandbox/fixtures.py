"""Session-scoped pytest fixtures for the sandbox.

Each fixture brings its sandbox up through ``python -m tests.sandbox up``
(a keeper process owns the daemons) and takes it down at the end of the
session, even when tests failed. A crashed session is cleaned up by
``python -m tests.sandbox down --all``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from . import cluster as cluster_mod
from . import lifecycle
from .podman_nodes import PodmanNode
from .podman_nodes import podman as podman_cmd
from .require import need, need_root, need_tools
from .state import load

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Sandbox:
    name: str
    dir: Path
    registry: str
    images: dict[str, str]
    podman_nodes: list[PodmanNode]
    cluster: cluster_mod.Cluster | None

    def ref(self, path: str) -> str:
        """The registry reference of a test image, e.g. ``ref("ns1/svc:1.0")``."""
        return f"{self.registry}/{path}"

    def podman(self, node: PodmanNode, *args: str, check: bool = True):  # type: ignore[no-untyped-def]
        """Run the podman command on a podman-only node's store."""
        state = load(self.name)
        assert state is not None
        return podman_cmd(node, state, *args, check=check)


def guarded_bundle(
    bundle: str, floating: str, path: str = "ns1/svc:1.0"
) -> Callable[[Sandbox], Iterator[Sandbox]]:
    """A module fixture that yields the cluster sandbox with ``Cluster.guarded_bundle`` of
    ``bundle`` on ``floating`` (tagged from the test image ``path``) for the module's tests.
    In a test module: ``guarded = guarded_bundle(BUNDLE, FLOATING)``."""

    @pytest.fixture(scope="module")
    def guarded(cluster_sandbox: Sandbox) -> Iterator[Sandbox]:
        assert cluster_sandbox.cluster is not None
        with cluster_sandbox.cluster.guarded_bundle(bundle, floating, cluster_sandbox.ref(path)):
            yield cluster_sandbox

    return guarded


def _up(name: str, *args: str) -> Sandbox:
    proc = subprocess.run(
        [sys.executable, "-m", "tests.sandbox", "--name", name, "up", "--json", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if proc.returncode != 0:
        lifecycle.down(name)
        pytest.fail(f"sandbox {name} did not come up: {proc.stderr.strip()}", pytrace=False)
    info = json.loads(proc.stdout)
    state = load(name)
    assert state is not None
    return Sandbox(
        name=name,
        dir=Path(info["dir"]),
        registry=info["registry"],
        images=dict(info["images"]),
        podman_nodes=[PodmanNode(n["name"], Path(n["dir"])) for n in info["podman_nodes"]],
        cluster=cluster_mod.from_state(state) if info["cluster"] else None,
    )


def _basic_needs() -> None:
    need_root()
    need_tools("podman", "docker-registry", "skopeo")
    need(os.path.exists("/bin/busybox"), "needs busybox-static")


@pytest.fixture(scope="session")
def podman_sandbox() -> Iterator[Sandbox]:
    """A registry with the test images and 3 independent podman node stores."""
    _basic_needs()
    name = f"p{os.getpid() % 10**6}"
    sb = _up(name, "--podman", "3", "--no-cluster")
    try:
        yield sb
    finally:
        lifecycle.down(name)


@pytest.fixture(scope="session")
def cluster_sandbox() -> Iterator[Sandbox]:
    """A registry with the test images and a real 3-node Pacemaker cluster."""
    _basic_needs()
    need_tools(
        "corosync",
        "pacemakerd",
        "crm_mon",
        "cibadmin",
        "crm_resource",
        "nsenter",
        "unshare",
        "socat",
        "ip",
        "pcs",
    )
    name = f"c{os.getpid() % 10**6}"
    sb = _up(name)
    try:
        yield sb
    finally:
        lifecycle.down(name)
