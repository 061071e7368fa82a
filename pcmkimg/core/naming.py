"""The floating-name scheme: which name in the CIB stands for which real image.

A bundle in the CIB names its image ``cluster.common.tag/<service>:pcmklatest`` (the *floating
name*). On each node that name is a local tag of the real image, e.g.
``reg:8787/ns/mariadb:17.1.2``. The previous image is kept as the *rollback name*
``cluster.common.tag/<service>:pcmkprevious``.

The prefix must start with a component that has a dot. Without one, podman reads the first
component as a path, not a registry, and stores ``cluster-common-tag/mariadb`` as
``localhost/cluster-common-tag/mariadb``: the name in the CIB would then never match the local
tag. TripleO hit this and moved from ``cluster-common-tag`` to ``cluster.common.tag``.

Before the common-tag scheme, TripleO used the *legacy* scheme: the real repository with the tag
``pcmklatest`` (``REG/NS/IMG:pcmklatest``). :func:`classify` recognises both, so that existing
clusters can be read, and :func:`migration_target` gives the common-tag name for a legacy one.
"""

from __future__ import annotations

from typing import Callable, Literal

from pcmkimg.core.errors import InvalidReference, InvalidScheme, NotFloatingName
from pcmkimg.core.reference import (
    Reference,
    parse,
    validate_domain,
    validate_path_component,
    validate_tag,
)
from pcmkimg.core.tagplan import HOLD_TAG
from pcmkimg.records import dataclass

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pcmkimg.core.images import Resolved

LEGACY_TAG = "pcmklatest"
"""The tag of TripleO's legacy floating names (``REG/NS/IMG:pcmklatest``)."""


@dataclass(frozen=True)
class Scheme:
    """How floating names are made: ``<prefix>/<service>:<tag>``.

    ``rollback_tag`` names the previous image: ``<prefix>/<service>:<rollback_tag>``.
    """

    prefix: str = "cluster.common.tag"
    tag: str = LEGACY_TAG
    rollback_tag: str = "pcmkprevious"

    def __post_init__(self) -> None:
        if not isinstance(self.prefix, str):
            raise InvalidScheme(f"the prefix must be a string, not {self.prefix!r}")
        registry, slash, path = self.prefix.partition("/")
        if "." not in registry:
            raise InvalidScheme(
                f"prefix {self.prefix!r}: its first component {registry!r} has no '.'; "
                + _why_no_dot(registry),
                fix="put a dot in the first component, e.g. 'cluster.common.tag' instead of "
                "'cluster-common-tag' (the change TripleO made)",
            )
        _check(f"prefix {self.prefix!r}", validate_domain, registry)
        for component in path.split("/") if slash else ():
            _check(f"prefix {self.prefix!r}", validate_path_component, component)
        _check("floating tag", validate_tag, self.tag)
        _check("rollback tag", validate_tag, self.rollback_tag)
        for what, value in (("floating tag", self.tag), ("rollback tag", self.rollback_tag)):
            if value == HOLD_TAG:
                raise InvalidScheme(
                    f"the {what} {value!r} is the internal hold tag: a retag or rollback gives "
                    "it to an image for a moment and takes it off again",
                    fix="choose another tag, e.g. 'pcmklatest' and 'pcmkprevious' (the defaults)",
                )
        if self.tag == self.rollback_tag:
            raise InvalidScheme(
                f"the floating tag and the rollback tag are both {self.tag!r}",
                fix="give the rollback tag another name, e.g. 'pcmkprevious'",
            )


def _why_no_dot(registry: str) -> str:
    if registry == "localhost":
        return (
            "'localhost' is where podman keeps images without a registry, so floating names "
            "would mix with local builds"
        )
    if ":" in registry:
        return "with only a port it names a registry that podman may try to pull from"
    return (
        "podman would store the floating names as 'localhost/<prefix>/<service>' and the name "
        "in the CIB would never match the local tag"
    )


def _check(what: str, validate: Callable[[str], str], value: str) -> None:
    try:
        validate(value)
    except InvalidReference as err:
        raise InvalidScheme(f"{what}: {err.message}", fix=err.fix) from err


DEFAULT_SCHEME = Scheme()


def _name(scheme: Scheme, service: str, tag: str) -> Reference:
    registry, _, path = scheme.prefix.partition("/")
    service = validate_path_component(service)
    return Reference(registry, f"{path}/{service}" if path else service, tag)


@dataclass(frozen=True)
class FloatingName:
    """A reference recognised as a floating (or rollback) name."""

    ref: Reference
    service: str
    scheme: Literal["common", "legacy"]
    rollback: bool = False


def service_of(real: Reference | str, service: str | None = None) -> str:
    """The service name for the real image: ``service`` if given, else its last component.

    Raises InvalidReference when ``real`` or ``service`` is not valid.
    """
    if service is not None:
        return validate_path_component(service)
    ref = real if isinstance(real, Reference) else parse(real)
    return ref.last_component


def floating_name(service: str, scheme: Scheme = DEFAULT_SCHEME) -> Reference:
    """The floating name of ``service``: ``<prefix>/<service>:<tag>``."""
    return _name(scheme, service, scheme.tag)


def rollback_name(service: str, scheme: Scheme = DEFAULT_SCHEME) -> Reference:
    """The rollback name of ``service``: ``<prefix>/<service>:<rollback_tag>``."""
    return _name(scheme, service, scheme.rollback_tag)


def rollback_for(floating: Reference, scheme: Scheme = DEFAULT_SCHEME) -> Reference:
    """The default rollback name of a floating name: ``<prefix>/<service>:<rollback_tag>``,
    the service being that of the floating name in ``scheme``, else its last component."""
    found = classify(floating, scheme)
    service = found.service if found else floating.last_component
    return rollback_name(service, scheme)


def classify(ref: Reference | str, scheme: Scheme = DEFAULT_SCHEME) -> FloatingName | None:
    """Recognise ``ref`` as a floating name of the common-tag or the legacy scheme.

    Returns None for any other reference, such as a real image, a name with a digest, or a name
    under the prefix with another tag or a deeper path. A string is parsed first (and may raise
    InvalidReference).
    """
    if not isinstance(ref, Reference):
        ref = parse(ref)
    if ref.digest is not None or ref.tag is None:
        return None
    parent, _, service = ref.name.rpartition("/")
    if ref.name.startswith(f"{scheme.prefix}/"):
        if parent != scheme.prefix or ref.tag not in (scheme.tag, scheme.rollback_tag):
            return None
        return FloatingName(ref, service, "common", rollback=ref.tag == scheme.rollback_tag)
    if ref.tag == LEGACY_TAG:
        return FloatingName(ref, service, "legacy")
    return None


def migration_target(legacy_name: Reference | str, scheme: Scheme = DEFAULT_SCHEME) -> Reference:
    """The common-tag floating name for the service of a legacy floating name.

    A name that already follows the common-tag scheme is returned as it is, so that a migration
    that is run again changes nothing. Raises NotFloatingName for any other reference.
    """
    found = classify(legacy_name, scheme)
    if found is None:
        raise NotFloatingName(
            f"{str(legacy_name)!r} is neither a floating name under {scheme.prefix!r} nor a "
            f"legacy floating name with the tag {LEGACY_TAG!r}",
            fix="give the image name the bundle uses in the CIB",
        )
    if found.scheme == "common":
        return found.ref
    return floating_name(found.service, scheme)


def as_floating(image: str | None, scheme: Scheme = DEFAULT_SCHEME) -> FloatingName | None:
    """The floating name a bundle's image is, if it is one: not a rollback name, and never an
    error for a malformed image (that bundle is simply not ours)."""
    if not image:
        return None
    try:
        found = classify(image, scheme)
    except InvalidReference:
        return None
    return found if found is not None and not found.rollback else None


def service_of_floating(ref: Reference | str, scheme: Scheme = DEFAULT_SCHEME) -> str:
    """The service of a floating (or rollback) name; for any other name, its last component."""
    found = classify(ref, scheme)
    if found is not None:
        return found.service
    return (ref if isinstance(ref, Reference) else parse(ref)).last_component


def attribute_name(service: str, configured: str | None = None) -> str:
    """The node attribute that shows the real image behind a service's floating name: the
    guard's ``attribute`` parameter when it has one, else ``pcmkimg-SERVICE``."""
    return configured or f"pcmkimg-{service}"


def is_hold_name(ref: Reference, scheme: Scheme = DEFAULT_SCHEME) -> bool:
    """``<prefix>/<service>:pcmkhold``: the short-lived name that keeps an image named while
    its only name moves (:func:`~pcmkimg.core.tagplan.retag_plan`); a killed swap leaves it."""
    parent = ref.name.rpartition("/")[0]
    return ref.digest is None and ref.tag == HOLD_TAG and parent == scheme.prefix


def _ours(ref: Reference) -> bool:
    return classify(ref) is not None or is_hold_name(ref)


def is_scheme_name(name: str) -> bool:
    """A floating, rollback or hold name of our scheme (or a legacy floating name); an
    invalid name is not."""
    try:
        return _ours(parse(name))
    except InvalidReference:
        return False


def is_real(name: str) -> bool:
    """A valid name that is none of :func:`is_scheme_name`'s: one a registry may hold."""
    try:
        return not _ours(parse(name))
    except InvalidReference:
        return False


def describe(resolved: Resolved) -> str:
    """The node attribute's value for the image behind a floating name: its real name (the
    first in order; ``sha256:ID12`` when it has none) with the digest."""
    real = sorted(n for n in resolved.other_names if is_real(n))
    name = real[0] if real else f"sha256:{resolved.id[:12]}"
    digest = resolved.digest
    return f"{name}@{digest}" if digest and "@" not in name else name
