"""pcmkimg.adapters.podman against real podman services and a real registry (the sandbox)."""

from __future__ import annotations

import io
import json
import tarfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from pcmkimg.adapters import podman
from pcmkimg.adapters.config import Config, RegistrySettings
from pcmkimg.adapters.localstore import resolve_local, resolve_with_cli
from pcmkimg.core.errors import (
    DigestMismatch,
    ImageAbsent,
    ImageNotFound,
    InvalidName,
    NodeUnreachable,
    PodmanCommandFailed,
    RegistryUnreachable,
    TLSError,
)
from pcmkimg.core.images import PullProgress, Resolved, Unresolved
from pcmkimg.core.store import Resolution
from tests.sandbox.proc import free_port

FLOATING = "cluster.common.tag/svc:pcmklatest"
ROLLBACK = "cluster.common.tag/svc:pcmkprevious"


def config_for(sb) -> Config:
    return Config(registries={sb.registry: RegistrySettings(tls_verify=False)})


def wipe(sb) -> None:
    for node in sb.podman_nodes:
        sb.podman(node, "rm", "-af", check=False)
        sb.podman(node, "rmi", "-af", check=False)


@pytest.fixture
def sb(podman_sandbox) -> Iterator:
    """The sandbox, with every node's store empty before and after the test."""
    wipe(podman_sandbox)
    yield podman_sandbox
    wipe(podman_sandbox)


@pytest.fixture
def stores(sb) -> Iterator[list[podman.Store]]:
    opened = [podman.connect(n.name, n.url, config=config_for(sb)) for n in sb.podman_nodes]
    yield opened
    for store in opened:
        store.close()


def cli_images(sb, node) -> list[tuple[str, tuple[str, ...]]]:
    """The node's images as the podman command sees them: (ID, sorted names)."""
    out = sb.podman(node, "images", "--format", "json").stdout
    return sorted((i["Id"], tuple(sorted(i.get("Names") or ()))) for i in json.loads(out or "[]"))


def import_image(sb, node, name: str, content: bytes) -> str:
    """An image made on the node now (so it is newer than the test images), with one file."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("data")
        info.size = len(content)
        tar.addfile(info, io.BytesIO(content))
    path = Path(sb.dir) / f"import-{node.name}.tar"
    path.write_bytes(buf.getvalue())
    try:
        return sb.podman(node, "import", "-q", str(path), name).stdout.strip().split(":")[-1]
    finally:
        path.unlink()


def test_resolve_absent_name_is_unresolved_on_every_node(sb, stores) -> None:
    for store in stores:
        found = store.resolve(FLOATING)
        assert found == Unresolved(store.node, FLOATING)


def test_pull_lands_on_one_node_only_and_reports_progress(sb, stores) -> None:
    first, *others = stores
    events: list[PullProgress] = []
    pulled = first.pull(sb.ref("ns1/svc:1.0"), progress=events.append)
    assert pulled.resolved.id == sb.images["ns1/svc:1.0"]
    assert pulled.resolved.name == sb.ref("ns1/svc:1.0")
    assert not pulled.cached and pulled.attempts == 1
    assert pulled.resolved.digest and pulled.resolved.created is not None
    assert {e.kind for e in events} == {"status", "done"}
    assert all(e.node == first.node for e in events)
    # What podman 4.3 and 5.4 both say (libpod's stream): the pull, every blob, then the config.
    said = [e.text for e in events if e.kind == "status"]
    assert said[0].startswith("Trying to pull ") and sb.ref("ns1/svc:1.0") in said[0], said
    assert any(t.startswith("Copying blob sha256:") for t in said), said
    assert any(t.startswith("Copying config sha256:") for t in said), said
    assert events[-1].kind == "done"
    for store in others:
        assert isinstance(store.resolve(sb.ref("ns1/svc:1.0")), Unresolved)
        assert store.images() == ()


def test_pull_by_expected_digest_skips_the_network_when_present(sb, stores) -> None:
    first, second, _ = stores
    ref = sb.ref("ns1/svc:1.0")
    digest = first.pull(ref).resolved.digest
    events: list[PullProgress] = []
    again = first.pull(ref, expected_digest=digest, progress=events.append)
    assert again.cached and again.attempts == 0
    assert [e.kind for e in events] == ["cached", "done"]
    # Another node pulls by digest and gets the tag too.
    other = second.pull(ref, expected_digest=digest)
    assert not other.cached and other.resolved.id == sb.images["ns1/svc:1.0"]
    assert other.resolved.name == ref and ref in other.resolved.image.names
    # A digest in the reference works the same.
    assert second.pull(f"{sb.ref('ns1/svc')}@{digest}").cached


def test_pull_of_missing_tag_or_unknown_digest_fails_typed_store_unchanged(sb, stores) -> None:
    store, node = stores[0], sb.podman_nodes[0]
    store.pull(sb.ref("ns1/svc:1.0"))
    before, before_cli = store.images(), cli_images(sb, node)
    with pytest.raises(ImageNotFound) as caught:
        store.pull(sb.ref("ns1/svc:nope"), retries=1, backoff=0.01)
    assert node.name in caught.value.one_line() and "ns1/svc:nope" in caught.value.one_line()
    assert caught.value.fix
    with pytest.raises(ImageNotFound):
        store.pull(sb.ref("nsx/svc:1.0"))
    # A tag whose image has another digest than the one asked for: refused, both named.
    with pytest.raises(DigestMismatch) as wrong:
        store.pull(sb.ref("ns1/svc:1.0"), expected_digest="sha256:" + "0" * 64)
    assert "sha256:" + "0" * 64 in wrong.value.message
    # A digest the registry does not have: not found.
    with pytest.raises(ImageNotFound):
        store.pull(sb.ref("ns1/svc") + "@sha256:" + "0" * 64)
    assert store.images() == before and cli_images(sb, node) == before_cli


def test_pull_from_stopped_registry_retries_then_fails_typed(sb, stores) -> None:
    store, node = stores[1], sb.podman_nodes[1]
    store.pull(sb.ref("ns1/svc:1.1"))
    before_cli = cli_images(sb, node)
    down = f"127.0.0.1:{free_port()}"
    events: list[PullProgress] = []
    with pytest.raises(RegistryUnreachable) as caught:
        store.pull(
            f"{down}/ns1/svc:1.0", tls_verify=False, retries=1, backoff=0.05, progress=events.append
        )
    assert "connection refused" in caught.value.message and down in caught.value.one_line()
    assert [e.attempt for e in events if e.kind == "retry"] == [1]
    assert cli_images(sb, node) == before_cli


def test_tls_is_verified_unless_configured(sb) -> None:
    node = sb.podman_nodes[2]
    with podman.connect(node.name, node.url) as store:
        with pytest.raises(TLSError) as caught:
            store.pull(sb.ref("ns1/svc:1.0"))
        assert "tls_verify=false" in caught.value.fix
        assert store.images() == ()


def test_invalid_names_are_refused_before_any_request(sb, stores) -> None:
    with pytest.raises(InvalidName) as caught:
        stores[0].pull(sb.ref("NS/svc:1.0"))
    assert "lowercase" in caught.value.message and sb.podman_nodes[0].name in str(caught.value)
    with pytest.raises(InvalidName):
        stores[0].retag("cluster.common.tag/svc", sb.ref("ns1/svc:1.0"))


def test_retag_moves_the_floating_name_and_never_drops_it(sb, stores) -> None:
    """The seed case: ns1/svc:1.0 as the floating name, then moved to ns2/svc:1.1."""
    store, node = stores[1], sb.podman_nodes[1]
    old, new = sb.images["ns1/svc:1.0"], sb.images["ns2/svc:1.1"]
    store.pull(sb.ref("ns1/svc:1.0"))
    store.pull(sb.ref("ns2/svc:1.1"))
    first = store.retag(FLOATING, sb.ref("ns1/svc:1.0"))
    assert (first.old_id, first.new_id, first.moved, first.rollback) == (None, old, True, None)

    seen: list[Resolution] = []
    stop = threading.Event()

    def watch() -> None:
        with podman.connect(node.name, node.url) as watcher:
            while not stop.is_set():
                seen.append(watcher.resolve(FLOATING))

    thread = threading.Thread(target=watch)
    thread.start()
    try:
        for _ in range(25):
            store.retag(FLOATING, sb.ref("ns2/svc:1.1"))
            store.retag(FLOATING, ROLLBACK)  # back to 1.0: a swap of the two names
    finally:
        stop.set()
        thread.join(timeout=30)
    assert len(seen) > 30
    missing = [r for r in seen if not isinstance(r, Resolved)]
    assert not missing, f"{len(missing)} of {len(seen)} resolves found no floating name"
    assert {r.id for r in seen} == {old, new}

    moved = store.retag(FLOATING, sb.ref("ns2/svc:1.1"))
    assert (moved.old_id, moved.new_id, moved.moved) == (old, new, True)
    assert moved.rollback == ROLLBACK and moved.released_id is None
    now = store.resolve(FLOATING)
    assert isinstance(now, Resolved) and now.id == new
    assert set(now.other_names) == {sb.ref("ns2/svc:1.1")}
    previous = store.resolve(ROLLBACK)
    assert isinstance(previous, Resolved) and previous.id == old
    assert sb.ref("ns1/svc:1.0") in previous.other_names
    assert store.retag(FLOATING, sb.ref("ns2/svc:1.1")).moved is False  # idempotent
    assert all(isinstance(s.resolve(FLOATING), Unresolved) for s in (stores[0], stores[2]))


def test_swap_of_single_named_images_never_leaves_one_nameless(sb, stores) -> None:
    store, node = stores[2], sb.podman_nodes[2]
    a, b = sb.images["ns1/svc:1.0"], sb.images["ns1/svc:1.1"]
    for path, name in (("ns1/svc:1.0", FLOATING), ("ns1/svc:1.1", ROLLBACK)):
        store.pull(sb.ref(path))
        sb.podman(node, "tag", sb.ref(path), name)
        sb.podman(node, "untag", sb.ref(path), sb.ref(path))
    assert cli_images(sb, node) == sorted([(a, (FLOATING,)), (b, (ROLLBACK,))])
    swapped = store.retag(FLOATING, ROLLBACK)
    assert (swapped.old_id, swapped.new_id) == (a, b)
    assert cli_images(sb, node) == sorted([(a, (ROLLBACK,)), (b, (FLOATING,))])

    # A third image: the rollback name leaves b, whose only name it was.
    c = store.pull(sb.ref("ns1/svc:broken")).resolved.id
    moved = store.retag(FLOATING, sb.ref("ns1/svc:broken"))
    assert moved.released_id == a
    assert store.resolve(ROLLBACK).id == b  # type: ignore[union-attr]
    assert store.resolve(FLOATING).id == c  # type: ignore[union-attr]


def test_retag_of_an_absent_image_is_a_typed_error(sb, stores) -> None:
    with pytest.raises(ImageAbsent) as caught:
        stores[0].retag(FLOATING, sb.ref("ns1/svc:1.0"))
    assert "pull it" in caught.value.fix
    assert stores[0].images() == ()


def test_prune_removes_only_old_unused_images_of_the_service(sb, stores) -> None:
    store, node = stores[0], sb.podman_nodes[0]
    for path in ("ns1/svc:1.0", "ns1/svc:1.1", "ns2/svc:1.1", "ns1/svc:broken"):
        store.pull(sb.ref(path))
    store.retag(FLOATING, sb.ref("ns1/svc:1.0"))
    store.retag(FLOATING, sb.ref("ns1/svc:1.1"))  # 1.0 keeps the rollback name
    local = import_image(sb, node, sb.ref("ns1/svc:local"), b"newest")
    other = import_image(sb, node, "example.org/other/app:1", b"other")
    broken = sb.images["ns1/svc:broken"]
    sb.podman(node, "create", "--name", "uses-broken", sb.ref("ns1/svc:broken"), "true")

    used = {c.image_id: c for c in store.containers()}
    assert used[broken].name == "uses-broken" and used[broken].state in ("created", "configured")
    assert store.containers(running_only=True) == ()

    kept = store.prune("svc", keep=1)
    assert kept.removed == () and kept.kept == (local,)
    assert set(kept.protected) == {sb.images["ns1/svc:1.0"], sb.images["ns1/svc:1.1"], broken}
    first = store.prune("svc", keep=0)
    assert first.removed == (local,)
    sb.podman(node, "rm", "uses-broken")
    second = store.prune("svc", keep=0)
    assert second.removed == (broken,)
    left = {i.id for i in store.images()}
    assert left == {sb.images["ns1/svc:1.0"], sb.images["ns1/svc:1.1"], other}
    assert store.prune("svc", keep=0).removed == ()


def test_prune_of_one_service_leaves_another_stopped_service_and_foreign_names(sb, stores):
    """Two services share the repository ns1/svc; "other" is stopped (no container). Pruning
    either removes only an image whose names are all the pruned service's own, unneeded."""
    store, node = stores[0], sb.podman_nodes[0]
    for path in ("ns1/svc:1.0", "ns1/svc:1.1", "ns1/svc:broken"):
        store.pull(sb.ref(path))
    other_f, other_r = (
        "cluster.common.tag/other:pcmklatest",
        "cluster.common.tag/other:pcmkprevious",
    )
    store.retag(FLOATING, sb.ref("ns1/svc:1.0"))
    store.retag(FLOATING, sb.ref("ns1/svc:1.1"))  # svc: 1.1, rollback 1.0
    before_b = import_image(sb, node, sb.ref("ns1/svc:b-before"), b"other-before")
    store.retag(other_f, before_b)
    store.retag(other_f, sb.ref("ns1/svc:broken"))  # other: broken, rollback b-before
    legacy = import_image(sb, node, sb.ref("ns1/svc:legacy"), b"legacy")
    sb.podman(node, "tag", legacy, sb.ref("ns1/svc:pcmklatest"))
    shared = import_image(sb, node, sb.ref("ns1/svc:shared"), b"shared")
    sb.podman(node, "tag", shared, "example.org/team-b/tool:4")
    old = import_image(sb, node, sb.ref("ns1/svc:old"), b"old")
    assert store.containers() == ()  # both services stopped here: only names protect

    names_before = dict(cli_images(sb, node))
    pruned = store.prune("svc", keep=0)
    assert pruned.removed == (old,)
    after = dict(cli_images(sb, node))
    assert after == {i: n for i, n in names_before.items() if i != old}
    assert store.resolve(other_f).id == sb.images["ns1/svc:broken"]  # type: ignore[union-attr]
    assert store.resolve(other_r).id == before_b  # type: ignore[union-attr]
    assert store.resolve("example.org/team-b/tool:4").id == shared  # type: ignore[union-attr]
    assert store.resolve(sb.ref("ns1/svc:pcmklatest")).id == legacy  # type: ignore[union-attr]

    # The other service's prune leaves svc's names, and the foreign and legacy ones, alone.
    again = store.prune("other", keep=0)
    assert again.removed == ()
    assert dict(cli_images(sb, node)) == after
    assert {sb.images["ns1/svc:1.0"], sb.images["ns1/svc:1.1"], legacy, shared} <= set(
        again.protected
    )


def test_unreachable_socket_and_the_cli_fallback(sb, stores) -> None:
    node = sb.podman_nodes[0]
    bogus = f"unix://{sb.dir}/no-such/podman.sock"
    with pytest.raises(NodeUnreachable) as caught:
        podman.connect(node.name, bogus)
    assert node.name in caught.value.one_line() and bogus in caught.value.one_line()

    assert isinstance(
        resolve_local(FLOATING, bogus, node=node.name, podman_command=node.cli()),
        Unresolved,
    )
    stores[0].pull(sb.ref("ns1/svc:1.0"))
    stores[0].retag(FLOATING, sb.ref("ns1/svc:1.0"))
    by_api = resolve_local(FLOATING, node.url, node=node.name)
    by_cli = resolve_local(FLOATING, bogus, node=node.name, podman_command=node.cli())
    assert isinstance(by_cli, Resolved) and by_cli == by_api
    assert by_cli.other_names == (sb.ref("ns1/svc:1.0"),)
    with pytest.raises(PodmanCommandFailed):
        resolve_with_cli(FLOATING, podman_command=[f"{sb.dir}/no-such-podman"])
