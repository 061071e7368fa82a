"""The store's rules on plain data: the retag and restore plans, the prune selection, the
rollback name of a floating name (pcmkimg.core.tagplan, pcmkimg.core.prune,
pcmkimg.core.naming).

A plan is checked twice: its operations as listed, and what they do when made one by one on a
store of names (:func:`run`): where every name ends, and that no image that had a name is left
without one on the way (podman would remove nothing, but the image would be hard to find).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timezone

import pytest

from pcmkimg.core import naming
from pcmkimg.core.errors import ImageAbsent
from pcmkimg.core.images import ImageInfo
from pcmkimg.core.prune import prune_selection
from pcmkimg.core.reference import parse
from pcmkimg.core.tagplan import HOLD_TAG, Retagged, TagOp, restore_plan, retag_plan

NODE = "controller-0"
FLOATING = parse("cluster.common.tag/mariadb:pcmklatest")
BACK = parse("cluster.common.tag/mariadb:pcmkprevious")
HOLD = BACK.with_tag(HOLD_TAG)
A, B, C = "a" * 64, "b" * 64, "c" * 64
REAL = {A: "reg.example.com/tripleo/mariadb:1.0", B: "reg.example.com/tripleo/mariadb:2.0"}


def info(image_id: str, names: Mapping[str, str]) -> ImageInfo:
    return ImageInfo(
        image_id, None, (), tuple(sorted(n for n, i in names.items() if i == image_id))
    )


def holder(name: object, names: Mapping[str, str]) -> ImageInfo | None:
    found = names.get(str(name))
    return None if found is None else info(found, names)


def run(ops: Sequence[TagOp], names: Mapping[str, str], *, may_lose: str | None = None) -> dict:
    """The names after ``ops``, made in order as podman makes them. Fails when an image that
    had a name has none after an operation (but ``may_lose``, the released image, at the end),
    or when an untag refused by the store (the image's only name, without last_ok) is planned."""
    now = dict(names)
    named = set(now.values())
    for op in ops:
        if op.verb == "tag":
            now[str(op.name)] = op.image_id
        else:
            assert now.get(str(op.name)) == op.image_id, f"{op.name} is not on {op.image_id}"
            others = [n for n, i in now.items() if i == op.image_id and n != str(op.name)]
            assert others or op.last_ok, f"{op} takes the only name"
            del now[str(op.name)]
        lost = named - set(now.values()) - {may_lose}
        assert not lost, f"after {op}: {lost} left without a name"
        named |= set(now.values())
    return now


def retag(names: Mapping[str, str], target: str) -> tuple[tuple[TagOp, ...], Retagged]:
    return retag_plan(
        NODE,
        FLOATING,
        BACK,
        target=info(target, names),
        current=holder(FLOATING, names),
        holder=holder(BACK, names),
    )


def restore(done: Retagged, names: Mapping[str, str]) -> tuple[TagOp, ...]:
    return restore_plan(
        done, FLOATING, BACK, now=holder(FLOATING, names), holder=holder(BACK, names)
    )


def tag(image_id: str, name: object) -> TagOp:
    return TagOp("tag", image_id, parse(str(name)))


def untag(image_id: str, name: object, *, last_ok: bool = False) -> TagOp:
    return TagOp("untag", image_id, parse(str(name)), last_ok)


# The stores before a retag to B: (names -> ID, the ops, the Retagged fields, the names after).
F, R = str(FLOATING), str(BACK)
CASES = {
    "no floating name yet": (
        {REAL[A]: A, REAL[B]: B},
        [tag(B, F)],
        dict(old_id=None, rollback=None, rollback_before=None, released_id=None),
        {REAL[A]: A, REAL[B]: B, F: B},
    ),
    "normal move": (
        {REAL[A]: A, F: A, REAL[B]: B},
        [tag(A, R), tag(B, F)],
        dict(old_id=A, rollback=R, rollback_before=None, released_id=None),
        {REAL[A]: A, R: A, REAL[B]: B, F: B},
    ),
    "rollback name already on the old image": (
        {REAL[A]: A, F: A, R: A, REAL[B]: B},
        [tag(B, F)],
        dict(old_id=A, rollback=R, rollback_before=A, released_id=None),
        {REAL[A]: A, R: A, REAL[B]: B, F: B},
    ),
    "rollback name on an older image with another name": (
        {REAL[A]: A, F: A, REAL[B]: B, "reg.example.com/tripleo/mariadb:0.9": C, R: C},
        [tag(A, R), tag(B, F)],
        dict(old_id=A, rollback=R, rollback_before=C, released_id=None),
        {REAL[A]: A, R: A, REAL[B]: B, F: B, "reg.example.com/tripleo/mariadb:0.9": C},
    ),
    "older image whose only name was the rollback name is released": (
        {REAL[A]: A, F: A, REAL[B]: B, R: C},
        [tag(A, R), tag(B, F)],
        dict(old_id=A, rollback=R, rollback_before=C, released_id=C),
        {REAL[A]: A, R: A, REAL[B]: B, F: B},
    ),
    "swap with the rollback image whose only name is the rollback name": (
        {F: A, R: B},
        [tag(B, HOLD), tag(A, R), tag(B, F), untag(B, HOLD, last_ok=True)],
        dict(old_id=A, rollback=R, rollback_before=B, released_id=None),
        {R: A, F: B},
    ),
    "swap with a rollback image that has another name": (
        {F: A, R: B, REAL[B]: B},
        [tag(A, R), tag(B, F)],
        dict(old_id=A, rollback=R, rollback_before=B, released_id=None),
        {R: A, F: B, REAL[B]: B},
    ),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_retag_plan(case: str) -> None:
    before, ops, fields, after = CASES[case]
    planned, done = retag(before, B)
    assert list(planned) == ops
    assert (done.node, done.floating, done.new_id, done.moved) == (NODE, F, B, True)
    assert done.rollback_name == R
    assert {k: getattr(done, k) for k in fields} == fields
    assert run(planned, before, may_lose=done.released_id) == after


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_restore_plan_puts_both_names_back_exactly(case: str) -> None:
    before = CASES[case][0]
    planned, done = retag(before, B)
    moved = run(planned, before, may_lose=done.released_id)
    if done.old_id is None:
        with pytest.raises(ImageAbsent) as caught:
            restore(done, moved)
        assert caught.value.node == NODE and "nothing to go back to" in caught.value.fix
        return
    assert run(restore(done, moved), moved) == before


def test_rerun_of_a_retag_is_a_no_op() -> None:
    names = {REAL[A]: A, R: A, REAL[B]: B, F: B}
    planned, done = retag(names, B)
    assert planned == ()
    assert (done.old_id, done.new_id, done.moved) == (B, B, False)
    assert (done.rollback, done.rollback_name, done.rollback_before) == (None, R, A)
    assert restore(done, names) == (), "nothing moved: nothing to undo"


def test_restore_with_a_rollback_image_before() -> None:
    done = Retagged(NODE, F, A, B, True, R, None, R, rollback_before=C)
    names = {REAL[A]: A, R: A, REAL[B]: B, F: B, "reg.example.com/tripleo/mariadb:0.9": C}
    planned = restore(done, names)
    assert list(planned) == [
        tag(B, HOLD),
        tag(A, F),
        tag(C, R),
        untag(B, HOLD, last_ok=True),
    ]


def test_restore_without_a_rollback_image_before_takes_the_rollback_name_off() -> None:
    done = Retagged(NODE, F, A, B, True, R, None, R, rollback_before=None)
    names = {REAL[A]: A, R: A, REAL[B]: B, F: B}
    planned = restore(done, names)
    assert list(planned) == [tag(B, HOLD), tag(A, F), untag(A, R), untag(B, HOLD, last_ok=True)]
    assert run(planned, names) == {REAL[A]: A, F: A, REAL[B]: B}


def test_restore_names_the_released_image_again() -> None:
    before = {REAL[A]: A, F: A, REAL[B]: B, R: C}
    planned, done = retag(before, B)
    assert done.released_id == C
    moved = run(planned, before, may_lose=C)
    assert C not in moved.values()
    assert tag(C, R) in restore(done, moved)
    assert run(restore(done, moved), moved) == before


def test_restore_when_the_floating_name_is_back_already_needs_no_hold() -> None:
    done = Retagged(NODE, F, A, B, True, R, None, R, rollback_before=None)
    names = {F: A, R: A, REAL[A]: A, REAL[B]: B}
    assert list(restore(done, names)) == [tag(A, F), untag(A, R)]


def test_restore_when_the_floating_name_named_nothing_before() -> None:
    done = Retagged(NODE, F, None, B, True, None, None, R, rollback_before=None)
    with pytest.raises(ImageAbsent) as caught:
        restore(done, {F: B})
    assert F in caught.value.message


# --------------------------------------------------------------------------- prune


def at(day: int) -> datetime:
    return datetime(2026, 1, day, tzinfo=timezone.utc)


def image(image_id: str, *names: str, history: tuple[str, ...] = (), day: int | None = None):
    created = at(day) if day is not None else None
    return ImageInfo(image_id, None, (), names, names_history=history, created=created)


OWN = {F, R}
SVC = "reg.example.com/tripleo/mariadb"
FLOAT_IMG = image("1" * 64, f"{SVC}:2.0", F, day=10)
BACK_IMG = image("2" * 64, f"{SVC}:1.0", R, day=9)
USED = image("3" * 64, f"{SVC}:broken", day=20)
OLD = image("4" * 64, f"{SVC}:0.9", day=5)
OLDER = image("5" * 64, f"{SVC}:0.8", day=4)
UNDATED = image("6" * 64, f"{SVC}:0.1")
# Named once by the floating name, now only by a name in another repository: related, and
# that repository's other image too.
WAS_OURS = image("7" * 64, "reg.example.com/mirror/maria:x", history=(F,), day=6)
MIRROR = image("8" * 64, "reg.example.com/mirror/maria:y", day=7)
OTHER = image("9" * 64, "reg.example.com/other/app:1", day=30)
DANGLING = image("0" * 64, day=1)
ALL = (FLOAT_IMG, BACK_IMG, USED, OLD, OLDER, UNDATED, WAS_OURS, MIRROR, OTHER, DANGLING)


def ids(images: Sequence[ImageInfo]) -> tuple[str, ...]:
    return tuple(i.id for i in images)


def test_prune_selection_keeps_the_newest_and_protects_names_and_containers() -> None:
    chosen = prune_selection(sorted(ALL, key=lambda i: i.id), OWN, {USED.id}, keep=1)
    assert set(ids(chosen.protected)) == {FLOAT_IMG.id, BACK_IMG.id, USED.id}
    assert ids(chosen.keep) == (MIRROR.id,)
    # newest first; an image without a creation time counts as the oldest
    assert ids(chosen.remove) == (WAS_OURS.id, OLD.id, OLDER.id, UNDATED.id)


def test_prune_selection_with_nothing_kept_and_ties_by_id() -> None:
    twin = image("f" * 64, f"{SVC}:0.9b", day=5)
    chosen = prune_selection((OLD, twin, FLOAT_IMG), OWN, set(), keep=0)
    assert ids(chosen.protected) == (FLOAT_IMG.id,)
    assert chosen.keep == () and ids(chosen.remove) == (twin.id, OLD.id)
    assert prune_selection((OLD, FLOAT_IMG), OWN, set(), keep=-3).remove == (OLD,)


def test_prune_selection_of_a_service_without_images() -> None:
    chosen = prune_selection((OTHER, DANGLING), OWN, {OTHER.id}, keep=1)
    assert (chosen.remove, chosen.keep, chosen.protected) == ((), (), ())


def test_prune_selection_leaves_every_name_of_another_service_and_outside_its_repositories():
    # galera shares mariadb's repository; galera is stopped (no container uses its images).
    galera_f, galera_r = (
        "cluster.common.tag/galera:pcmklatest",
        "cluster.common.tag/galera:pcmkprevious",
    )
    theirs = image("a1" * 32, f"{SVC}:0.7", galera_f, day=3)
    their_back = image("a2" * 32, f"{SVC}:0.6", galera_r, day=2)
    legacy = image("a3" * 32, f"{SVC}:0.5", f"{SVC}:pcmklatest", day=8)
    held = image("a4" * 32, "cluster.common.tag/galera:pcmkhold", history=(F,), day=8)
    shared = image("a5" * 32, f"{SVC}:0.4", "reg.example.com/team-b/tool:4", day=8)
    mine = (FLOAT_IMG, BACK_IMG, OLD, OLDER)
    every = (*mine, theirs, their_back, legacy, held, shared)
    chosen = prune_selection(every, OWN, set(), keep=0)
    assert set(ids(chosen.remove)) == {OLD.id, OLDER.id}
    untouchable = {theirs, their_back, legacy, held, shared}
    assert untouchable <= set(chosen.protected)
    # The other service's prune, in turn, leaves mariadb's names alone.
    other = prune_selection(every, {galera_f, galera_r}, set(), keep=0)
    assert {FLOAT_IMG, BACK_IMG, legacy, held, shared} <= set(other.protected)
    assert set(ids(other.remove)) == {OLD.id, OLDER.id}
    # Whatever is removed has only names in the service's own repositories.
    for gone in (*chosen.remove, *other.remove):
        assert all(n.startswith(f"{SVC}:") for n in gone.names)


def test_prune_selection_protects_the_names_of_a_configured_scheme() -> None:
    scheme = naming.Scheme("pcmk.example.org/img", "cur", "prev")
    own = {"pcmk.example.org/img/mariadb:cur", "pcmk.example.org/img/mariadb:prev"}
    current = image("b1" * 32, f"{SVC}:2.0", "pcmk.example.org/img/mariadb:cur", day=9)
    theirs = image("b2" * 32, f"{SVC}:1.0", "pcmk.example.org/img/galera:cur", day=5)
    old = image("b3" * 32, f"{SVC}:0.1", day=1)
    chosen = prune_selection((current, theirs, old), own, set(), keep=0, scheme=scheme)
    assert (ids(chosen.remove), set(chosen.protected)) == ((old.id,), {current, theirs})


# --------------------------------------------------------------------------- rollback name


@pytest.mark.parametrize(
    ("floating", "expected"),
    [
        (F, R),
        ("cluster.common.tag/mariadb:pcmkprevious", R),
        ("reg.example.com:8787/tripleo/mariadb:pcmklatest", R),  # legacy
        ("reg.example.com/tripleo/redis:17.1", "cluster.common.tag/redis:pcmkprevious"),
    ],
)
def test_rollback_for(floating: str, expected: str) -> None:
    assert str(naming.rollback_for(parse(floating))) == expected


def test_rollback_for_in_a_configured_scheme() -> None:
    scheme = naming.Scheme("pcmk.example/floating", "live", "before")
    found = naming.rollback_for(parse("pcmk.example/floating/redis:live"), scheme)
    assert str(found) == "pcmk.example/floating/redis:before"
