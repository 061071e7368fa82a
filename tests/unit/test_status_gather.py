"""The survey's gather (status, check, metrics, outdated) asks each node's store for its
named images ONCE, whatever the number of services, and finds every floating name in memory
(issue 14: an inspect per service per node was 92 % of the store threads' time)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

from pcmkimg.core import images, naming
from pcmkimg.core import survey as S
from pcmkimg.core.store import Resolution
from pcmkimg.workflows.survey import gather
from tests.helpers import NODES, OLD, REAL_OLD, cluster


class CountingStore:
    """The store primitives status uses; every call counted."""

    def __init__(self, node: str, names: dict[str, str]) -> None:
        self.node = node
        self.names = names  # name -> image id
        self.calls: Counter[str] = Counter()

    def named_images(self) -> tuple[images.ImageInfo, ...]:
        self.calls["named_images"] += 1
        by_id: dict[str, list[str]] = {}
        for name, image_id in self.names.items():
            by_id.setdefault(image_id, []).append(name)
        return tuple(
            images.ImageInfo(id=i, digest=None, repo_digests=(), names=tuple(n))
            for i, n in by_id.items()
        )

    def resolve(self, floating: str) -> Resolution:
        self.calls["resolve"] += 1
        found = self.names.get(f"localhost/{floating}")
        if found is None:
            return images.Unresolved(self.node, floating)
        info = images.ImageInfo(id=found, digest=None, repo_digests=(), names=(floating,))
        return images.Resolved(self.node, floating, info)

    def inspect(self, name: str) -> None:
        raise AssertionError(f"an inspect per name ({name})")

    def containers(self, *, running_only: bool = False) -> tuple[images.Container, ...]:
        self.calls["containers"] += 1
        return ()


class FakeStores:
    def __init__(self, stores: dict[str, CountingStore]) -> None:
        self.stores = stores

    def each(self, nodes: Sequence[str], work: Callable[[CountingStore], object]) -> dict:
        return {n: work(self.stores[n]) for n in nodes}


def test_one_image_list_per_node_whatever_the_services() -> None:
    cl = cluster("status-ok.xml", "mon-ok.xml")
    services = S.floating_bundles(cl, naming.DEFAULT_SCHEME)
    assert len(services) >= 4
    held = {s.floating: OLD for s in services if s.service != "redis"}
    stores = {n: CountingStore(n, {**held, REAL_OLD: OLD}) for n in NODES}
    g = gather(cl, FakeStores(stores), services)  # type: ignore[arg-type]
    for store in stores.values():
        assert store.calls == Counter({"named_images": 1, "containers": 1})
    for s in services:
        for f in s.nodes:
            view = g.views[(s.bundle.id, f.name)]
            if s.service == "redis":
                assert view.resolved is None and view.error is None
            else:
                assert view.resolved is not None and view.resolved.id == OLD
                assert REAL_OLD in view.resolved.other_names


def test_a_short_floating_name_is_left_to_podmans_lookup() -> None:
    """``cluster-common-tag/svc:pcmklatest`` is stored as ``localhost/...``: only podman's own
    lookup finds it, so that name (and only it) is resolved through the store."""
    cl = cluster("status-ok.xml", "mon-ok.xml")
    services = S.floating_bundles(cl, naming.DEFAULT_SCHEME)
    short = S.Service("x", services[0].bundle, "cluster-common-tag/x:pcmklatest", services[0].nodes)
    short = S.Service(short.service, short.bundle, short.floating, short.nodes, qualified=False)
    stores = {
        n: CountingStore(n, {"localhost/cluster-common-tag/x:pcmklatest": OLD}) for n in NODES
    }
    g = gather(cl, FakeStores(stores), [*services, short])  # type: ignore[arg-type]
    for store in stores.values():
        assert store.calls["named_images"] == 1 and store.calls["resolve"] == 1
    view = g.views[(short.bundle.id, NODES[0])]
    assert view.resolved is not None and view.resolved.id == OLD
