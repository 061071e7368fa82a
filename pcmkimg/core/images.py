"""What the node image stores hold and how their failures are told apart: pure.

The types the two store adapters share (:mod:`pcmkimg.adapters.localstore` for the agent,
:mod:`pcmkimg.adapters.podman` for the command), the error kinds with their fixes, and the
rules on plain data: which pull failures are transient, the backoff, digests, downtime, the
name moves of a retag and of its undo (:func:`retag_plan`, :func:`restore_plan`: lists of
:class:`TagOp`) and which images a prune removes (:func:`prune_selection`).
Standard library only, and no typing at run time: the agent's monitor imports it.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

from pcmkimg.errors import Unreachable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Literal, Union

    from pcmkimg.core.naming import Scheme
    from pcmkimg.core.reference import Reference


# ---------------------------------------------------------------------------------------------
# Errors: one type per failure kind.


class ImageError(Unreachable):
    """A podman image operation on a node failed. ``node`` and ``ref`` say where and what."""

    def __init__(self, message: str, fix: str = "", *, node: str, ref: object = None) -> None:
        self.node = node
        self.ref = None if ref is None else str(ref)
        self.detail = message
        """The message without the node and the reference."""
        about = f" ({self.ref})" if self.ref is not None else ""
        super().__init__(f"node {node}{about}: {message}", fix)


class NodeUnreachable(ImageError):
    """The node's podman API service cannot be reached."""


class SocketDown(NodeUnreachable):
    """The local podman API socket (``unix://``) does not answer: pcmkimg can't reach that
    store, and the guard there falls back to the slower podman command."""


class NodesUnreachable(Unreachable):
    """One or more nodes' image stores can't be reached."""


class StoreError(ImageError):
    """The podman service refused a store operation (tag, untag, remove)."""


class PodmanCommandFailed(ImageError):
    """The ``podman`` command (the local fallback) failed."""


# ---------------------------------------------------------------------------------------------
# Results.


@dataclass(frozen=True)
class ImageInfo:
    """One image of a store, as podman inspects it."""

    id: str
    """64 hex digits, no ``sha256:``."""
    digest: str | None
    repo_digests: tuple[str, ...]
    names: tuple[str, ...]
    """Every name (RepoTags) the image holds now."""
    names_history: tuple[str, ...] = ()
    """Every name the image has held, newest first (podman's NamesHistory)."""
    created: datetime | None = None


@dataclass(frozen=True)
class Resolved:
    """A name found in a node's store, and the image it names."""

    node: str
    name: str
    image: ImageInfo

    @property
    def id(self) -> str:
        return self.image.id

    @property
    def image_id(self) -> str:
        """The same as :attr:`id`."""
        return self.image.id

    @property
    def names(self) -> tuple[str, ...]:
        """Every name of the image, the resolved one included."""
        return self.image.names

    @property
    def digest(self) -> str | None:
        return self.image.digest

    @property
    def repo_digests(self) -> tuple[str, ...]:
        return self.image.repo_digests

    @property
    def created(self) -> datetime | None:
        return self.image.created

    @property
    def other_names(self) -> tuple[str, ...]:
        """The image's names other than the one resolved: its real names."""
        return tuple(n for n in self.image.names if n != self.name)


@dataclass(frozen=True)
class Unresolved:
    """A name that is not in a node's store (the normal "not here" answer)."""

    node: str
    name: str
    reason: str = "no image has this name"


if TYPE_CHECKING:
    Resolution = Union[Resolved, Unresolved]


# ---------------------------------------------------------------------------------------------
# Reading podman's answers.


_CREATED = re.compile(
    r"(?P<date>\d{4}-\d\d-\d\d)[T ](?P<time>\d\d:\d\d:\d\d)(?:\.(?P<frac>\d+))?"
    r"\s*(?P<tz>Z|[+-]\d\d:?\d\d)?(?:\s+[A-Z]+)?"
)


def parse_created(value: object) -> datetime | None:
    """An image's creation time from podman (RFC 3339 with nanoseconds, or Unix seconds)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return datetime.fromtimestamp(value, timezone.utc)
    if not isinstance(value, str):
        return None
    found = _CREATED.fullmatch(value.strip())
    if not found:
        return None
    frac = (found["frac"] or "0")[:6].ljust(6, "0")
    tz = found["tz"] or "Z"
    tz = "+00:00" if tz == "Z" else tz if ":" in tz else f"{tz[:3]}:{tz[3:]}"
    return datetime.fromisoformat(f"{found['date']}T{found['time']}.{frac}{tz}")


def image_info(attrs: Mapping[str, Any]) -> ImageInfo:
    """An ImageInfo from podman's image inspect data (API or ``podman image inspect``)."""
    image_id = str(attrs.get("Id") or attrs.get("ID") or "")
    if image_id.startswith("sha256:"):
        image_id = image_id[len("sha256:") :]
    return ImageInfo(
        id=image_id,
        digest=attrs.get("Digest") or None,
        repo_digests=tuple(attrs.get("RepoDigests") or ()),
        names=tuple(attrs.get("RepoTags") or ()),
        names_history=tuple(attrs.get("NamesHistory") or ()),
        created=parse_created(attrs.get("Created")),
    )


class UnexpectedAnswer(ValueError):
    """An answer of ``GET /images/NAME/json`` that is neither 404 nor a 200 JSON object."""


def inspect_answer(code: int, body: bytes) -> ImageInfo | None:
    """What an answer of podman's ``GET /images/NAME/json`` says: the image, or None for 404
    (no image has the name); :class:`UnexpectedAnswer` for any other answer."""
    import json

    if code == 404:
        return None
    try:
        data = json.loads(body) if code == 200 else None
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise UnexpectedAnswer(code)
    return image_info(data)


# ---------------------------------------------------------------------------------------------
# More errors.


class InvalidName(ImageError):
    """A name given to the store is not a valid reference, or not one usable here."""


class ImageAbsent(ImageError):
    """A name that must be in the node's store is not there."""


# ---------------------------------------------------------------------------------------------
# More results.


@dataclass(frozen=True)
class PullProgress:
    """One progress report of :meth:`Store.pull`."""

    node: str
    ref: str
    kind: Literal["cached", "status", "retry", "done"]
    text: str
    attempt: int = 1


@dataclass(frozen=True)
class Pulled:
    """The outcome of a pull: what the reference now names, and how it got there."""

    resolved: Resolved
    cached: bool
    """True when the exact digest was already in the store and the network was not used."""
    attempts: int


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


@dataclass(frozen=True)
class Pruned:
    """What :meth:`Store.prune` removed and why it left the others."""

    node: str
    service: str
    removed: tuple[str, ...]
    kept: tuple[str, ...]
    protected: tuple[str, ...]
    """Images that hold a name of the scheme (any service's), a legacy ``:pcmklatest`` name or
    a name outside the service's repositories, or that a container uses."""


@dataclass(frozen=True)
class Container:
    """A container of a node and the image it runs."""

    name: str
    id: str
    image: str
    image_id: str
    state: str


# ---------------------------------------------------------------------------------------------
# Pure helpers (unit-tested with plain data).


def has_digest(image: ImageInfo, name: str, digest: str) -> bool:
    """Whether ``image`` is the manifest ``digest`` of repository ``name``."""
    return f"{name}@{digest}" in image.repo_digests


def downtime(events: Sequence[tuple[float, str]], since: float) -> float | None:
    """Seconds a container was down in ``events`` ((epoch time, action), podman's container
    events of one name): from the first death at or after ``since`` to the next start. None
    when the events do not show both."""
    ordered = sorted(e for e in events if e[0] >= since)
    died = next((t for t, action in ordered if action == "died"), None)
    if died is None:
        died = next((t for t, action in ordered if action == "stop"), None)
    if died is None:
        return None
    started = next((t for t, action in ordered if action == "start" and t >= died), None)
    return None if started is None else round(started - died, 3)


def _repository(name: str) -> str | None:
    from pcmkimg.core.reference import InvalidReference, parse

    try:
        return parse(name).name
    except InvalidReference:
        return None


# ---------------------------------------------------------------------------------------------
# Name moves as plans: what the store holds in, the tag operations out.

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


@dataclass(frozen=True)
class PruneSelection:
    """Which images of a service a prune removes, keeps and never touches."""

    remove: tuple[ImageInfo, ...]
    keep: tuple[ImageInfo, ...]
    protected: tuple[ImageInfo, ...]
    """Images of the service that hold a name of the scheme (any service's), a legacy
    ``:pcmklatest`` name or a name outside the service's repositories, or that a container
    uses."""


def _pcmkimg_name(name: str, scheme: Scheme) -> bool:
    """A name of the scheme (any service's floating, rollback or hold name), a legacy
    ``REPO:pcmklatest`` name, or one that is not a valid reference (never ours to take off)."""
    from pcmkimg.core.naming import LEGACY_TAG
    from pcmkimg.core.reference import InvalidReference, parse

    try:
        ref = parse(name)
    except InvalidReference:
        return True
    return ref.name.startswith(f"{scheme.prefix}/") or ref.tag in (
        LEGACY_TAG,
        scheme.tag,
        scheme.rollback_tag,
        HOLD_TAG,
    )


def prune_selection(
    images: Sequence[ImageInfo],
    own: Collection[str],
    in_use: Collection[str],
    keep: int,
    scheme: Scheme | None = None,
) -> PruneSelection:
    """The images of a service to remove: all but the ``keep`` newest that are not protected.

    ``own`` are the service's floating and rollback names, ``in_use`` the image IDs of the
    node's containers, ``scheme`` the floating-name scheme (default: the default one). The
    service's repositories are those of ``own`` and of every name (now or before) of an image
    that holds or held one of ``own``; its images are those with a name (now or before) in
    one of them. Protected, so never removed: an image that holds any name of the scheme (any
    service's floating, rollback or hold name) or a legacy ``:pcmklatest`` name, one that a
    container uses, and one that holds a name outside the service's repositories (a prune
    never takes such a name off). Newest first by creation time, then by ID.
    """
    if scheme is None:
        from pcmkimg.core.naming import DEFAULT_SCHEME

        scheme = DEFAULT_SCHEME
    own_repos = {_repository(n) for n in own}

    def repos(image: ImageInfo) -> set[str | None]:
        return {_repository(n) for n in (*image.names, *image.names_history)}

    related = set(own_repos)
    for image in images:
        if repos(image) & own_repos:
            related |= repos(image)
    related.discard(None)
    mine = [image for image in images if repos(image) & related]

    def untouchable(image: ImageInfo) -> bool:
        return (
            image.id in in_use
            or any(_pcmkimg_name(n, scheme) for n in image.names)
            or any(_repository(n) not in related for n in image.names)
        )

    protected = [i for i in mine if untouchable(i)]
    rest = sorted(
        (i for i in mine if i not in protected),
        key=lambda i: (i.created or datetime.min.replace(tzinfo=timezone.utc), i.id),
        reverse=True,
    )
    count = max(0, keep)
    return PruneSelection(tuple(rest[count:]), tuple(rest[:count]), tuple(protected))


def containers_from(rows: object) -> tuple[Container, ...]:
    """The containers of podman's ``GET /containers/json`` answer (a list of objects)."""
    return tuple(
        Container(
            name=(row.get("Names") or [""])[0],
            id=row.get("Id", ""),
            image=row.get("Image", ""),
            image_id=row.get("ImageID", ""),
            state=str(row.get("State", "")),
        )
        for row in (rows if isinstance(rows, list) else ())
        if isinstance(row, dict)
    )
