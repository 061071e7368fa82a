"""What a node's image store holds, and what podman's answers say it holds: pure.

The records the store adapters share (:mod:`pcmkimg.adapters.localstore` for the agent,
:mod:`pcmkimg.adapters.podman` for the command, :mod:`pcmkimg.adapters.storeview` for status):
an image, a name resolved or not, a container, the outcome of a pull or a prune; the readers of
podman's answers; and two rules on plain data (:func:`has_digest`, :func:`downtime`). The error
kinds are in :mod:`pcmkimg.core.errors`, the name moves of a retag and of its undo in
:mod:`pcmkimg.core.tagplan`, which images a prune removes in :mod:`pcmkimg.core.prune`.
Standard library only, and no typing at run time: the agent's monitor imports it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone

from pcmkimg.core.errors import UnexpectedAnswer
from pcmkimg.records import dataclass

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Literal, Union


# ---------------------------------------------------------------------------------------------
# Records: what a store holds, and what its operations did.


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


# ---------------------------------------------------------------------------------------------
# Rules on plain data.


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
