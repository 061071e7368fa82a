"""Container image references: parse, validate and format.

The grammar is the one of the distribution reference format
(github.com/distribution/reference, ``reference.go`` and ``regexp.go``)::

    reference        := name [ ":" tag ] [ "@" digest ]
    name             := [ domain "/" ] path
    domain           := host [ ":" port ]
    host             := domain-name | "[" ipv6 "]"
    domain-name      := domain-component [ "." domain-component ]*
    domain-component := [a-zA-Z0-9] | [a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]
    port             := [0-9]+
    ipv6             := [a-fA-F0-9:]+
    path             := path-component [ "/" path-component ]*
    path-component   := alnum [ separator alnum ]*
    alnum            := [a-z0-9]+
    separator        := "." | "_" | "__" | "-"+
    tag              := [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}
    digest           := algorithm ":" hex

Choices made where the upstream packages differ from each other:

- **Domain detection.** The first component of a name with a ``/`` is the domain only if it
  contains a ``.`` or a ``:`` or is ``localhost``, as docker and podman decide it. Newer
  docker (``splitDockerDomain`` in distribution/reference) also takes a first component with an
  uppercase letter (``Foo/bar``) as a domain; podman's copy of that code
  (containers/image ``docker/reference``) does not and rejects ``Foo/bar`` as "repository name
  must be lowercase". pcmkimg follows podman, the runtime whose store it manages: a reference
  accepted here is one podman accepts. A first component with a ``.`` that is not a valid host
  (``a_b.com/img``) is refused: podman would read it as a path and store it under
  ``localhost/``, the very trap that floating names must avoid.
- **Name length.** The whole name (``domain/path``) is at most 255 characters, as podman checks
  it. (distribution/reference now only limits the path.)
- **Digests.** The algorithms are the ones registered by podman's go-digest: ``sha256`` (64 hex
  digits), ``sha384`` (96) and ``sha512`` (128), lowercase hex. An algorithm that fits the grammar
  but is not registered (``blake3:...``) is refused as podman refuses it.
- **Image IDs.** A name that is 64 lowercase hex digits is refused, with or without a tag:
  podman reads it as an image ID (and refuses it as a name when it has no tag).
- **No guessing.** :func:`parse` never adds ``docker.io`` or ``library/`` or a ``latest`` tag.
- **IPv6.** A bracketed IPv6 host (``[::1]:5000/img``) is valid by the grammar; podman 4.3 does
  not accept it yet.

A :class:`Reference` is valid by construction: every instance, however it is made, has passed the
same checks as :func:`parse`, so ``parse(format(ref)) == ref`` and ``format(parse(s)) == s``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType

from pcmkimg.core.errors import InvalidReference
from pcmkimg.records import dataclass, replace

NAME_MAX = 255
"""The most characters a name (``domain/path``) may have."""

TAG_MAX = 128
"""The most characters a tag may have."""

DIGEST_HEX_LENGTHS: Mapping[str, int] = MappingProxyType(
    {"sha256": 64, "sha384": 96, "sha512": 128}
)
"""The digest algorithms podman knows, with the number of hex digits of each."""

DOCKER_IO = "docker.io"
_LEGACY_DOCKER_IO = "index.docker.io"
_OFFICIAL_NAMESPACE = "library"

_DOMAIN_COMPONENT = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?")
_DOMAIN_CHARS = re.compile(r"[a-zA-Z0-9.-]*")
_IPV6 = re.compile(r"\[[a-fA-F0-9:]+\]")
_PORT = re.compile(r"[0-9]+")
_PATH_COMPONENT = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*")
_PATH_CHARS = re.compile(r"[a-z0-9._-]*")
_TAG_CHARS = re.compile(r"[A-Za-z0-9_.-]*")
_ALGORITHM = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*")
_LOWER_HEX = re.compile(r"[a-f0-9]*")
_HEX = re.compile(r"[a-fA-F0-9]*")
_IMAGE_ID = re.compile(r"[a-f0-9]{64}")

_FIX_PATH = (
    "write the repository path in lowercase letters, digits and single separators "
    "('.', '_', '__' or dashes) between them, e.g. registry.example.com/ns/image:tag"
)
_FIX_DOMAIN = "write the registry as a host name or IPv4 address, optionally with :port"
_FIX_TAG = f"a tag is 1 to {TAG_MAX} of A-Z a-z 0-9 _ . - and starts with a letter, digit or '_'"
_FIX_DIGEST = "write the digest as sha256:<64 lowercase hex digits> (or sha384, sha512)"


@dataclass(frozen=True)
class _Problem:
    """What is wrong, found while checking one part of a reference."""

    reason: str
    position: int
    fix: str


def _bad_char(
    text: str, allowed: re.Pattern[str], offset: int, where: str, fix: str
) -> _Problem | None:
    """Report the first character of ``text`` that ``allowed`` does not match."""
    good = allowed.match(text)
    end = good.end() if good else 0
    if end == len(text):
        return None
    position = offset + end
    return _Problem(
        f"character {text[end]!r} at position {position} is not allowed in {where}", position, fix
    )


def _domain_problem(domain: str, offset: int = 0) -> _Problem | None:
    if not domain:
        return _Problem("the registry host is empty", offset, _FIX_DOMAIN)
    if domain.startswith("["):
        close = domain.find("]")
        host = domain[: close + 1] if close >= 0 else domain
        if not _IPV6.fullmatch(host):
            return _Problem(
                "an IPv6 registry address must be hex digits and ':' inside [ ], without a zone",
                offset,
                "write it as [2001:db8::1] or [2001:db8::1]:5000",
            )
    else:
        host = domain.partition(":")[0]
        problem = _bad_char(host, _DOMAIN_CHARS, offset, "a registry host", _FIX_DOMAIN)
        if problem:
            return problem
        start = 0
        for label in host.split("."):
            if not _DOMAIN_COMPONENT.fullmatch(label):
                return _Problem(
                    f"registry host label {label!r} must be letters, digits and inner dashes",
                    offset + start,
                    _FIX_DOMAIN,
                )
            start += len(label) + 1
    rest = domain[len(host) :]
    if rest and not (rest.startswith(":") and _PORT.fullmatch(rest[1:])):
        return _Problem(
            f"the registry port {rest!r} must be ':' and digits",
            offset + len(host),
            _FIX_DOMAIN,
        )
    return None


def _path_problem(path: str, offset: int = 0) -> _Problem | None:
    if not path:
        return _Problem(
            "repository name must have at least one component",
            offset,
            "give an image reference such as registry.example.com/ns/image:tag",
        )
    upper = next((i for i, c in enumerate(path) if "A" <= c <= "Z"), None)
    if upper is not None:
        fix = _FIX_PATH
        if offset == 0 and upper < path.find("/"):
            fix += "; a registry host is read as one only with a '.' or ':' or as 'localhost'"
        return _Problem(
            f"repository name must be lowercase ({path[upper]!r} at position {offset + upper})",
            offset + upper,
            fix,
        )
    start = 0
    for component in path.split("/"):
        problem = _bad_char(component, _PATH_CHARS, offset + start, "a repository path", _FIX_PATH)
        if problem:
            return problem
        if not component:
            return _Problem(
                f"empty path component at position {offset + start}",
                offset + start,
                _FIX_PATH,
            )
        if not _PATH_COMPONENT.fullmatch(component):
            return _Problem(
                f"path component {component!r} at position {offset + start} must start and end "
                "with a letter or digit, with one '.', one or two '_' or dashes between them",
                offset + start,
                _FIX_PATH,
            )
        start += len(component) + 1
    return None


def _tag_problem(tag: str, offset: int = 0) -> _Problem | None:
    if not tag:
        return _Problem("the tag after ':' is empty", offset, _FIX_TAG)
    problem = _bad_char(tag, _TAG_CHARS, offset, "a tag", _FIX_TAG)
    if problem:
        return problem
    if tag[0] in ".-":
        return _Problem(f"the tag must not start with {tag[0]!r}", offset, _FIX_TAG)
    if len(tag) > TAG_MAX:
        return _Problem(
            f"the tag is {len(tag)} characters long, at most {TAG_MAX} are allowed",
            offset,
            _FIX_TAG,
        )
    return None


def _digest_problem(digest: str, offset: int = 0) -> _Problem | None:
    algorithm, colon, hex_digits = digest.partition(":")
    if not colon or not _ALGORITHM.fullmatch(algorithm):
        return _Problem(
            f"the digest {digest!r} is not <algorithm>:<hex digits>", offset, _FIX_DIGEST
        )
    hex_at = offset + len(algorithm) + 1
    problem = _bad_char(hex_digits, _HEX, hex_at, "a digest", _FIX_DIGEST)
    if problem:
        return problem
    expected = DIGEST_HEX_LENGTHS.get(algorithm)
    if expected is None:
        known = ", ".join(DIGEST_HEX_LENGTHS)
        return _Problem(
            f"unsupported digest algorithm {algorithm!r} (podman knows {known})",
            offset,
            _FIX_DIGEST,
        )
    if len(hex_digits) != expected:
        return _Problem(
            f"a {algorithm} digest has {expected} hex digits, this one has {len(hex_digits)}",
            hex_at,
            _FIX_DIGEST,
        )
    return _bad_char(
        hex_digits, _LOWER_HEX, hex_at, "a digest (hex must be lowercase)", _FIX_DIGEST
    )


def _is_domain(component: str) -> bool:
    """Whether the first component of a multi-component name is a registry (docker's rule)."""
    return "." in component or ":" in component or component == "localhost"


@dataclass(frozen=True)
class Reference:
    """A valid image reference: ``[domain/]path[:tag][@digest]``.

    Making one checks it; an invalid part raises :class:`InvalidReference`.
    """

    domain: str | None
    path: str
    tag: str | None = None
    digest: str | None = None

    def __post_init__(self) -> None:
        for name in ("domain", "path", "tag", "digest"):
            value = getattr(self, name)
            if not (isinstance(value, str) or (value is None and name != "path")):
                raise InvalidReference(
                    value, f"the {name} must be a string", what=f"{name} of reference"
                )
        problem = self._problem()
        if problem:
            raise InvalidReference(
                format(self), problem.reason, position=problem.position, fix=problem.fix
            )

    def _problem(self) -> _Problem | None:
        offset = 0
        if self.domain is not None:
            problem = _domain_problem(self.domain)
            if problem:
                return problem
            if not _is_domain(self.domain):
                return _Problem(
                    f"registry {self.domain!r} has no '.' or ':' and is not 'localhost', so it "
                    "would be read as a path component",
                    0,
                    "write the registry with its domain or port, e.g. registry.example.com",
                )
            offset = len(self.domain) + 1
        problem = _path_problem(self.path, offset)
        if problem:
            return problem
        first, slash, _ = self.path.partition("/")
        if self.domain is None and slash and _is_domain(first):
            return _Problem(
                f"first component {first!r} would be read as a registry",
                0,
                f"give it as the domain: Reference(domain={first!r}, ...)",
            )
        if self.domain is None and _IMAGE_ID.fullmatch(self.path):
            return _Problem(
                "a name of 64 hex digits is an image ID to podman, not a name",
                0,
                "use an ID as an ID, or give the image a name with a letter outside a-f",
            )
        name_length = len(self.name)
        if name_length > NAME_MAX:
            return _Problem(
                f"repository name must not be more than {NAME_MAX} characters "
                f"(it has {name_length})",
                NAME_MAX,
                "shorten the registry host or the repository path",
            )
        offset = name_length + 1
        if self.tag is not None:
            problem = _tag_problem(self.tag, offset)
            if problem:
                return problem
            offset += len(self.tag) + 1
        if self.digest is not None:
            return _digest_problem(self.digest, offset)
        return None

    @property
    def name(self) -> str:
        """The repository name: ``domain/path``, or ``path`` without a domain."""
        return self.path if self.domain is None else f"{self.domain}/{self.path}"

    @property
    def repository(self) -> str:
        """The same as :attr:`name`: the reference without tag and digest."""
        return self.name

    @property
    def last_component(self) -> str:
        """The last path component, e.g. ``mariadb`` of ``reg:8787/ns/mariadb:17``."""
        return self.path.rpartition("/")[2]

    def with_tag(self, tag: str | None) -> Reference:
        """This reference with ``tag`` instead of its tag (``None`` drops it)."""
        return replace(self, tag=tag)

    def with_digest(self, digest: str | None) -> Reference:
        """This reference with ``digest`` instead of its digest (``None`` drops it)."""
        return replace(self, digest=digest)

    def __str__(self) -> str:
        return format(self)


def format(ref: Reference) -> str:
    """The string form of ``ref``; ``parse(format(ref)) == ref``."""
    text = ref.name
    if ref.tag is not None:
        text += f":{ref.tag}"
    if ref.digest is not None:
        text += f"@{ref.digest}"
    return text


def parse(text: str) -> Reference:
    """Parse ``text`` as an image reference, exactly as written (no docker.io guessing).

    Raises :class:`InvalidReference` (and nothing else) for anything that is not a valid
    reference, including input that is not a string.
    """
    if not isinstance(text, str):
        raise InvalidReference(text, "a reference must be a string", fix="pass a str")
    if not text:
        raise InvalidReference(
            text,
            "the reference is empty",
            position=0,
            fix="give an image reference such as registry.example.com/ns/image:tag",
        )
    name_tag, at, digest = text.partition("@")
    slash = name_tag.rfind("/")
    colon = name_tag.rfind(":")
    tag: str | None = None
    name = name_tag
    if colon > slash:
        name, tag = name_tag[:colon], name_tag[colon + 1 :]
    first, slash_found, rest = name.partition("/")
    if slash_found and _is_domain(first):
        return Reference(first, rest, tag, digest if at else None)
    return Reference(None, name, tag, digest if at else None)


def _raise(text: object, problem: _Problem | None, what: str) -> str:
    if problem:
        raise InvalidReference(
            text, problem.reason, position=problem.position, fix=problem.fix, what=what
        )
    assert isinstance(text, str)
    return text


def validate_domain(domain: str) -> str:
    """Return ``domain`` if it is a valid registry host[:port], else raise InvalidReference."""
    problem = _domain_problem(domain) if isinstance(domain, str) else _NOT_STR
    return _raise(domain, problem, "registry")


def validate_path_component(component: str) -> str:
    """Return ``component`` if it is one valid path component, else raise InvalidReference."""
    problem: _Problem | None = _NOT_STR
    if isinstance(component, str):
        problem = _path_problem(component)
        if problem is None and "/" in component:
            problem = _Problem(
                "a single path component must not contain '/'",
                component.index("/"),
                "give the last component only, e.g. mariadb",
            )
    return _raise(component, problem, "path component")


def validate_tag(tag: str) -> str:
    """Return ``tag`` if it is a valid tag, else raise InvalidReference."""
    problem = _tag_problem(tag) if isinstance(tag, str) else _NOT_STR
    return _raise(tag, problem, "tag")


_NOT_STR = _Problem("it must be a string", 0, "pass a str")
