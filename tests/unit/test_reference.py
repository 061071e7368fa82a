"""Tests of pcmkimg.core.reference: the grammar, round trips, errors and fuzzing."""

from __future__ import annotations

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from pcmkimg.core.errors import InvalidReference
from pcmkimg.core.reference import (
    NAME_MAX,
    TAG_MAX,
    Reference,
    format,
    parse,
    validate_domain,
    validate_path_component,
    validate_tag,
)
from pcmkimg.errors import PcmkimgError

H64 = "f" * 64
SHA256 = f"sha256:{H64}"
SHA512 = "sha512:" + "f" * 128

# --- strategies built from the grammar -------------------------------------------------------

_LOWER_ALNUM = "abcdefghijklmnopqrstuvwxyz0123456789"
_ALNUM = _LOWER_ALNUM + "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_WORD = _ALNUM + "_"

alnum = st.text(_LOWER_ALNUM, min_size=1, max_size=6)
separator = st.sampled_from([".", "_", "__", "-", "--", "---"])
path_component = st.builds(
    lambda first, rest: first + "".join(s + a for s, a in rest),
    alnum,
    st.lists(st.tuples(separator, alnum), max_size=3),
)
path = st.lists(path_component, min_size=1, max_size=4).map("/".join)

domain_component = st.one_of(
    st.text(_ALNUM, min_size=1, max_size=1),
    st.builds(
        lambda a, mid, b: a + mid + b,
        st.sampled_from(_ALNUM),
        st.text(_ALNUM + "-", max_size=6),
        st.sampled_from(_ALNUM),
    ),
)
port = st.integers(0, 99999).map(lambda n: f":{n}")
dotted = st.lists(domain_component, min_size=2, max_size=4).map(".".join)
# the grammar allows "[0]", but docker's split wants a ':' to take it as a domain
ipv6 = st.builds(
    lambda a, b: f"[{a}:{b}]",
    st.text("0123456789abcdefABCDEF:", max_size=19),
    st.text("0123456789abcdefABCDEF:", max_size=19),
)
domain = st.one_of(
    st.builds(lambda d, p: d + p, dotted, st.one_of(st.just(""), port)),
    st.builds(lambda d, p: d + p, domain_component, port),
    st.builds(lambda p: "localhost" + p, st.one_of(st.just(""), port)),
    st.builds(lambda d, p: d + p, ipv6, st.one_of(st.just(""), port)),
)
tag = st.builds(
    lambda a, rest: a + rest,
    st.sampled_from(_WORD),
    st.one_of(st.text(_WORD + ".-", max_size=12), st.text(_WORD + ".-", max_size=TAG_MAX - 1)),
)
digest = st.sampled_from([("sha256", 64), ("sha384", 96), ("sha512", 128)]).flatmap(
    lambda alg: st.text("0123456789abcdef", min_size=alg[1], max_size=alg[1]).map(
        lambda hex_digits: f"{alg[0]}:{hex_digits}"
    )
)


def _fits(domain: str | None, path: str) -> bool:
    """Whether the parts make a reference the grammar (as docker splits it) can read back."""
    name = path if domain is None else f"{domain}/{path}"
    first, slash, _ = path.partition("/")
    ambiguous = domain is None and slash and ("." in first or first == "localhost")
    image_id = domain is None and len(path) == 64 and set(path) <= set("0123456789abcdef")
    return len(name) <= NAME_MAX and not ambiguous and not image_id


@st.composite
def references(draw: st.DrawFn) -> str:
    d = draw(st.one_of(st.none(), domain))
    p = draw(path)
    assume(_fits(d, p))
    text = p if d is None else f"{d}/{p}"
    t = draw(st.one_of(st.none(), tag))
    if t is not None:
        text += f":{t}"
    g = draw(st.one_of(st.none(), digest))
    if g is not None:
        text += f"@{g}"
    return text


# --- round trip ------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(references())
@example("localhost/foo:bar@" + SHA256)
@example("[::1]:5000/a/b_c__d---e.f:Tag.1@" + SHA512)
def test_format_parse_round_trip(text: str) -> None:
    ref = parse(text)
    assert format(ref) == text
    assert str(ref) == text
    assert parse(str(ref)) == ref
    assert Reference(ref.domain, ref.path, ref.tag, ref.digest) == ref


# --- table: distribution/reference reference_test.go, with docker's domain split ------------

VALID = [
    # input, domain, path, tag, digest
    ("test_com", None, "test_com", None, None),
    ("test.com:tag", None, "test.com", "tag", None),
    ("test.com:5000", None, "test.com", "5000", None),
    ("test.com/repo:tag", "test.com", "repo", "tag", None),
    ("test:5000/repo", "test:5000", "repo", None, None),
    ("test:5000/repo:tag", "test:5000", "repo", "tag", None),
    (f"test:5000/repo@{SHA256}", "test:5000", "repo", None, SHA256),
    (f"test:5000/repo:tag@{SHA256}", "test:5000", "repo", "tag", SHA256),
    ("lowercase:Uppercase", None, "lowercase", "Uppercase", None),
    # upstream's raw Parse takes "a" as the domain here; docker's split (ours) does not
    (
        "a/" * 127 + "a:tag-puts-this-over-max",
        None,
        "a/" * 127 + "a",
        "tag-puts-this-over-max",
        None,
    ),
    ("sub-dom1.foo.com/bar/baz/quux", "sub-dom1.foo.com", "bar/baz/quux", None, None),
    (
        "sub-dom1.foo.com/bar/baz/quux:some-long-tag",
        "sub-dom1.foo.com",
        "bar/baz/quux",
        "some-long-tag",
        None,
    ),
    (
        "b.gcr.io/test.example.com/my-app:test.example.com",
        "b.gcr.io",
        "test.example.com/my-app",
        "test.example.com",
        None,
    ),
    ("xn--n3h.com/myimage:xn--n3h.com", "xn--n3h.com", "myimage", "xn--n3h.com", None),
    (
        f"xn--7o8h.com/myimage:xn--7o8h.com@{SHA512}",
        "xn--7o8h.com",
        "myimage",
        "xn--7o8h.com",
        SHA512,
    ),
    ("foo_bar.com:8080", None, "foo_bar.com", "8080", None),
    ("foo/foo_bar.com:8080", None, "foo/foo_bar.com", "8080", None),
    ("192.168.1.1", None, "192.168.1.1", None, None),
    ("192.168.1.1:tag", None, "192.168.1.1", "tag", None),
    ("192.168.1.1:5000", None, "192.168.1.1", "5000", None),
    ("192.168.1.1/repo", "192.168.1.1", "repo", None, None),
    ("192.168.1.1:5000/repo", "192.168.1.1:5000", "repo", None, None),
    ("192.168.1.1:5000/repo:5050", "192.168.1.1:5000", "repo", "5050", None),
    ("[2001:db8::1]/repo", "[2001:db8::1]", "repo", None, None),
    ("[2001:db8:1:2:3:4:5:6]/repo:tag", "[2001:db8:1:2:3:4:5:6]", "repo", "tag", None),
    ("[2001:db8::1]:5000/repo", "[2001:db8::1]:5000", "repo", None, None),
    ("[2001:db8::1]:5000/repo:tag", "[2001:db8::1]:5000", "repo", "tag", None),
    (f"[2001:db8::1]:5000/repo@{SHA256}", "[2001:db8::1]:5000", "repo", None, SHA256),
    (f"[2001:db8::1]:5000/repo:tag@{SHA256}", "[2001:db8::1]:5000", "repo", "tag", SHA256),
    ("[2001:db8::]:5000/repo", "[2001:db8::]:5000", "repo", None, None),
    ("[::1]:5000/repo", "[::1]:5000", "repo", None, None),
    # TestDomainAndPath
    ("test.com/foo", "test.com", "foo", None, None),
    ("test_com/foo", None, "test_com/foo", None, None),
    ("test:8080/foo", "test:8080", "foo", None, None),
    ("test.com:8080/foo", "test.com:8080", "foo", None, None),
    ("test-com:8080/foo", "test-com:8080", "foo", None, None),
    ("xn--n3h.com:18080/foo", "xn--n3h.com:18080", "foo", None, None),
    # ours
    ("localhost/foo", "localhost", "foo", None, None),
    ("localhost:5000/x", "localhost:5000", "x", None, None),
    ("UPPER.example.com/foo", "UPPER.example.com", "foo", None, None),
    ("reg:8787/ns/mariadb:17.1.2", "reg:8787", "ns/mariadb", "17.1.2", None),
    ("foo:" + "a" * TAG_MAX, None, "foo", "a" * TAG_MAX, None),
]


@pytest.mark.parametrize(("text", "domain", "path", "tag", "digest"), VALID)
def test_valid_table(
    text: str, domain: str | None, path: str, tag: str | None, digest: str | None
) -> None:
    ref = parse(text)
    assert ref == Reference(domain, path, tag, digest)
    assert format(ref) == text


INVALID = [
    # input, words the reason must contain, position of the fault
    ("", "empty", 0),
    (":justtag", "at least one component", 0),
    (f"@{SHA256}", "at least one component", 0),
    ("repo@sha256:" + "f" * 34, "64 hex digits, this one has 34", 12),
    (f"validname@invaliddigest:{H64}", "unsupported digest algorithm 'invaliddigest'", 10),
    ("Uppercase:tag", "must be lowercase", 0),
    ("Uppercase/lowercase:tag", "must be lowercase", 0),  # podman: lowercase (docker: valid)
    ("test:5000/Uppercase/lowercase:tag", "must be lowercase", 10),
    ("Reg/ns/IMG:1", "must be lowercase", 0),
    ("a/" * 128 + "a:tag", f"not be more than {NAME_MAX} characters", NAME_MAX),
    ("aa/asdf$$^/aa", "character '$' at position 7", 7),
    ("[2001:db8::1]", "'[' at position 0", 0),
    ("[2001:db8::1]:5000", "'[' at position 0", 0),
    ("[2001:db8::1]:tag", "'[' at position 0", 0),
    ("[fe80::1%eth0]:5000/repo", "IPv6", 0),
    ("[fe80::1%@invalidzone]:5000/repo", "'[' at position 0", 0),  # '@' starts a digest
    # ours
    ("foo:", "tag after ':' is empty", 4),
    ("foo@", "not <algorithm>:<hex digits>", 4),
    ("foo:ba$r", "character '$' at position 6 is not allowed in a tag", 6),
    ("foo:-tag", "must not start with '-'", 4),
    ("foo:" + "a" * (TAG_MAX + 1), f"at most {TAG_MAX}", 4),
    ("foo@sha256:" + H64.upper(), "hex must be lowercase", 11),
    ("foo@sha512:" + H64, "128 hex digits", 11),
    ("foo@sha256:" + "g" * 64, "character 'g' at position 11", 11),
    ("foo@sha256", "not <algorithm>:<hex digits>", 4),
    ("a//b", "empty path component at position 2", 2),
    ("reg.example/img/", "empty path component at position 16", 16),
    ("/img", "empty", 0),
    ("foo___bar", "path component 'foo___bar' at position 0", 0),
    ("foo..bar", "path component 'foo..bar'", 0),
    ("a-.com/foo", "registry host label 'a-'", 0),
    ("a_b.com/img", "character '_' at position 1 is not allowed in a registry host", 1),
    ("a.b:x/img", "registry port ':x'", 3),
    ("foo:a:b", "character ':' at position 3", 3),
    (H64, "image ID", 0),
    (f"{H64}:tag", "image ID", 0),  # podman takes this one; we refuse any 64-hex name
    ("café", "character 'é' at position 3", 3),
    ("foo bar", "character ' ' at position 3", 3),
]


@pytest.mark.parametrize(("text", "reason", "position"), INVALID)
def test_invalid_table(text: str, reason: str, position: int) -> None:
    with pytest.raises(InvalidReference) as info:
        parse(text)
    err = info.value
    assert reason in err.reason
    assert err.position == position
    assert err.one_line().startswith(f'invalid reference "{text[:300]}')
    assert "fix: " in err.one_line()


def test_error_message_names_input_and_problem() -> None:
    with pytest.raises(InvalidReference) as info:
        parse("Reg/ns/IMG:1")
    assert str(info.value).startswith(
        'invalid reference "Reg/ns/IMG:1": repository name must be lowercase'
    )
    assert isinstance(info.value, PcmkimgError)


# Verdicts of podman 4.3.1 (`podman tag` / `podman image inspect` on a local store), recorded by
# hand. They pin the choices where docker and podman differ.
PODMAN_ACCEPTS = ["foo__bar", "foo--bar", "localhost/foo", "example.com:5000", "foo:_tag"]
PODMAN_REJECTS = ["Foo/bar", "foo/Bar", "foo.-bar", "a.com/foo-", f"foo@blake3:{H64}", "foo:.tag"]


@pytest.mark.parametrize("text", PODMAN_ACCEPTS)
def test_podman_accepts(text: str) -> None:
    assert format(parse(text)) == text


@pytest.mark.parametrize("text", PODMAN_REJECTS)
def test_podman_rejects(text: str) -> None:
    with pytest.raises(InvalidReference):
        parse(text)


# --- the Reference object --------------------------------------------------------------------


def test_reference_properties() -> None:
    ref = parse(f"reg:8787/ns/mariadb:17.1.2@{SHA256}")
    assert ref.name == ref.repository == "reg:8787/ns/mariadb"
    assert ref.last_component == "mariadb"
    assert str(ref.with_tag(None).with_digest(None)) == "reg:8787/ns/mariadb"
    assert str(ref.with_tag("pcmklatest")) == f"reg:8787/ns/mariadb:pcmklatest@{SHA256}"
    assert parse("mariadb").last_component == "mariadb"


def test_reference_is_frozen() -> None:
    ref = parse("reg.example/img:1")
    with pytest.raises(AttributeError):
        ref.tag = "2"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"domain": "foo", "path": "bar"}, "would be read as a path component"),
        ({"domain": None, "path": "a.b/c"}, "would be read as a registry"),
        ({"domain": None, "path": "localhost/c"}, "would be read as a registry"),
        ({"domain": "", "path": "c"}, "registry host is empty"),
        ({"domain": None, "path": "c", "tag": ""}, "tag after ':' is empty"),
        ({"domain": None, "path": 3}, "must be a string"),
        ({"domain": b"a.b", "path": "c"}, "must be a string"),
    ],
)
def test_reference_checks_itself(kwargs: dict[str, object], reason: str) -> None:
    with pytest.raises(InvalidReference) as info:
        Reference(**kwargs)  # type: ignore[arg-type]
    assert reason in info.value.reason


def test_with_tag_and_with_digest_validate() -> None:
    ref = parse("reg.example/img")
    with pytest.raises(InvalidReference, match="must not start with '.'"):
        ref.with_tag(".x")
    with pytest.raises(InvalidReference, match="64 hex digits"):
        ref.with_digest("sha256:abc")


def test_validators() -> None:
    assert validate_domain("[::1]:5000") == "[::1]:5000"
    assert validate_path_component("mariadb") == "mariadb"
    assert validate_tag("pcmklatest") == "pcmklatest"
    with pytest.raises(InvalidReference, match='invalid path component "a/b"'):
        validate_path_component("a/b")
    with pytest.raises(InvalidReference, match="registry port"):
        validate_domain("a.b:")
    with pytest.raises(InvalidReference, match="must be a string"):
        validate_tag(None)  # type: ignore[arg-type]


# --- fuzzing: junk raises InvalidReference and nothing else ---------------------------------


def _parse_or_invalid(text: object) -> None:
    try:
        ref = parse(text)  # type: ignore[arg-type]
    except InvalidReference as err:
        assert err.reason
        err.one_line().encode()  # printable as UTF-8, even for undecodable input
    else:
        assert format(ref) == text


_REFERENCE_CHARS = "aZ0._-/:@[]%$ " + "sha256f"


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.text(),
        st.text(_REFERENCE_CHARS, max_size=40),
        st.binary().map(lambda b: b.decode("utf-8", "surrogateescape")),
        st.binary().map(lambda b: b.decode("latin-1")),
    )
)
def test_junk_text_raises_only_invalid_reference(text: str) -> None:
    _parse_or_invalid(text)


@settings(max_examples=200, deadline=None)
@given(references(), st.data())
def test_mutated_references_raise_only_invalid_reference(text: str, data: st.DataObject) -> None:
    at = data.draw(st.integers(0, len(text)))
    cut = data.draw(st.integers(0, 3))
    insert = data.draw(st.text(_REFERENCE_CHARS + "A\x00\n", max_size=3))
    _parse_or_invalid(text[:at] + insert + text[at + cut :])


@settings(max_examples=50, deadline=None)
@given(st.one_of(st.none(), st.integers(), st.floats(), st.binary(), st.lists(st.text())))
def test_non_strings_raise_invalid_reference(value: object) -> None:
    with pytest.raises(InvalidReference, match="must be a string"):
        parse(value)  # type: ignore[arg-type]
