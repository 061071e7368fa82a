"""The image store port: the primitives a node's store gives, and the name rules built on them.

A store gives primitives: inspect a name or an image ID, tag, untag, list the images and the
containers, remove an image (:class:`pcmkimg.adapters.podman.Store` does it over the podman
API; the unit tests' fake over a dict). :class:`StorePort` builds the rules on them:
:meth:`~StorePort.resolve`, :meth:`~StorePort.retag`, :meth:`~StorePort.restore` and
:meth:`~StorePort.prune` read what the store holds, ask the pure plans
(:func:`~pcmkimg.core.tagplan.retag_plan`, :func:`~pcmkimg.core.tagplan.restore_plan`,
:func:`~pcmkimg.core.prune.prune_selection`) what to change, and apply the answer through the
primitives. Nothing here talks to podman, so a fake that gives the primitives runs the same
rules as the real store.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Union

from pcmkimg.core import commands as cmd
from pcmkimg.core import naming
from pcmkimg.core.errors import ImageAbsent, InvalidName, InvalidReference, StoreError
from pcmkimg.core.images import Container, ImageInfo, Pruned, Resolved, Unresolved
from pcmkimg.core.naming import DEFAULT_SCHEME, Scheme
from pcmkimg.core.prune import prune_selection
from pcmkimg.core.reference import (
    Reference,
    parse,
)
from pcmkimg.core.tagplan import Retagged, TagOp, restore_plan, retag_plan

Resolution = Union[Resolved, Unresolved]

_IMAGE_ID = re.compile(r"[0-9a-f]{64}")


class StorePort(ABC):
    """One node's image store: the primitives (abstract) and the rules built on them."""

    node: str
    scheme: Scheme = DEFAULT_SCHEME
    """The floating-name scheme: the default rollback name, the names that prune keeps."""

    # -- the primitives ---------------------------------------------------------------------

    @abstractmethod
    def inspect(self, name: str) -> ImageInfo | None:
        """The image that ``name`` (a reference or an image ID) names, None when none does."""

    @abstractmethod
    def tag(self, image_id: str, ref: Reference) -> None:
        """Give ``ref`` to the image (it moves from any image that holds it)."""

    @abstractmethod
    def untag(self, image_id: str, ref: Reference) -> None:
        """Take ``ref`` off the image, even its last name (:meth:`apply` checks that)."""

    @abstractmethod
    def images(self) -> tuple[ImageInfo, ...]:
        """Every image of the store."""

    @abstractmethod
    def containers(self, *, running_only: bool = False) -> tuple[Container, ...]:
        """The node's containers (all, or only the running ones) with their image IDs."""

    @abstractmethod
    def remove(self, image: ImageInfo) -> bool:
        """Remove the image without force: False when the store refuses (e.g. now in use)."""

    # -- the rules --------------------------------------------------------------------------

    def resolve(self, floating: Reference | str) -> Resolution:
        """The image that ``floating`` names on this node, or Unresolved when none does."""
        name = str(self._parse(floating))
        found = self.inspect(name)
        if found is None:
            return Unresolved(self.node, name)
        return Resolved(self.node, name, found)

    def retag(
        self,
        floating: Reference | str,
        image: Reference | str,
        *,
        rollback: Reference | str | None = None,
    ) -> Retagged:
        """Point ``floating`` at ``image`` (a name, or an image ID); keep the old image as
        ``rollback``.

        The floating name moves in one call, so it never disappears. The old image gets the
        rollback name first (default: the scheme's rollback name of the service). No image is
        removed, and no image is left without a name on the way, except an older image whose
        only name was the rollback name (reported as ``released_id``). Running it again
        changes nothing. :meth:`restore` undoes it exactly. The moves are
        :func:`~pcmkimg.core.tagplan.retag_plan`'s.
        """
        name, back = self._scheme_names(floating, rollback)
        target = self._target(image)
        current = self.inspect(str(name))
        holder = self.inspect(str(back))
        ops, done = retag_plan(self.node, name, back, target=target, current=current, holder=holder)
        self.apply(ops)
        return done

    def restore(self, done: Retagged) -> None:
        """Put the floating and the rollback name back where they were before ``done``.

        No image is left without a name on the way (see
        :func:`~pcmkimg.core.tagplan.restore_plan`). Raises ImageAbsent when the floating name
        named no image before: there is nothing to go back to (the caller says what then).
        """
        if not done.moved:
            return
        name, back = self._scheme_names(done.floating, done.rollback_name)
        known = done.old_id is not None  # else restore_plan refuses: nothing to look at
        now = self.inspect(str(name)) if known else None
        holder = self.inspect(str(back)) if known and done.rollback_before is None else None
        self.apply(restore_plan(done, name, back, now=now, holder=holder))

    def apply(self, ops: Iterable[TagOp]) -> None:
        """Make the tag operations in order; an untag that would take an image's only name
        off is refused (StoreError) unless the operation says ``last_ok``."""
        for op in ops:
            if op.verb == "tag":
                self.tag(op.image_id, op.name)
            elif op.last_ok:
                self.untag(op.image_id, op.name)
            else:
                self._untag(self._require(op.image_id), op.name)

    def prune(self, service: str, *, keep: int = 1) -> Pruned:
        """Remove old images of ``service``; keep the ``keep`` newest others.

        The images of a service are those that hold or held its floating or rollback name, and
        every image with a name (now or before) in a repository of theirs. Never removed: an
        image that holds any name of the scheme (any service's floating or rollback name), a
        legacy ``:pcmklatest`` name or a name outside the service's repositories, or that any
        container uses (the rule is :func:`~pcmkimg.core.prune.prune_selection`). Each image
        is looked at again right before it goes: one that changed meanwhile is kept.
        """
        try:
            own = {
                str(naming.floating_name(service, self.scheme)),
                str(naming.rollback_name(service, self.scheme)),
            }
        except InvalidReference as err:
            raise InvalidName(err.message, err.fix, node=self.node, ref=service) from err
        images = self.images()
        in_use = {c.image_id for c in self.containers()}
        chosen = prune_selection(images, own, in_use, keep, self.scheme)
        kept, removed = list(chosen.keep), []
        for image in chosen.remove:
            now = self.inspect(image.id)
            if now is None:
                continue  # gone meanwhile
            if now.names != image.names or not self.remove(now):
                kept.append(image)
            else:
                removed.append(image.id)
        return Pruned(
            self.node,
            service,
            removed=tuple(removed),
            kept=tuple(i.id for i in kept),
            protected=tuple(i.id for i in chosen.protected),
        )

    # -- helpers ----------------------------------------------------------------------------

    def _parse(self, text: Reference | str) -> Reference:
        if isinstance(text, Reference):
            return text
        try:
            return parse(text)
        except InvalidReference as err:
            raise InvalidName(err.message, err.fix, node=self.node, ref=text) from err

    def _require(self, name: str) -> ImageInfo:
        found = self.inspect(name)
        if found is None:
            raise ImageAbsent(
                "the image is not in this node's store",
                f"pull it onto {self.node} first ({cmd.shown(cmd.podman_pull())} there)",
                node=self.node,
                ref=name,
            )
        return found

    def _untag(self, image: ImageInfo, ref: Reference) -> None:
        """Take ``ref`` off the image; refused if it is the image's only name."""
        if not [n for n in image.names if n != str(ref)]:
            raise StoreError(
                f"refusing to take the only name off image {image.id[:12]}",
                "give the image another name first",
                node=self.node,
                ref=ref,
            )
        self.untag(image.id, ref)

    def _scheme_names(
        self, floating: Reference | str, rollback: Reference | str | None
    ) -> tuple[Reference, Reference]:
        name = self._parse(floating)
        if name.tag is None or name.digest is not None:
            raise InvalidName(
                "a floating name needs a tag and no digest",
                "give it as PREFIX/SERVICE:TAG, e.g. cluster.common.tag/mariadb:pcmklatest",
                node=self.node,
                ref=name,
            )
        if rollback is not None:
            back = self._parse(rollback)
        else:
            back = naming.rollback_for(name, self.scheme)
        if back.tag is None or back.digest is not None or back == name:
            raise InvalidName(
                f"rollback name {back} must have a tag, no digest, and differ from {name}",
                "give a rollback name such as cluster.common.tag/mariadb:pcmkprevious",
                node=self.node,
                ref=back,
            )
        return name, back

    def _target(self, image: Reference | str) -> ImageInfo:
        """The image named by a reference, or by its ID (64 hex digits)."""
        if isinstance(image, str) and _IMAGE_ID.fullmatch(image):
            return self._require(image)
        return self._require(str(self._parse(image)))
