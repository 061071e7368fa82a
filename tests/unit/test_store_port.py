"""The store port's rules (pcmkimg.core.store.StorePort) on a store of plain data: what retag,
restore and prune ask of the primitives, and what they refuse. The live podman stores run the
same code in tests/integration/test_images.py."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from pcmkimg.core.errors import ImageAbsent, InvalidName, StoreError
from pcmkimg.core.images import Container, ImageInfo
from pcmkimg.core.reference import Reference, parse
from pcmkimg.core.store import StorePort
from pcmkimg.core.tagplan import TagOp

F = "cluster.common.tag/mariadb:pcmklatest"
R = "cluster.common.tag/mariadb:pcmkprevious"
A, B, C = "a" * 64, "b" * 64, "c" * 64
REAL_A, REAL_B = "reg.example.com/tripleo/mariadb:1.0", "reg.example.com/tripleo/mariadb:2.0"


class DictStore(StorePort):
    """The primitives over names -> image IDs; ``log`` lists the changes they made."""

    def __init__(self, names: Mapping[str, str], *, refuse: frozenset[str] = frozenset()):
        self.node = "n1"
        self.names = dict(names)
        self.ids = set(names.values())
        self.refuse = refuse
        self.log: list[str] = []
        self.in_use: set[str] = set()

    def inspect(self, name: str) -> ImageInfo | None:
        image_id = name if name in self.ids else self.names.get(str(parse(name)))
        if image_id is None:
            return None
        names = tuple(sorted(n for n, i in self.names.items() if i == image_id))
        return ImageInfo(image_id, None, (), names)

    def tag(self, image_id: str, ref: Reference) -> None:
        self.log.append(f"tag {image_id[0]} {ref}")
        self.names[str(ref)] = image_id

    def untag(self, image_id: str, ref: Reference) -> None:
        self.log.append(f"untag {image_id[0]} {ref}")
        assert self.names.pop(str(ref)) == image_id

    def images(self) -> tuple[ImageInfo, ...]:
        return tuple(i for i in map(self.inspect, sorted(self.ids)) if i is not None)

    def containers(self, *, running_only: bool = False) -> tuple[Container, ...]:
        return tuple(Container(f"/c{i[0]}", i, "", i, "running") for i in sorted(self.in_use))

    def remove(self, image: ImageInfo) -> bool:
        if image.id in self.refuse:
            return False
        self.log.append(f"remove {image.id[0]}")
        self.ids.discard(image.id)
        self.names = {n: i for n, i in self.names.items() if i != image.id}
        return True


def test_retag_and_restore_run_the_plans_through_the_primitives() -> None:
    store = DictStore({F: A, R: B})  # a swap: B's only name is the rollback name
    done = store.retag(F, B)  # an image ID
    hold = "cluster.common.tag/mariadb:pcmkhold"
    assert store.log == [f"tag b {hold}", f"tag a {R}", f"tag b {F}", f"untag b {hold}"]
    assert store.names == {F: B, R: A}
    assert (done.old_id, done.new_id, done.rollback_before) == (A, B, B)
    store.restore(done)
    assert store.names == {F: A, R: B}


def test_retag_refuses_bad_names_and_an_absent_target() -> None:
    store = DictStore({F: A, REAL_B: B})
    with pytest.raises(InvalidName):
        store.retag("cluster.common.tag/mariadb", REAL_B)  # no tag
    with pytest.raises(InvalidName):
        store.retag(F, REAL_B, rollback=F)
    with pytest.raises(ImageAbsent) as caught:
        store.retag(F, "reg.example.com/tripleo/mariadb:3.0")
    assert "pull it onto n1" in caught.value.fix
    assert store.log == []


def test_apply_refuses_to_take_the_only_name_unless_last_ok() -> None:
    store = DictStore({R: C, F: A})
    with pytest.raises(StoreError) as caught:
        store.apply([TagOp("untag", C, parse(R))])
    assert "only name" in caught.value.message and store.names == {R: C, F: A}
    store.apply([TagOp("untag", C, parse(R), last_ok=True)])
    assert store.names == {F: A}


def test_prune_removes_the_selection_and_keeps_what_the_store_refuses() -> None:
    store = DictStore({F: A, REAL_A: A, REAL_B: B, "reg.example.com/tripleo/mariadb:0.9": C})
    store.refuse = frozenset({C})
    pruned = store.prune("mariadb", keep=0)
    assert (pruned.removed, pruned.protected) == ((B,), (A,))
    assert pruned.kept == (C,)  # podman refused: kept, not removed
    assert store.log == ["remove b"]
    store.in_use = {C}
    store.refuse = frozenset()
    assert store.prune("mariadb", keep=0).protected == (A, C)
    with pytest.raises(InvalidName):
        store.prune("MariaDB")


def test_prune_keeps_an_image_that_got_another_name_since_the_listing() -> None:
    class Racing(DictStore):
        def images(self) -> tuple[ImageInfo, ...]:
            listed = super().images()
            self.names["cluster.common.tag/galera:pcmklatest"] = B  # another service's retag
            return listed

    store = Racing({F: A, REAL_A: A, REAL_B: B, "reg.example.com/tripleo/mariadb:0.9": C})
    pruned = store.prune("mariadb", keep=0)
    assert (pruned.removed, pruned.kept) == ((C,), (B,))
    assert store.names["cluster.common.tag/galera:pcmklatest"] == B and store.log == ["remove c"]


def test_resolve() -> None:
    store = DictStore({F: A, REAL_A: A})
    found = store.resolve(F)
    assert found.image.names == (F, REAL_A)  # type: ignore[union-attr]
    assert store.resolve(R).name == R  # Unresolved
    with pytest.raises(InvalidName):
        store.resolve("Not A Name")
