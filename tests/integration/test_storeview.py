"""status's read-only store views against a real podman API service: over its unix socket, and
through our own ssh tunnel to a real sshd on 127.0.0.1; the same answers as podman-py's store."""

from __future__ import annotations

from pathlib import Path

import pytest

from pcmkimg.adapters import podman, storeview
from pcmkimg.adapters.config import Config
from pcmkimg.core.errors import SocketDown
from pcmkimg.core.images import Resolved, Unresolved
from tests.integration.test_tunnel import Sshd, sshd  # noqa: F401 - the sshd fixture
from tests.offline.test_offline_status import FLOATING, REAL, node_store  # noqa: F401 - fixture


def _same_as_podman_py(view: storeview.StoreView, url: str) -> None:
    with podman.connect("n0", url) as store:
        assert view.named_images() == tuple(
            i for i in store.named_images() if i.names
        )  # one call each
        assert view.containers(running_only=True) == store.containers(running_only=True)


def test_the_view_over_the_unix_socket(node_store: tuple[str, str]) -> None:  # noqa: F811
    url, image_id = node_store
    view = storeview.open_view("n0", url, Config())
    (image,) = view.named_images()
    assert image.id == image_id and set(image.names) == {FLOATING, REAL}
    assert view.containers(running_only=True) == ()
    found = view.resolve(FLOATING)
    assert isinstance(found, Resolved) and found.id == image_id
    assert isinstance(view.resolve("cluster.common.tag/absent:pcmklatest"), Unresolved)
    _same_as_podman_py(view, url)


def test_a_local_socket_that_does_not_answer_is_socket_down(tmp_path: Path) -> None:
    view = storeview.open_view("n1", f"unix://{tmp_path}/podman.sock", Config())
    with pytest.raises(SocketDown) as down:
        view.named_images()
    assert "n1" in down.value.one_line()


def test_the_view_through_the_ssh_tunnel(
    sshd: Sshd,  # noqa: F811
    node_store: tuple[str, str],  # noqa: F811
) -> None:
    url, image_id = node_store
    socket = Path(url[len("unix://") :])
    view = storeview.open_view("n0", sshd.url(socket), sshd.config())
    tunnel = view.tunnel
    assert tunnel is not None
    try:
        (image,) = view.named_images()
        assert image.id == image_id
        _same_as_podman_py(view, url)
    finally:
        view.close()
    assert tunnel.process.poll() is not None
