"""Tests of pcmkimg.core.naming: the floating-name scheme and the legacy names."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pcmkimg.core import naming
from pcmkimg.core.errors import InvalidReference, InvalidScheme, NotFloatingName
from pcmkimg.core.naming import (
    DEFAULT_SCHEME,
    LEGACY_TAG,
    FloatingName,
    Scheme,
    classify,
    floating_name,
    migration_target,
    rollback_name,
    service_of,
)
from pcmkimg.core.reference import (
    Reference,
    parse,
)

services = st.builds(
    lambda a, rest: a + "".join(s + b for s, b in rest),
    st.text("abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=8),
    st.lists(
        st.tuples(
            st.sampled_from(["-", "_", ".", "__"]),
            st.text("abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=5),
        ),
        max_size=2,
    ),
)


def test_default_scheme_names() -> None:
    assert str(floating_name("mariadb")) == "cluster.common.tag/mariadb:pcmklatest"
    assert str(rollback_name("mariadb")) == "cluster.common.tag/mariadb:pcmkprevious"
    assert DEFAULT_SCHEME == Scheme("cluster.common.tag", "pcmklatest", "pcmkprevious")


def test_configured_scheme_names() -> None:
    scheme = Scheme(prefix="pcmk.example/floating", tag="live", rollback_tag="before")
    assert floating_name("redis", scheme) == Reference("pcmk.example", "floating/redis", "live")
    assert str(rollback_name("redis", scheme)) == "pcmk.example/floating/redis:before"


def test_prefix_without_dot_explains_the_localhost_trap() -> None:
    with pytest.raises(InvalidScheme) as info:
        Scheme(prefix="cluster-common-tag")
    line = info.value.one_line()
    assert "'cluster-common-tag'" in line
    assert "has no '.'" in line
    assert "localhost/<prefix>/<service>" in line
    assert "fix: put a dot in the first component" in line
    assert "cluster.common.tag" in info.value.fix


@pytest.mark.parametrize(
    ("prefix", "words"),
    [
        ("localhost", "where podman keeps images without a registry"),
        ("reg:5000", "registry that podman may try to pull from"),
        ("cluster/common.tag", "has no '.'"),
        ("", "has no '.'"),
        ("a.b/", "at least one component"),
        ("a.b//c", "at least one component"),
        ("a.b/Common", "must be lowercase"),
        ("a..b", "registry host label ''"),
        ("a.b/c:tag", "character ':'"),
    ],
)
def test_bad_prefix(prefix: str, words: str) -> None:
    with pytest.raises(InvalidScheme, match="prefix") as info:
        Scheme(prefix=prefix)
    assert words in info.value.message


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"tag": "-latest"}, 'floating tag: invalid tag "-latest"'),
        ({"rollback_tag": "a b"}, 'rollback tag: invalid tag "a b"'),
        ({"tag": "same", "rollback_tag": "same"}, "both 'same'"),
        ({"prefix": 3}, "must be a string"),
        ({"tag": None}, "must be a string"),
        ({"tag": "pcmkhold"}, "floating tag 'pcmkhold' is the internal hold tag"),
        ({"rollback_tag": "pcmkhold"}, "rollback tag 'pcmkhold' is the internal hold tag"),
    ],
)
def test_bad_tags(kwargs: dict[str, object], words: str) -> None:
    with pytest.raises(InvalidScheme) as info:
        Scheme(**kwargs)  # type: ignore[arg-type]
    assert words in info.value.message


def test_service_of() -> None:
    assert service_of("reg:8787/ns/mariadb:17.1.2") == "mariadb"
    assert service_of(parse("quay.io/tripleo/openstack-haproxy@sha256:" + "a" * 64)) == (
        "openstack-haproxy"
    )
    assert service_of("reg:8787/ns/mariadb:17.1.2", service="galera") == "galera"


@pytest.mark.parametrize("service", ["Galera", "a/b", "", "-x", "x_"])
def test_service_of_rejects_bad_service(service: str) -> None:
    with pytest.raises(InvalidReference, match="invalid path component"):
        service_of("reg.example/ns/img:1", service=service)


def test_service_of_rejects_bad_real_image() -> None:
    with pytest.raises(InvalidReference, match="must be lowercase"):
        service_of("reg.example/NS/img:1")


def test_floating_name_rejects_bad_service_and_long_names() -> None:
    with pytest.raises(InvalidReference):
        floating_name("Mariadb")
    with pytest.raises(InvalidReference, match="not be more than 255"):
        floating_name("a" * 240)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("cluster.common.tag/mariadb:pcmklatest", ("mariadb", "common", False)),
        ("cluster.common.tag/mariadb:pcmkprevious", ("mariadb", "common", True)),
        ("reg:8787/ns/mariadb:pcmklatest", ("mariadb", "legacy", False)),
        (
            "192.168.24.1:8787/rhosp-rhel8/openstack-mariadb:pcmklatest",
            ("openstack-mariadb", "legacy", False),
        ),
        ("mariadb:pcmklatest", ("mariadb", "legacy", False)),
        ("reg:8787/ns/mariadb:17.1.2", None),
        ("reg:8787/ns/mariadb:pcmkprevious", None),
        ("cluster.common.tag/mariadb", None),
        ("cluster.common.tag/mariadb:17.1.2", None),
        ("cluster.common.tag/mariadb:pcmklatest@sha256:" + "a" * 64, None),
        ("cluster.common.tag/deeper/mariadb:pcmklatest", None),
        ("cluster.common.tag.example/mariadb:pcmklatest", ("mariadb", "legacy", False)),
    ],
)
def test_classify(text: str, expected: tuple[str, str, bool] | None) -> None:
    found = classify(text)
    if expected is None:
        assert found is None
    else:
        assert found == FloatingName(parse(text), *expected)  # type: ignore[arg-type]


def test_classify_with_configured_scheme() -> None:
    scheme = Scheme(prefix="pcmk.example/floating", tag="live", rollback_tag="before")
    assert classify("pcmk.example/floating/redis:live", scheme) == FloatingName(
        parse("pcmk.example/floating/redis:live"), "redis", "common"
    )
    assert classify("cluster.common.tag/redis:pcmklatest", scheme) == FloatingName(
        parse("cluster.common.tag/redis:pcmklatest"), "redis", "legacy"
    )
    assert classify("pcmk.example/floating/redis:pcmklatest", scheme) is None


def test_classify_rejects_invalid_string() -> None:
    with pytest.raises(InvalidReference):
        classify("Not/A/Reference")


@settings(max_examples=100, deadline=None)
@given(services)
def test_own_names_classify_back(service: str) -> None:
    floating = classify(floating_name(service))
    rollback = classify(rollback_name(service))
    assert floating == FloatingName(floating_name(service), service, "common", rollback=False)
    assert rollback == FloatingName(rollback_name(service), service, "common", rollback=True)


@settings(max_examples=100, deadline=None)
@given(services, st.sampled_from(["reg:8787/ns", "quay.io/tripleo", "localhost"]))
def test_legacy_migrates_to_common_name(service: str, repository: str) -> None:
    legacy = f"{repository}/{service}:{LEGACY_TAG}"
    target = migration_target(legacy)
    assert target == floating_name(service)
    assert migration_target(target) == target, "migrating again changes nothing"
    assert service_of(legacy) == service


def test_migration_target_with_configured_scheme() -> None:
    scheme = Scheme(prefix="pcmk.example", tag="live", rollback_tag="before")
    assert str(migration_target("reg:8787/ns/mariadb:pcmklatest", scheme)) == (
        "pcmk.example/mariadb:live"
    )


def test_migration_target_refuses_other_names() -> None:
    with pytest.raises(NotFloatingName) as info:
        migration_target("reg:8787/ns/mariadb:17.1.2")
    assert "'reg:8787/ns/mariadb:17.1.2' is neither a floating name" in info.value.message
    assert info.value.fix


def test_the_hold_name_is_ours_not_a_real_name() -> None:
    """A swap killed mid-way leaves ``<prefix>/<service>:pcmkhold`` on the image: it is one of
    our names (status does not list it, ``outdated`` never asks a registry about it)."""
    hold = "cluster.common.tag/fi:pcmkhold"
    assert naming.is_scheme_name(hold) and not naming.is_real(hold)
    assert naming.is_scheme_name("cluster.common.tag/fi:pcmkprevious")
    for real in ("reg.example:5000/ns/fi:pcmkhold", "cluster.common.tag/a/fi:pcmkhold"):
        assert naming.is_real(real) and not naming.is_scheme_name(real)
    assert not naming.is_real("Bad//Name") and not naming.is_scheme_name("Bad//Name")
