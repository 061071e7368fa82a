"""The pull display on real pulls: 3 podman node services pulling from the sandbox registry in
parallel, as ``Session.pull_all`` does, shown on a (fake) terminal and in plain lines."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator

import pytest

from pcmkimg.adapters import podman
from pcmkimg.adapters.config import Config, RegistrySettings
from pcmkimg.core.images import Pulled
from pcmkimg.progress import PullDisplay
from tests.unit.test_progress import FakeTty, screen


def wipe(sb) -> None:  # type: ignore[no-untyped-def]
    for node in sb.podman_nodes:
        sb.podman(node, "rmi", "-af", check=False)


@pytest.fixture
def stores(podman_sandbox) -> Iterator[podman.Stores]:  # type: ignore[no-untyped-def]
    sb = podman_sandbox
    wipe(sb)
    config = Config(registries={sb.registry: RegistrySettings(tls_verify=False)})
    opened = {n.name: podman.connect(n.name, n.url, config=config) for n in sb.podman_nodes}
    stores = podman.Stores(config, None, opened=opened)  # type: ignore[arg-type]
    try:
        yield stores
    finally:
        stores.close()
        wipe(sb)


def test_parallel_pulls_show_one_final_line_per_node(podman_sandbox, stores):
    sb = podman_sandbox
    ref = sb.ref("ns1/svc:1.0")
    image_id = sb.images["ns1/svc:1.0"]
    tty = FakeTty()
    show = PullDisplay(tty, width=120)
    results = stores.each(list(stores.opened), lambda s: s.pull(ref, progress=show))
    assert all(isinstance(r, Pulled) for r in results.values()), results
    lines = screen(tty.getvalue())
    assert len(lines) == len(stores.opened), lines
    for node, line in zip(show.nodes, lines):
        # podman names every layer it copies: at least one blob, counted.
        assert re.fullmatch(rf"{node}: done: {image_id[:12]} \(\d+ blobs?\)", line), line
        assert show.nodes[node].blobs >= 1

    log = io.StringIO()
    node = next(iter(stores.opened))
    stores.get(node).pull(sb.ref("ns2/svc:1.1"), progress=PullDisplay(log))
    text = log.getvalue()
    assert "\x1b" not in text
    assert f"  {node}: copying blob 1 " in text
    assert text.splitlines()[-1].startswith(f"  {node}: done: ")
