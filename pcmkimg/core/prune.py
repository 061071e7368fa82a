"""Which images of a service a prune removes, keeps and never touches: pure.

:func:`prune_selection` judges a store's images on plain data (their names now and before,
their creation times, the containers' image IDs) against the floating-name scheme;
:meth:`pcmkimg.core.store.StorePort.prune` removes what it selects.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime, timezone

from pcmkimg.core.errors import InvalidReference
from pcmkimg.core.naming import DEFAULT_SCHEME, LEGACY_TAG, Scheme
from pcmkimg.core.reference import (
    parse,
)
from pcmkimg.core.tagplan import HOLD_TAG
from pcmkimg.records import dataclass

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pcmkimg.core.images import ImageInfo


def repository_of(name: str) -> str | None:
    """The repository of ``name`` (a reference without its tag and digest); None when it is
    not a valid reference."""
    try:
        return parse(name).name
    except InvalidReference:
        return None


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
        scheme = DEFAULT_SCHEME
    own_repos = {repository_of(n) for n in own}

    def repos(image: ImageInfo) -> set[str | None]:
        return {repository_of(n) for n in (*image.names, *image.names_history)}

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
            or any(repository_of(n) not in related for n in image.names)
        )

    protected = [i for i in mine if untouchable(i)]
    rest = sorted(
        (i for i in mine if i not in protected),
        key=lambda i: (i.created or datetime.min.replace(tzinfo=timezone.utc), i.id),
        reverse=True,
    )
    count = max(0, keep)
    return PruneSelection(tuple(rest[count:]), tuple(rest[:count]), tuple(protected))
