"""pcmkimg.core.cib on fixtures made by tests/fixtures/cib/make-fixtures.sh (real pcs/crm_*)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from lxml import etree

from pcmkimg.core import cib as C
from pcmkimg.core.errors import (
    BundleNotFoundError,
    CibParseError,
    CibStructureError,
    GuardConflictError,
)
from tests import fixtures

FLOATING = "cluster.common.tag/mariadb:pcmklatest"


load = fixtures.cib
status = fixtures.status
canonical = fixtures.canonical


def config(cib: etree._Element) -> tuple:
    return canonical(cib.find("configuration"))


# --------------------------------------------------------------------------- parsing


def test_parse_accepts_str_and_bytes_with_declaration() -> None:
    text = '<?xml version="1.0" encoding="UTF-8"?>\n' + fixtures.text("base.xml")
    assert C.parse_cib(text).tag == "cib"
    assert C.parse_cib(text.encode()).tag == "cib"


def test_malformed_xml_is_one_error_with_line_and_fix() -> None:
    bad = b"<cib epoch='1'>\n  <configuration>\n    <resources>\n  </configuration>\n</cib>\n"
    with pytest.raises(CibParseError) as info:
        C.parse_cib(bad)
    assert "line 4" in info.value.message
    assert "cibadmin --query" in info.value.fix


@pytest.mark.parametrize("data", [b"", "   ", b"\n"])
def test_empty_input(data: bytes | str) -> None:
    with pytest.raises(CibParseError, match="empty"):
        C.parse_cib(data)


def test_not_a_cib() -> None:
    with pytest.raises(CibStructureError):
        C.parse_cib(b"<foo/>")
    with pytest.raises(CibStructureError):
        C.parse_crm_mon(b"<cib><configuration/></cib>")
    with pytest.raises(CibStructureError, match="epoch"):
        C.parse_cib(b"<cib epoch='x'><configuration/></cib>")


BILLION_LAUGHS = b"""<?xml version="1.0"?>
<!DOCTYPE cib [
 <!ENTITY a "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa">
 <!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">
 <!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">
 <!ENTITY d "&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;">
 <!ENTITY e "&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;">
 <!ENTITY f "&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;">
 <!ENTITY g "&f;&f;&f;&f;&f;&f;&f;&f;&f;&f;&f;&f;&f;&f;&f;&f;&f;&f;&f;&f;">
]>
<cib epoch="1"><configuration><crm_config><cluster_property_set id="x">
<nvpair id="n" name="n" value="&g;"/></cluster_property_set></crm_config></configuration></cib>
"""


def test_billion_laughs_is_refused() -> None:
    # Refused before expansion: the message names the entity, not gigabytes of "a".
    with pytest.raises(CibParseError) as info:
        C.parse_cib(BILLION_LAUGHS)
    assert len(str(info.value)) < 1000


def test_external_entity_is_never_resolved(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("TOPSECRET")
    doc = (
        f'<?xml version="1.0"?><!DOCTYPE cib [<!ENTITY x SYSTEM "file://{secret}">]>'
        '<cib epoch="1"><configuration><crm_config><cluster_property_set id="s">'
        '<nvpair id="n" name="n" value="v"/></cluster_property_set></crm_config>'
        "<nodes>&x;</nodes></configuration></cib>"
    ).encode()
    with pytest.raises(CibParseError) as info:
        C.parse_cib(doc)
    assert "TOPSECRET" not in str(info.value)
    with pytest.raises(CibParseError):
        C.parse_crm_mon(doc.replace(b"cib", b"pacemaker-result"))


def test_undeclared_entity_is_malformed() -> None:
    with pytest.raises(CibParseError, match="line 1"):
        C.parse_cib(b"<cib><configuration>&x;</configuration></cib>")


def _big_cib(count: int) -> bytes:
    parts = [b'<cib admin_epoch="0" epoch="7" num_updates="3"><configuration><crm_config/><nodes/>']
    parts.append(b"<resources>")
    for i in range(count):
        parts.append(
            b'<primitive id="dummy-%d" class="ocf" provider="pacemaker" type="Dummy">'
            b'<instance_attributes id="dummy-%d-ia"><nvpair id="dummy-%d-ia-state" '
            b'name="state" value="/var/run/dummy-%d.state-padding-padding-padding"/>'
            b'</instance_attributes><operations><op id="dummy-%d-monitor" name="monitor" '
            b'interval="10s" timeout="20s"/></operations></primitive>\n' % ((i,) * 5)
        )
    parts.append(
        b'<bundle id="b"><podman image="i" replicas="3"/></bundle></resources>'
        b"<constraints/></configuration><status/></cib>"
    )
    return b"".join(parts)


def test_fifty_megabyte_cib_parses() -> None:
    data = _big_cib(150_000)
    assert len(data) > 50 * 1024 * 1024
    tree = C.parse_cib(data)
    assert [b.id for b in C.bundles(tree)] == ["b"]
    assert C.cib_version(tree) == (0, 7, 3)


def test_edit_of_a_big_cib_patches_only_the_change() -> None:
    tree = C.parse_cib(_big_cib(30_000))  # ~10 MB, larger than real CIBs
    change = C.set_bundle_image(tree, "b", "j")
    assert [c.get("path") for c in C.patch_changes(change.patch)] == [
        "/cib",
        "/cib/configuration/resources/bundle[@id='b']/podman",
    ]


# --------------------------------------------------------------------------- configuration


def test_bundles_of_base() -> None:
    found = {b.id: b for b in C.bundles(load("base.xml"))}
    assert list(found) == [
        "galera-bundle",
        "redis-bundle",
        "rabbitmq-bundle",
        "haproxy-bundle",
        "cinder-volume-bundle",
    ]
    galera = found["galera-bundle"]
    assert (galera.runtime, galera.image, galera.replicas, galera.promoted_max) == (
        "podman",
        FLOATING,
        3,
        3,
    )
    assert galera.promotable and not galera.interleave and galera.guard is None
    assert galera.primitive == C.Primitive("galera", "ocf", "heartbeat", "galera")
    assert galera.primitive.agent == "ocf:heartbeat:galera"
    assert found["redis-bundle"].promoted_max == 1
    assert found["haproxy-bundle"].primitive is None
    assert not found["rabbitmq-bundle"].promotable
    cinder = found["cinder-volume-bundle"]
    assert cinder.runtime == "docker" and cinder.replicas == 1
    assert cinder.target_role == "Started" and cinder.is_managed


def test_legacy_masters_attribute() -> None:
    tree = C.parse_cib(
        b'<cib><configuration><resources><bundle id="b"><docker image="i" masters="2"/>'
        b"</bundle></resources></configuration></cib>"
    )
    b = C.bundle(tree, "b")
    assert (b.runtime, b.promoted_max, b.replicas) == ("docker", 2, 1)


def test_unknown_bundle() -> None:
    with pytest.raises(BundleNotFoundError, match="galera-bundle"):
        C.bundle(load("base.xml"), "nope")


def test_guard_found_and_wired() -> None:
    g = C.bundle(load("guard.xml"), "galera-bundle")
    assert g.guard_wired and g.interleave
    assert g.guard == C.Guard(
        clone_id="galera-bundle-guard-clone",
        primitive_id="galera-bundle-guard",
        image=FLOATING,
        order_id="galera-bundle-guard-order",
        colocation_id="galera-bundle-guard-colocation",
        clone_interleave=True,
        interleave_record="unset",
    )
    assert not C.bundle(load("guard.xml"), "redis-bundle").guard_wired


def test_guard_without_bundle_interleave_is_not_wired() -> None:
    change = C.set_bundle_meta(load("guard.xml"), "galera-bundle", "interleave", None)
    b = C.bundle(change.new_cib, "galera-bundle")
    assert b.guard is not None and b.guard.complete and not b.guard_wired


def test_guard_id_conflict() -> None:
    tree = load("base.xml")
    res = tree.find("configuration/resources")
    etree.SubElement(res, "primitive", {"id": "galera-bundle-guard-clone", "class": "ocf"})
    with pytest.raises(GuardConflictError):
        C.bundle(tree, "galera-bundle")
    with pytest.raises(GuardConflictError):
        C.add_guard(tree, "galera-bundle", FLOATING)


def test_nodes() -> None:
    assert C.nodes(load("base.xml")) == [
        C.Node("1", "controller-0", "member"),
        C.Node("2", "controller-1", "member"),
        C.Node("3", "controller-2", "member"),
    ]
    extra = [n for n in C.nodes(load("remote-nodes.xml")) if n.kind != "member"]
    assert extra == [
        C.Node("compute-0", "compute-0", "remote"),
        C.Node("guest-0", "guest-0", "guest"),
    ]


def test_constraints() -> None:
    bans = C.cli_constraints(load("bans.xml"))
    assert [(c.id, c.resource, c.node, c.score, c.is_ban) for c in bans] == [
        (
            "cli-ban-galera-bundle-on-controller-1",
            "galera-bundle",
            "controller-1",
            "-INFINITY",
            True,
        ),
        ("cli-ban-redis-bundle-on-controller-2", "redis-bundle", "controller-2", "-INFINITY", True),
        (
            "cli-ban-galera-bundle-on-controller-2",
            "galera-bundle",
            "controller-2",
            "-INFINITY",
            True,
        ),
        ("cli-prefer-haproxy-bundle", "haproxy-bundle", "controller-0", "INFINITY", False),
    ]
    guard = load("guard.xml")
    assert C.order_constraints(guard) == [
        C.OrderConstraint(
            "galera-bundle-guard-order",
            "galera-bundle-guard-clone",
            "galera-bundle",
            "Mandatory",
            "start",
            "start",
        )
    ]
    assert C.colocation_constraints(guard) == [
        C.ColocationConstraint(
            "galera-bundle-guard-colocation",
            "galera-bundle",
            "galera-bundle-guard-clone",
            "999999",
        )
    ]


def test_properties_and_defaults() -> None:
    tree = load("base.xml")
    assert C.cluster_properties(tree) == {
        "stonith-enabled": "false",
        "cluster-name": "tripleo_cluster",
    }
    assert C.rsc_defaults(tree) == {"resource-stickiness": "INFINITY"}
    assert C.rsc_defaults(C.parse_cib(b"<cib><configuration/></cib>")) == {}


READERS = {
    "bundles": lambda t: C.bundles(t),
    "bundle": lambda t: C.bundle(t, "galera-bundle"),
    "nodes": lambda t: C.nodes(t),
    "cli_constraints": lambda t: C.cli_constraints(t),
    "order_constraints": lambda t: C.order_constraints(t),
    "colocation_constraints": lambda t: C.colocation_constraints(t),
    "cluster_properties": lambda t: C.cluster_properties(t),
    "rsc_defaults": lambda t: C.rsc_defaults(t),
    "ticket_state": lambda t: C.ticket_state(t, "pcmkimg-lease"),
    "ticket_element": lambda t: C.ticket_element(t, "pcmkimg-lease"),
    "banned_nodes": lambda t: C.banned_nodes(t, "galera-bundle"),
    "all_banned_nodes": lambda t: C.all_banned_nodes(t),
    "guard_ids": lambda t: C.guard_ids("galera-bundle"),
    "guard_pcs_commands": lambda t: C.guard_pcs_commands(t, "galera-bundle", FLOATING),
}
SECTIONS = ("crm_config", "nodes", "resources", "constraints", "rsc_defaults")


def test_every_reader_is_listed() -> None:
    import inspect

    from pcmkimg.core.cib import read

    public = {
        name
        for name, fn in vars(read).items()
        if inspect.isfunction(fn) and fn.__module__ == read.__name__ and not name.startswith("_")
    }
    assert public <= set(READERS), f"add the new reader(s) to READERS: {public - set(READERS)}"


@pytest.mark.parametrize("missing", [*SECTIONS, "all"])
@pytest.mark.parametrize("fixture", ["base.xml", "guard.xml"])
def test_readers_never_create_a_missing_section(fixture: str, missing: str) -> None:
    tree = load(fixture)
    configuration = tree.find("configuration")
    for name in SECTIONS if missing == "all" else (missing,):
        section = configuration.find(name)
        if section is not None:
            configuration.remove(section)
    before = C.to_xml(tree)
    for reader in READERS.values():
        try:
            reader(tree)
        except BundleNotFoundError:
            pass  # no <resources>: no bundle, and nothing to read
    assert C.to_xml(tree) == before
    if missing != "resources" and missing != "all":
        assert C.bundle(tree, "galera-bundle").image  # the rest still reads


@pytest.mark.parametrize(
    "value", ["true", "TRUE", "True", "on", "ON", "yes", "Yes", "YES", "y", "Y", "1"]
)
def test_is_true_takes_the_words_of_crm_is_true(value: str) -> None:
    assert C.is_true(value)


@pytest.mark.parametrize(
    "value", [None, "", "false", "off", "no", "n", "0", "2", "tru", "yess", "enabled", " true"]
)
def test_is_true_refuses_everything_else(value: str | None) -> None:
    assert not C.is_true(value)


def test_readers_take_every_true_word() -> None:
    tree = load("base.xml")
    change = C.set_bundle_meta(tree, "galera-bundle", "interleave", "Y")
    change = C.set_bundle_meta(change.new_cib, "galera-bundle", "is-managed", "off")
    galera = C.bundle(change.new_cib, "galera-bundle")
    assert galera.interleave and not galera.is_managed


# --------------------------------------------------------------------------- status


def test_status_ok() -> None:
    st = status("mon-ok.xml")
    assert st.have_quorum and st.dc == "controller-0"
    galera = st.replicas_of("galera-bundle")
    assert [(r.replica, r.node, r.role, r.container_id) for r in galera] == [
        (0, "controller-0", "Promoted", "galera-bundle-podman-0"),
        (1, "controller-1", "Promoted", "galera-bundle-podman-1"),
        (2, "controller-2", "Promoted", "galera-bundle-podman-2"),
    ]
    assert all(r.active and r.managed and not r.failed for r in galera)
    assert sorted(r.role for r in st.replicas_of("redis-bundle")) == [
        "Promoted",
        "Unpromoted",
        "Unpromoted",
    ]
    assert {r.role for r in st.replicas_of("haproxy-bundle")} == {"Started"}
    cinder = st.replicas_of("cinder-volume-bundle")
    assert [r.container_id for r in cinder] == ["cinder-volume-bundle-docker-0"]
    assert st.failures == ()
    c0 = st.node("controller-0")
    assert c0 is not None and c0.online and c0.is_dc and c0.usable and c0.kind == "member"
    assert st.replica_on("galera-bundle", "controller-2").replica == 2


def test_status_failed_start() -> None:
    st = status("mon-failed-start.xml")
    (failure,) = st.failures
    assert failure == C.Failure(
        op_key="galera-bundle-podman-1_start_0",
        resource="galera-bundle-podman-1",
        task="start",
        interval_ms=0,
        node="controller-1",
        exitcode=1,
        exitstatus="error",
        exit_reason="User-injected result",
        call_id="2",
        last_rc_change="2026-11-30 04:44:59Z",
    )
    assert not failure.degraded and st.real_failures == [failure] and st.degraded == []
    assert st.failures_of(["galera-bundle-podman-1"], "controller-1") == [failure]
    assert st.failures_of(["galera-bundle-podman-1"], "controller-0") == []
    assert st.replica_on("galera-bundle", "controller-1").failed


def test_status_degraded_is_not_a_real_failure() -> None:
    st = status("mon-degraded.xml")
    (failure,) = st.failures
    assert failure.exitcode == 190 and failure.degraded and failure.task == "monitor"
    assert failure.interval_ms == 60000 and failure.resource == "galera-bundle-podman-0"
    assert st.real_failures == [] and st.degraded == [failure]
    assert st.replica_on("galera-bundle", "controller-0").role == "Promoted"


def test_status_standby_and_no_quorum() -> None:
    st = status("mon-standby.xml")
    c2 = st.node("controller-2")
    assert c2 is not None and c2.online and c2.standby and not c2.usable
    assert st.replicas_of("galera-bundle")[2].node is None
    assert st.replicas_of("galera-bundle")[2].role == "Stopped"
    nq = status("mon-no-quorum.xml")
    assert not nq.have_quorum and nq.dc == "controller-0"
    assert not nq.node("controller-2").online


def test_status_legacy_roles_and_no_dc() -> None:
    mon = C.parse_crm_mon(
        b'<crm_mon><summary><current_dc present="false"/></summary><resources>'
        b'<bundle id="b" type="docker"><replica id="0">'
        b'<resource id="r" role="Master" active="true" managed="true" failed="false"/>'
        b'<resource id="b-docker-0" role="Started" active="true" managed="false">'
        b'<node name="n1"/></resource></replica></bundle></resources></crm_mon>'
    )
    st = C.cluster_status(mon)
    assert st.dc is None and not st.have_quorum
    (r,) = st.replicas
    assert (r.role, r.node, r.managed, r.container_id) == ("Promoted", "n1", False, "b-docker-0")


# --------------------------------------------------------------------------- edits


def assert_untouched(original: etree._Element, snapshot: bytes) -> None:
    assert etree.tostring(original) == snapshot


def test_set_bundle_image() -> None:
    tree = load("base.xml")
    snapshot = etree.tostring(tree)
    change = C.set_bundle_image(tree, "redis-bundle", "reg:8787/ns/redis:17.1")
    assert_untouched(tree, snapshot)
    assert C.bundle(change.new_cib, "redis-bundle").image == "reg:8787/ns/redis:17.1"
    assert change.base_version == C.CibVersion(0, 15, 0)
    assert C.cib_version(change.new_cib) == (0, 16, 0)
    assert not change.empty
    (modify,) = [c for c in C.patch_changes(change.patch) if c.get("path") != "/cib"]
    assert modify.get("path") == "/cib/configuration/resources/bundle[@id='redis-bundle']/podman"
    assert modify.find("change-list/change-attr").attrib == {
        "name": "image",
        "operation": "set",
        "value": "reg:8787/ns/redis:17.1",
    }
    again = C.set_bundle_image(tree, "redis-bundle", "cluster.common.tag/redis:pcmklatest")
    assert again.empty and C.cib_version(again.new_cib) == (0, 15, 0)


def test_patch_source_is_original_version() -> None:
    tree = load("base.xml")
    tree.set("num_updates", "42")
    patch = C.set_bundle_image(tree, "galera-bundle", "x").patch
    assert patch.find("version/source").attrib == {
        "admin_epoch": "0",
        "epoch": "15",
        "num_updates": "42",
    }
    assert patch.find("version/target").attrib == {
        "admin_epoch": "0",
        "epoch": "16",
        "num_updates": "0",
    }


def test_set_and_delete_bundle_meta() -> None:
    tree = load("base.xml")
    change = C.set_bundle_meta(tree, "redis-bundle", "target-role", "Stopped")
    meta = change.new_cib.find("configuration/resources/bundle[@id='redis-bundle']/meta_attributes")
    assert meta.get("id") == "redis-bundle-meta_attributes"
    assert C.bundle(change.new_cib, "redis-bundle").target_role == "Stopped"
    (create,) = [c for c in C.patch_changes(change.patch) if c.get("operation") == "create"]
    assert create[0].tag == "meta_attributes"
    deleted = C.set_bundle_meta(change.new_cib, "redis-bundle", "target-role", None)
    assert C.bundle(deleted.new_cib, "redis-bundle").target_role is None
    changed = C.set_bundle_meta(tree, "cinder-volume-bundle", "is-managed", "false")
    assert not C.bundle(changed.new_cib, "cinder-volume-bundle").is_managed
    assert C.set_bundle_meta(tree, "galera-bundle", "nope", None).empty


def test_add_guard_equals_pcs_fixture() -> None:
    base = load("base.xml")
    snapshot = etree.tostring(base)
    change = C.add_guard(base, "galera-bundle", FLOATING)
    assert_untouched(base, snapshot)
    assert config(change.new_cib) == config(load("guard.xml"))
    assert C.bundle(change.new_cib, "galera-bundle").guard_wired


def test_add_guard_is_idempotent_and_converges() -> None:
    guarded = load("guard.xml")
    assert C.add_guard(guarded, "galera-bundle", FLOATING).empty
    renamed = C.add_guard(guarded, "galera-bundle", "cluster.common.tag/other:pcmklatest")
    assert C.bundle(renamed.new_cib, "galera-bundle").guard.image.endswith("other:pcmklatest")
    broken = copy.deepcopy(guarded)
    constraints = broken.find("configuration/constraints")
    for c in list(constraints):
        constraints.remove(c)
    fixed = C.add_guard(broken, "galera-bundle", FLOATING)
    assert config(fixed.new_cib) == config(guarded)
    # A guard wired with an INFINITY colocation (before Pacemaker 3.0 support) is still the
    # guard's; guard add converges it to 999999.
    old = copy.deepcopy(guarded)
    old.find(".//rsc_colocation[@id='galera-bundle-guard-colocation']").set("score", "INFINITY")
    assert C.bundle(old, "galera-bundle").guard_wired
    assert config(C.add_guard(old, "galera-bundle", FLOATING).new_cib) == config(guarded)


def test_remove_guard_restores_base() -> None:
    guarded = load("guard.xml")
    change = C.remove_guard(guarded, "galera-bundle")
    assert config(change.new_cib) == config(load("base.xml"))
    assert C.remove_guard(load("base.xml"), "galera-bundle").empty


def test_guard_keeps_a_previous_interleave() -> None:
    base = load("base.xml")
    before = C.set_bundle_meta(base, "redis-bundle", "interleave", "false").new_cib
    added = C.add_guard(before, "redis-bundle", "cluster.common.tag/redis:pcmklatest").new_cib
    assert C.bundle(added, "redis-bundle").guard.interleave_record == "false"
    assert C.bundle(added, "redis-bundle").interleave
    removed = C.remove_guard(added, "redis-bundle").new_cib
    assert C.bundle(removed, "redis-bundle").meta["interleave"] == "false"
    already = C.set_bundle_meta(base, "redis-bundle", "interleave", "true").new_cib
    added = C.add_guard(already, "redis-bundle", "x").new_cib
    assert C.bundle(C.remove_guard(added, "redis-bundle").new_cib, "redis-bundle").interleave


def test_remove_guard_without_record_leaves_interleave() -> None:
    guarded = load("guard.xml")
    for nv in guarded.iter("nvpair"):
        if nv.get("name") == C.GUARD_RECORD:
            nv.getparent().remove(nv)
    removed = C.remove_guard(guarded, "galera-bundle").new_cib
    assert C.bundle(removed, "galera-bundle").interleave


def test_remove_guard_drops_other_constraints_on_it() -> None:
    guarded = load("guard.xml")
    constraints = guarded.find("configuration/constraints")
    etree.SubElement(
        constraints,
        "rsc_location",
        id="cli-ban-galera-bundle-guard-clone-on-controller-0",
        rsc="galera-bundle-guard-clone",
        node="controller-0",
        score="-INFINITY",
    )
    removed = C.remove_guard(guarded, "galera-bundle").new_cib
    assert config(removed) == config(load("base.xml"))
    sets = copy.deepcopy(guarded)
    order = etree.SubElement(sets.find("configuration/constraints"), "rsc_order", id="o")
    etree.SubElement(
        etree.SubElement(order, "resource_set", id="s"),
        "resource_ref",
        id="galera-bundle-guard-clone",
    )
    with pytest.raises(GuardConflictError, match="resource set"):
        C.remove_guard(sets, "galera-bundle")


def test_cluster_property_set_and_delete() -> None:
    base = load("base.xml")
    lease = "holder=ctl-0;expires=2030-01-01T00:00:00Z"
    change = C.set_cluster_property(base, "pcmkimg-lease", lease)
    assert C.cluster_properties(change.new_cib)["pcmkimg-lease"] == lease
    (create,) = [c for c in C.patch_changes(change.patch) if c.get("operation") == "create"]
    assert create[0].get("id") == "cib-bootstrap-options-pcmkimg-lease"
    assert create.get("path") == (
        "/cib/configuration/crm_config/cluster_property_set[@id='cib-bootstrap-options']"
    )
    updated = C.set_cluster_property(change.new_cib, "pcmkimg-lease", "other")
    assert C.cluster_properties(updated.new_cib)["pcmkimg-lease"] == "other"
    gone = C.delete_cluster_property(updated.new_cib, "pcmkimg-lease")
    assert "pcmkimg-lease" not in C.cluster_properties(gone.new_cib)
    assert C.delete_cluster_property(base, "pcmkimg-lease").empty
    empty = C.parse_cib(b'<cib epoch="1"><configuration/></cib>')
    made = C.set_cluster_property(empty, "a", "b")
    assert C.cluster_properties(made.new_cib) == {"a": "b"}


def test_ticket_state_set_and_delete_bump_num_updates_only() -> None:
    base = load("base.xml")  # <status/>, epoch 15, num_updates 0
    change = C.set_ticket_attribute(base, "t", "lease", "v1")
    assert C.ticket_state(change.new_cib, "t") == {"id": "t", "lease": "v1"}
    element = C.ticket_element(change.new_cib, "t")
    assert element is not None and element.getparent().tag == "tickets"
    (version, create) = C.patch_changes(change.patch)
    assert (version.get("path"), version[0][0].get("name")) == ("/cib", "num_updates")
    assert (create.get("operation"), create.get("path")) == ("create", "/cib/status")
    assert create[0].tag == "tickets" and create[0][0].get("id") == "t"
    target = change.patch.find("version/target")
    assert (target.get("epoch"), target.get("num_updates")) == ("15", "1")
    updated = C.set_ticket_attribute(change.new_cib, "t", "lease", "v2")
    (_, modify) = C.patch_changes(updated.patch)
    assert modify.get("path") == "/cib/status/tickets/ticket_state[@id='t']"
    assert C.cib_version(updated.new_cib)[1:] == (15, 2)
    gone = C.delete_ticket_state(updated.new_cib, "t")
    assert C.ticket_state(gone.new_cib, "t") is None
    assert C.cib_version(gone.new_cib)[1:] == (15, 3)
    assert C.delete_ticket_state(base, "t").empty
    assert C.ticket_state(C.parse_cib(b"<cib><configuration/></cib>"), "t") is None
    # A change of the configuration too bumps the epoch: the property dropped with the write.
    legacy = C.set_cluster_property(base, "p", "old").new_cib
    both = C.set_ticket_attribute(legacy, "t", "lease", "v", drop_property="p")
    assert "p" not in C.cluster_properties(both.new_cib)
    assert C.cib_version(both.new_cib)[1:] == (17, 0)


def test_guard_pcs_commands() -> None:
    commands = C.guard_pcs_commands(load("base.xml"), "galera-bundle", FLOATING)
    assert commands[0][:5] == [
        "pcs",
        "resource",
        "create",
        "galera-bundle-guard",
        "ocf:pcmkimg:floating-image",
    ]
    assert f"image={FLOATING}" in commands[0]
    assert commands[0][-4:] == [
        "clone",
        "galera-bundle-guard-clone",
        "interleave=true",
        "pcmkimg-bundle-interleave=unset",
    ]
    assert commands[1] == [
        "pcs",
        "resource",
        "bundle",
        "update",
        "galera-bundle",
        "meta",
        "interleave=true",
    ]
    assert "id=galera-bundle-guard-order" in commands[2]
    assert "id=galera-bundle-guard-colocation" in commands[3]
    with pytest.raises(BundleNotFoundError):
        C.guard_pcs_commands(load("base.xml"), "nope", FLOATING)


def test_change_serialises() -> None:
    change = C.set_bundle_image(load("base.xml"), "galera-bundle", "x")
    assert change.patch_xml().startswith(b'<diff format="2">')
    assert C.parse_cib(change.cib_xml()).get("epoch") == "16"
    assert "galera-bundle" in change.description
