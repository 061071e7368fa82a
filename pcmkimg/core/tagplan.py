"""Name moves as plans: what a node's store holds in, the tag operations out; pure.

:func:`retag_plan` points a floating name at another image and keeps the old one under the
rollback name; :func:`restore_plan` undoes it from its :class:`Retagged`; :func:`unswap_plan`
takes a swap that stopped half-way back. Each is a list of :class:`TagOp` that leaves no image
without a name on the way; :class:`pcmkimg.core.store.StorePort` applies them through a store's
primitives. Standard library only, and no typing at run time: :mod:`pcmkimg.core.images`
re-exports these names for the callers that import them from there.
"""

from __future__ import annotations

from pcmkimg.core.errors import ImageAbsent
from pcmkimg.records import dataclass

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Literal

    from pcmkimg.core.images import ImageInfo
    from pcmkimg.core.reference import Reference

HOLD_TAG = "pcmkhold"
"""A short-lived tag that keeps an image named while its only name moves (see retag_plan)."""


@dataclass(frozen=True)
class TagOp:
    """One name change: give ``name`` to the image (podman moves it from any image that holds
    it), or take it off."""

    verb: Literal["tag", "untag"]
    image_id: str
    name: Reference
    last_ok: bool = False
    """For an untag: the name may be the image's last (a hold name on an image that had none);
    otherwise taking an image's only name off is refused."""


@dataclass(frozen=True)
class Retagged:
    """What :meth:`Store.retag` changed, and what :meth:`Store.restore` needs to undo it."""

    node: str
    floating: str
    old_id: str | None
    new_id: str
    moved: bool
    rollback: str | None = None
    """The rollback name, when it now names the old image."""
    released_id: str | None = None
    """An older image that lost its last name (the rollback name) and is now dangling."""
    rollback_name: str | None = None
    """The rollback name, moved or not."""
    rollback_before: str | None = None
    """The image ID the rollback name named before the retag (None: it named none)."""


def retag_plan(
    node: str,
    floating: Reference,
    rollback: Reference,
    *,
    target: ImageInfo,
    current: ImageInfo | None,
    holder: ImageInfo | None,
) -> tuple[tuple[TagOp, ...], Retagged]:
    """The tag operations that point ``floating`` at ``target`` and keep the old image as
    ``rollback``, and what they change.

    ``current`` is the image ``floating`` names now, ``holder`` the one ``rollback`` names
    (None: no image). The floating name moves in one operation, so it never disappears. The
    old image gets the rollback name first. No image is left without a name on the way: when
    ``target``'s only name is the rollback name (a swap), a hold name keeps it named. An older
    image whose only name was the rollback name loses it (``released_id``). Nothing to do when
    ``floating`` names ``target`` already.
    """
    back = str(rollback)
    before = holder.id if holder is not None else None
    if current is not None and current.id == target.id:
        unmoved = Retagged(
            node,
            str(floating),
            current.id,
            target.id,
            moved=False,
            rollback_name=back,
            rollback_before=before,
        )
        return (), unmoved
    released = None
    if current is not None and (holder is None or holder.id != current.id):
        ops = [TagOp("tag", current.id, rollback), TagOp("tag", target.id, floating)]
        only_name = holder is not None and set(holder.names) <= {back}
        if only_name and holder is not None and holder.id == target.id:
            ops = _held(target.id, rollback, ops)
        elif only_name and holder is not None:
            released = holder.id
    else:  # no old image, or the old image has the rollback name already
        ops = [TagOp("tag", target.id, floating)]
    done = Retagged(
        node,
        str(floating),
        current.id if current else None,
        target.id,
        moved=True,
        rollback=back if current else None,
        released_id=released,
        rollback_name=back,
        rollback_before=before,
    )
    return tuple(ops), done


def restore_plan(
    done: Retagged,
    floating: Reference,
    rollback: Reference,
    *,
    now: ImageInfo | None,
    holder: ImageInfo | None,
) -> tuple[TagOp, ...]:
    """The tag operations that put ``floating`` and ``rollback`` back where they were before
    ``done``.

    ``now`` is the image ``floating`` names now; ``holder`` the one ``rollback`` names now
    (needed only when the rollback name named no image before). The image the floating name
    moved to keeps a hold name meanwhile, so that no image is left without a name on the way
    (an image that had no name before has none after). Raises ImageAbsent when the floating
    name named no image before: there is nothing to go back to.
    """
    if not done.moved:
        return ()
    if done.old_id is None:
        raise ImageAbsent(
            f"{floating} named no image here before",
            "there is nothing to go back to",
            node=done.node,
            ref=floating,
        )
    ops = [TagOp("tag", done.old_id, floating)]
    if done.rollback_before is not None:
        ops.append(TagOp("tag", done.rollback_before, rollback))
    elif holder is not None:
        ops.append(TagOp("untag", holder.id, rollback))
    if now is not None and now.id != done.old_id:
        ops = _held(now.id, rollback, ops)
    return tuple(ops)


def unswap_plan(
    floating: Reference,
    rollback: Reference,
    *,
    held: ImageInfo,
    now: ImageInfo | None,
    holder: ImageInfo | None,
) -> tuple[TagOp, ...]:
    """The tag operations that take a swap of :func:`retag_plan` that stopped half-way (its
    target ``held``, whose only name was ``rollback``, still has the hold name) back to where
    it started: ``floating`` on the other image, ``rollback`` on ``held``, no hold name.

    ``now`` is the image ``floating`` names now, ``holder`` the one ``rollback`` names now.
    No image is left without a name on the way: ``held`` loses the hold name last.
    """
    other = next((i for i in (now, holder) if i is not None and i.id != held.id), None)
    ops = []
    if other is not None and (now is None or now.id != other.id):
        ops.append(TagOp("tag", other.id, floating))
    if holder is None or holder.id != held.id:
        ops.append(TagOp("tag", held.id, rollback))
    ops.append(TagOp("untag", held.id, rollback.with_tag(HOLD_TAG)))
    return tuple(ops)


def _held(image_id: str, rollback: Reference, ops: Sequence[TagOp]) -> list[TagOp]:
    """``ops`` with ``image_id`` kept named (the rollback name with the hold tag) meanwhile."""
    hold = rollback.with_tag(HOLD_TAG)
    return [TagOp("tag", image_id, hold), *ops, TagOp("untag", image_id, hold, last_ok=True)]
