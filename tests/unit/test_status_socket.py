"""``check`` names a node whose podman API socket is down (issue 13): the store can't be read
there and the guard falls back to the slower podman command."""

from __future__ import annotations

from pathlib import Path

import pytest

from pcmkimg.adapters import podman
from pcmkimg.core.errors import NodeUnreachable, SocketDown
from pcmkimg.core.problems import problems
from pcmkimg.core.survey import NodeView
from tests.helpers import cluster, galera, gathered


def test_a_unix_socket_that_does_not_answer_is_socket_down(tmp_path: Path) -> None:
    """The real connect (podman-py) to a socket nobody serves."""
    with pytest.raises(SocketDown) as down:
        podman.connect("controller-2", f"unix://{tmp_path}/podman.sock", timeout=2)
    assert isinstance(down.value, NodeUnreachable)
    assert "controller-2" in down.value.one_line()


def test_check_names_the_node_and_the_fix() -> None:
    cl = cluster()
    views = {
        ("galera-bundle", "controller-2"): NodeView(
            "controller-2", error="did not answer", socket_down=True
        ),
        ("galera-bundle", "controller-1"): NodeView("controller-1", error="ssh: refused"),
    }
    found = {p.kind: p.message for p in problems(gathered(cl, galera(cl), views))}
    assert "systemctl enable --now podman.socket on controller-2" in found["podman-socket"]
    assert "falls back to the slower podman command" in found["podman-socket"]
    assert found["unreachable"] == "controller-1: ssh: refused"  # not a local socket
