"""A pure model of the Pacemaker CIB and of ``crm_mon --output-as=xml``.

Everything here works on lxml elements: no subprocess, no file I/O. Callers read the XML
(``cibadmin -Q``, ``crm_mon --output-as=xml``) and hand the bytes to :func:`parse_cib` or
:func:`parse_crm_mon`.

Edits never touch their input. Each returns a :class:`CibChange` that holds the edited CIB
(``epoch`` bumped) and a format-2 patchset whose source version is the original's
``(admin_epoch, epoch, num_updates)``. ``cibadmin --patch --xml-file PATCH`` applies it as ONE
atomic change, and Pacemaker refuses it (``Update was older than existing configuration``,
rc 103) when the live CIB's version is not exactly the source version: whatever changed in
between, the caller re-reads and retries. ``cibadmin --replace --xml-file CIB`` with
``new_cib`` is the weaker alternative: Pacemaker refuses it only when the live version is
newer than ours, so a concurrent change that landed at the same epoch would be lost.

The guard (see ``design.md``): a clone ``<bundle>-guard-clone`` of the primitive
``<bundle>-guard`` (``ocf:pcmkimg:floating-image``, ``image=<floating name>``), the order
``<bundle>-guard-order`` (start guard clone, then start bundle, Mandatory), the colocation
``<bundle>-guard-colocation`` (bundle with guard clone, INFINITY), ``interleave=true`` on the
clone and on the bundle. The bundle's ``interleave`` value from before the guard is recorded
in the clone's meta attribute ``pcmkimg-bundle-interleave`` (``unset`` when there was none),
so :func:`remove_guard` puts back exactly what was there; a guard without that record (made by
hand) leaves the bundle's ``interleave`` as it is.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple, Union

from lxml import etree

from pcmkimg.core import commands as cmd
from pcmkimg.errors import PcmkimgError

Element = etree._Element
XmlInput = Union[bytes, str]

GUARD_AGENT = ("ocf", "pcmkimg", "floating-image")
GUARD_RECORD = "pcmkimg-bundle-interleave"
GUARD_RECORD_UNSET = "unset"
# (name, interval, timeout) of the guard primitive's operations, as pcs writes them.
GUARD_OPS = (("monitor", "30s", "30s"), ("start", "0s", "60s"), ("stop", "0s", "30s"))
RUNTIMES = ("podman", "docker", "rkt")
DEGRADED_EXITCODES = frozenset({190, 191})  # OCF_DEGRADED, OCF_DEGRADED_PROMOTED
_ROLE_ALIASES = {"Master": "Promoted", "Slave": "Unpromoted"}
_FIX_CIB = f"pass the unmodified output of {cmd.quoted(cmd.query_cib())} (or a file saved from it)"
_FIX_MON = f"pass the unmodified output of {cmd.quoted(cmd.status_xml())}"


class CibParseError(PcmkimgError):
    """The XML is malformed, or carries a DOCTYPE/entities (refused: never resolved)."""


class CibStructureError(PcmkimgError):
    """Well-formed XML that is not a CIB (or not crm_mon XML) as Pacemaker writes it."""


class BundleNotFoundError(PcmkimgError):
    """No bundle with the given id in the CIB."""


class GuardConflictError(PcmkimgError):
    """An id the guard needs is taken by something that is not the guard."""


# --------------------------------------------------------------------------- parsing


def _parser() -> etree.XMLParser:
    return etree.XMLParser(
        resolve_entities=False,
        no_network=True,
        load_dtd=False,
        dtd_validation=False,
        huge_tree=False,  # keep libxml2's depth and size limits (a 50 MB CIB fits in them)
        remove_blank_text=True,  # as Pacemaker parses: patch positions count elements only
        remove_comments=False,
        remove_pis=True,
    )


def parse_xml(data: XmlInput, *, what: str = "CIB", fix: str = _FIX_CIB) -> Element:
    """Parse untrusted XML with a hardened parser; one :class:`CibParseError` on any failure."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    if not raw.strip():
        raise CibParseError(f"{what} XML is empty", fix)
    try:
        root = etree.fromstring(raw, _parser())  # noqa: S320 - parser hardened above
    except etree.XMLSyntaxError as exc:
        line, column = (exc.position or (exc.lineno, 0))[:2]
        raise CibParseError(
            f"{what} XML is malformed at line {line}, column {column}: {exc.msg}", fix
        ) from None
    tree = root.getroottree()
    docinfo = tree.docinfo
    if getattr(docinfo, "doctype", "") or getattr(docinfo, "internalDTD", None) is not None:
        raise CibParseError(f"{what} XML has a DOCTYPE (refused: entities are never expanded)", fix)
    if any(isinstance(node, etree._Entity) for node in root.iter()):
        raise CibParseError(f"{what} XML has entity references (refused)", fix)
    return root


def parse_cib(data: XmlInput) -> Element:
    """Parse a full CIB (``cibadmin -Q``); checks the root and the configuration section."""
    root = parse_xml(data)
    if root.tag != "cib" or root.find("configuration") is None:
        raise CibStructureError(
            f"XML is not a CIB: root <{root.tag}> without <configuration>", _FIX_CIB
        )
    cib_version(root)
    return root


def parse_crm_mon(data: XmlInput) -> Element:
    """Parse ``crm_mon -1 --output-as=xml`` output."""
    root = parse_xml(data, what="crm_mon", fix=_FIX_MON)
    if root.tag not in ("pacemaker-result", "crm_mon"):
        raise CibStructureError(f"XML is not crm_mon output: root <{root.tag}>", _FIX_MON)
    return root


def to_xml(element: Element, *, pretty: bool = True) -> bytes:
    """Serialise (for ``--xml-file`` or for display)."""
    return etree.tostring(element, pretty_print=pretty, encoding="utf-8")


# --------------------------------------------------------------------------- version


class CibVersion(NamedTuple):
    admin_epoch: int
    epoch: int
    num_updates: int

    def __str__(self) -> str:
        return f"{self.admin_epoch}.{self.epoch}.{self.num_updates}"


def cib_version(cib: Element) -> CibVersion:
    """``(admin_epoch, epoch, num_updates)`` of a CIB (missing counts as 0, as in Pacemaker)."""
    values = []
    for name in CibVersion._fields:
        text = cib.get(name, "0")
        try:
            values.append(int(text))
        except ValueError:
            raise CibStructureError(
                f"CIB attribute {name}={text!r} is not a number", _FIX_CIB
            ) from None
    return CibVersion(*values)


def bump_epoch(cib: Element) -> Element:
    """A copy with ``epoch`` + 1 and ``num_updates`` 0, as Pacemaker counts a config change."""
    new = copy.deepcopy(cib)
    version = cib_version(cib)
    new.set("epoch", str(version.epoch + 1))
    new.set("num_updates", "0")
    return new


# --------------------------------------------------------------------------- small helpers


def _nvpairs(parent: Element | None, set_tag: str) -> dict[str, str]:
    """name -> value of the nvpairs in the ``set_tag`` children of ``parent`` (first wins)."""
    result: dict[str, str] = {}
    if parent is None:
        return result
    for nvset in parent.findall(set_tag):
        for nv in nvset.findall("nvpair"):
            name = nv.get("name")
            if name is not None and name not in result:
                result[name] = nv.get("value", "")
    return result


def _config_elements(cib: Element) -> Iterator[Element]:
    """Elements of the configuration section (status reuses resource ids: never search it)."""
    config = cib.find("configuration")
    if config is None:
        raise CibStructureError("CIB has no <configuration>", _FIX_CIB)
    return (el for el in config.iter() if isinstance(el.tag, str))


def _by_id(cib: Element, element_id: str) -> Element | None:
    for el in _config_elements(cib):
        if isinstance(el.tag, str) and el.get("id") == element_id:
            return el
    return None


def _section(cib: Element, name: str) -> Element:
    config = cib.find("configuration")
    if config is None:
        raise CibStructureError("CIB has no <configuration>", _FIX_CIB)
    section = config.find(name)
    if section is None:
        section = etree.SubElement(config, name)
    return section


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("true", "yes", "on", "1", "y")


def _int(value: str | None, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except ValueError:
        return default


def _xml_id(text: str) -> str:
    """An XML ID made from ``text`` (Pacemaker's ``crm_xml_sanitize_id`` rules, roughly)."""
    clean = re.sub(r"[^A-Za-z0-9_.-]", "-", text)
    return clean if re.match(r"[A-Za-z_]", clean) else f"_{clean}"


def _unique_id(cib: Element, wanted: str) -> str:
    taken = {el.get("id") for el in _config_elements(cib)}
    candidate, n = _xml_id(wanted), 0
    while candidate in taken:
        n += 1
        candidate = f"{_xml_id(wanted)}-{n}"
    return candidate


def _set_nvpair(
    cib: Element, parent: Element, set_tag: str, set_id: str, name: str, value: str | None
) -> None:
    """Set (value) or delete (None) ``name`` in the first ``set_tag`` of ``parent``.

    A new set gets id ``set_id`` and a new nvpair ``<set id>-<name>`` (the pcs and crm_attribute
    convention). Deleting removes every nvpair with that name in every set of that kind.
    """
    sets = parent.findall(set_tag)
    if value is None:
        for nvset in sets:
            found = [nv for nv in nvset.findall("nvpair") if nv.get("name") == name]
            for nv in found:
                nvset.remove(nv)
            if found and len(nvset) == 0 and not nvset.get("id-ref"):
                parent.remove(nvset)  # leave no empty set behind (as pcs does)
        return
    for nvset in sets:
        for nv in nvset.findall("nvpair"):
            if nv.get("name") == name:
                nv.set("value", value)
                return
    if sets:
        nvset = sets[0]
    else:
        nvset = etree.SubElement(parent, set_tag, id=_unique_id(cib, set_id))
    etree.SubElement(
        nvset,
        "nvpair",
        id=_unique_id(cib, f"{nvset.get('id')}-{name}"),
        name=name,
        value=value,
    )


# --------------------------------------------------------------------------- configuration


@dataclass(frozen=True)
class Primitive:
    id: str
    rclass: str
    provider: str
    type: str

    @property
    def agent(self) -> str:
        """``class:provider:type`` (``class:type`` without provider)."""
        parts = (
            [self.rclass, self.provider, self.type] if self.provider else [self.rclass, self.type]
        )
        return ":".join(parts)


@dataclass(frozen=True)
class Guard:
    """A pcmkimg guard of one bundle, as found in the CIB (possibly only partly wired)."""

    clone_id: str
    primitive_id: str
    image: str | None
    order_id: str | None
    colocation_id: str | None
    clone_interleave: bool
    interleave_record: str | None  # bundle's interleave before the guard; "unset"; None

    @property
    def complete(self) -> bool:
        return bool(self.image and self.order_id and self.colocation_id and self.clone_interleave)


@dataclass(frozen=True)
class Bundle:
    id: str
    runtime: str
    image: str
    replicas: int
    promoted_max: int
    primitive: Primitive | None
    meta: Mapping[str, str] = field(default_factory=dict)
    guard: Guard | None = None

    @property
    def promotable(self) -> bool:
        return self.promoted_max > 0

    @property
    def interleave(self) -> bool:
        return _truthy(self.meta.get("interleave"))

    @property
    def target_role(self) -> str | None:
        return self.meta.get("target-role")

    @property
    def is_managed(self) -> bool:
        return _truthy(self.meta.get("is-managed", "true"))

    @property
    def guard_wired(self) -> bool:
        """Guard clone, order, colocation and interleave on both sides all in place."""
        return self.guard is not None and self.guard.complete and self.interleave


def _primitive(el: Element | None) -> Primitive | None:
    if el is None:
        return None
    return Primitive(
        id=el.get("id", ""),
        rclass=el.get("class", ""),
        provider=el.get("provider", ""),
        type=el.get("type", ""),
    )


def guard_ids(bundle_id: str) -> dict[str, str]:
    """The ids of the guard's elements for ``bundle_id``."""
    return {
        "primitive": f"{bundle_id}-guard",
        "clone": f"{bundle_id}-guard-clone",
        "order": f"{bundle_id}-guard-order",
        "colocation": f"{bundle_id}-guard-colocation",
    }


def _guard_clone(cib: Element, bundle_id: str) -> Element | None:
    """The guard clone element of ``bundle_id``; GuardConflictError if the id is misused."""
    ids = guard_ids(bundle_id)
    clone = _by_id(cib, ids["clone"])
    if clone is None:
        return None
    prim = clone.find("primitive")
    if (
        clone.tag != "clone"
        or prim is None
        or (prim.get("class"), prim.get("provider"), prim.get("type")) != GUARD_AGENT
    ):
        raise GuardConflictError(
            f"id {ids['clone']!r} is taken by something that is not a pcmkimg guard "
            f"(<{clone.tag}>)",
            f"rename or remove that resource, then retry "
            f"({cmd.quoted(cmd.delete_resource(ids['clone']))})",
        )
    return clone


def _find_guard(cib: Element, bundle_id: str) -> Guard | None:
    clone = _guard_clone(cib, bundle_id)
    if clone is None:
        return None
    prim = clone.find("primitive")
    assert prim is not None  # checked by _guard_clone
    ids = guard_ids(bundle_id)
    clone_id = clone.get("id", "")
    order = next(
        (
            o.id
            for o in order_constraints(cib)
            if (o.first, o.then, o.kind, o.first_action, o.then_action)
            == (clone_id, bundle_id, "Mandatory", "start", "start")
        ),
        None,
    )
    colocation = next(
        (
            c.id
            for c in colocation_constraints(cib)
            if (c.rsc, c.with_rsc) == (bundle_id, clone_id) and c.score in ("INFINITY", "+INFINITY")
        ),
        None,
    )
    meta = _nvpairs(clone, "meta_attributes")
    return Guard(
        clone_id=clone_id,
        primitive_id=prim.get("id", ids["primitive"]),
        image=_nvpairs(prim, "instance_attributes").get("image"),
        order_id=order,
        colocation_id=colocation,
        clone_interleave=_truthy(meta.get("interleave")),
        interleave_record=meta.get(GUARD_RECORD),
    )


def _bundle_from(cib: Element, el: Element) -> Bundle:
    runtime_el = next((c for c in el if c.tag in RUNTIMES), None)
    if runtime_el is None:
        raise CibStructureError(f"bundle {el.get('id')!r} has no container runtime", _FIX_CIB)
    promoted = runtime_el.get("promoted-max", runtime_el.get("masters"))
    bundle_id = el.get("id", "")
    return Bundle(
        id=bundle_id,
        runtime=runtime_el.tag,
        image=runtime_el.get("image", ""),
        replicas=_int(runtime_el.get("replicas"), 1),
        promoted_max=_int(promoted, 0),
        primitive=_primitive(el.find("primitive")),
        meta=_nvpairs(el, "meta_attributes"),
        guard=_find_guard(cib, bundle_id),
    )


def _bundle_elements(cib: Element) -> Iterator[Element]:
    yield from _section(cib, "resources").iter("bundle")


def _bundle_element(cib: Element, bundle_id: str) -> Element:
    for el in _bundle_elements(cib):
        if el.get("id") == bundle_id:
            return el
    known = ", ".join(sorted(el.get("id", "") for el in _bundle_elements(cib))) or "none"
    raise BundleNotFoundError(
        f"no bundle {bundle_id!r} in the CIB (bundles: {known})",
        f"give a bundle id as {cmd.quoted(cmd.list_resources())} shows it",
    )


def bundles(cib: Element) -> list[Bundle]:
    """Every bundle of the CIB, in document order."""
    return [_bundle_from(cib, el) for el in _bundle_elements(cib)]


def bundle(cib: Element, bundle_id: str) -> Bundle:
    return _bundle_from(cib, _bundle_element(cib, bundle_id))


@dataclass(frozen=True)
class Node:
    id: str
    uname: str
    kind: str  # "member", "remote" or "guest"


def nodes(cib: Element) -> list[Node]:
    """Cluster nodes: members from ``<nodes>``, remote nodes (``ocf:pacemaker:remote``
    primitives), guest nodes (``remote-node`` meta on a primitive). The implicit guest nodes
    of bundle replicas are not listed: they are not hosts.
    """
    found: dict[str, Node] = {}
    for el in _section(cib, "nodes").findall("node"):
        kind = el.get("type", "member")
        kind = "member" if kind == "normal" else kind
        uname = el.get("uname", el.get("id", ""))
        found[uname] = Node(id=el.get("id", uname), uname=uname, kind=kind)
    resources = _section(cib, "resources")
    for prim in resources.iter("primitive"):
        parent = prim.getparent()
        if parent is not None and parent.tag == "bundle":
            continue
        pid = prim.get("id", "")
        if (prim.get("class"), prim.get("provider"), prim.get("type")) == (
            "ocf",
            "pacemaker",
            "remote",
        ):
            found[pid] = Node(id=pid, uname=pid, kind="remote")
        guest = _nvpairs(prim, "meta_attributes").get("remote-node")
        if guest:
            found[guest] = Node(id=guest, uname=guest, kind="guest")
    return list(found.values())


@dataclass(frozen=True)
class CliConstraint:
    """A ``cli-ban-*`` / ``cli-prefer-*`` location left by crm_resource --ban/--move."""

    id: str
    resource: str
    node: str
    score: str
    role: str | None

    @property
    def is_ban(self) -> bool:
        return self.id.startswith("cli-ban-")


@dataclass(frozen=True)
class OrderConstraint:
    id: str
    first: str
    then: str
    kind: str
    first_action: str
    then_action: str


@dataclass(frozen=True)
class ColocationConstraint:
    id: str
    rsc: str
    with_rsc: str
    score: str


def _constraints(cib: Element, tag: str) -> list[Element]:
    return _section(cib, "constraints").findall(tag)


def cli_constraints(cib: Element) -> list[CliConstraint]:
    return [
        CliConstraint(
            id=el.get("id", ""),
            resource=el.get("rsc", ""),
            node=el.get("node", ""),
            score=el.get("score", ""),
            role=el.get("role"),
        )
        for el in _constraints(cib, "rsc_location")
        if el.get("id", "").startswith(("cli-ban-", "cli-prefer-"))
    ]


def order_constraints(cib: Element) -> list[OrderConstraint]:
    """Simple (set-less) order constraints."""
    return [
        OrderConstraint(
            id=el.get("id", ""),
            first=el.get("first", ""),
            then=el.get("then", ""),
            kind=el.get("kind", "Mandatory"),
            first_action=el.get("first-action", "start"),
            then_action=el.get("then-action", "start"),
        )
        for el in _constraints(cib, "rsc_order")
        if el.get("first")
    ]


def colocation_constraints(cib: Element) -> list[ColocationConstraint]:
    """Simple (set-less) colocation constraints."""
    return [
        ColocationConstraint(
            id=el.get("id", ""),
            rsc=el.get("rsc", ""),
            with_rsc=el.get("with-rsc", ""),
            score=el.get("score", ""),
        )
        for el in _constraints(cib, "rsc_colocation")
        if el.get("rsc")
    ]


def cluster_properties(cib: Element) -> dict[str, str]:
    """nvpairs of the ``crm_config`` cluster_property_sets (first set wins)."""
    return _nvpairs(_section(cib, "crm_config"), "cluster_property_set")


def rsc_defaults(cib: Element) -> dict[str, str]:
    """Resource defaults (e.g. ``resource-stickiness``); rule-less meta sets only."""
    section = _section(cib, "rsc_defaults")
    result: dict[str, str] = {}
    for nvset in section.findall("meta_attributes"):
        if nvset.find("rule") is not None:
            continue
        for nv in nvset.findall("nvpair"):
            result.setdefault(nv.get("name", ""), nv.get("value", ""))
    return result


# --------------------------------------------------------------------------- status


@dataclass(frozen=True)
class ReplicaStatus:
    bundle_id: str
    replica: int
    container_id: str  # e.g. "galera-bundle-podman-0"
    node: str | None  # where the container runs
    role: str  # inner resource's role (container's when no inner), "Stopped" if not running
    container_role: str
    active: bool
    failed: bool
    managed: bool
    blocked: bool
    resources: tuple[str, ...] = ()
    """Every resource of the replica: container, ip, remote connection, inner primitive."""
    guest: str | None = None
    """The replica's guest node (its remote connection's id) when it has an inner primitive."""


@dataclass(frozen=True)
class Failure:
    op_key: str
    resource: str
    task: str
    interval_ms: int
    node: str
    exitcode: int
    exitstatus: str
    exit_reason: str

    @property
    def degraded(self) -> bool:
        """OCF_DEGRADED(_PROMOTED): success shown as a failure; not a real failure."""
        return self.exitcode in DEGRADED_EXITCODES


@dataclass(frozen=True)
class NodeStatus:
    name: str
    id: str
    kind: str
    online: bool
    standby: bool
    maintenance: bool
    pending: bool
    unclean: bool
    shutdown: bool
    is_dc: bool

    @property
    def usable(self) -> bool:
        """Online and able to run resources."""
        return (
            self.online
            and not (self.standby or self.maintenance or self.pending or self.unclean)
            and not self.shutdown
        )


@dataclass(frozen=True)
class ClusterStatus:
    have_quorum: bool
    dc: str | None
    nodes: tuple[NodeStatus, ...]
    replicas: tuple[ReplicaStatus, ...]
    failures: tuple[Failure, ...]

    def node(self, name: str) -> NodeStatus | None:
        return next((n for n in self.nodes if n.name == name), None)

    def replicas_of(self, bundle_id: str) -> list[ReplicaStatus]:
        return [r for r in self.replicas if r.bundle_id == bundle_id]

    def replica_on(self, bundle_id: str, node: str) -> ReplicaStatus | None:
        return next((r for r in self.replicas_of(bundle_id) if r.node == node), None)

    @property
    def real_failures(self) -> list[Failure]:
        return [f for f in self.failures if not f.degraded]

    @property
    def degraded(self) -> list[Failure]:
        return [f for f in self.failures if f.degraded]

    def failures_of(self, resource_ids: Iterable[str], node: str | None = None) -> list[Failure]:
        wanted = set(resource_ids)
        return [
            f for f in self.failures if f.resource in wanted and (node is None or f.node == node)
        ]

    def bundle_failures(
        self, bundle_id: str, also: Iterable[str] = ()
    ) -> list[tuple[str | None, Failure]]:
        """(host, failure) of every failure of the bundle and of any resource of any of its
        replicas (container, ip, remote connection, inner primitive), and of ``also`` (e.g. the
        guard), whether or not a replica is active on that node now: a container whose start
        failed is stopped there and its replica may run elsewhere or nowhere. The host is the
        node where it failed; for a failure on a replica's guest node (the inner primitive), the
        node where that replica's container runs, None when it runs nowhere."""
        replicas = self.replicas_of(bundle_id)
        wanted = {bundle_id, *also, *(rid for r in replicas for rid in r.resources)}
        wanted |= {r.container_id for r in replicas}
        hosts: dict[str, str | None] = {
            r.guest: (r.node if r.active else None) for r in replicas if r.guest
        }
        return [
            (hosts[f.node] if f.node in hosts else f.node, f)
            for f in self.failures
            if f.resource in wanted
        ]


def _role(value: str | None) -> str:
    role = value or "Stopped"
    return _ROLE_ALIASES.get(role, role)


def _replica(bundle_el: Element, replica_el: Element) -> ReplicaStatus:
    bundle_id = bundle_el.get("id", "")
    number = _int(replica_el.get("id"), -1)
    runtime = bundle_el.get("type", "podman")
    container_id = f"{bundle_id}-{runtime}-{number}"
    resources = replica_el.findall("resource")
    container = next((r for r in resources if r.get("id") == container_id), None)
    if container is None:  # unknown naming: the resource whose agent is the runtime's
        container = next(
            (r for r in resources if r.get("resource_agent", "").endswith(f":{runtime}")), None
        )
    inner = next(
        (
            r
            for r in resources
            if r is not container
            and r.get("id") != f"{bundle_id}-{number}"
            and not r.get("id", "").startswith(f"{bundle_id}-ip-")
        ),
        None,
    )
    node_el = container.find("node") if container is not None else None
    active = container is not None and _truthy(container.get("active"))
    remote = next((r for r in resources if r.get("resource_agent") == "ocf:pacemaker:remote"), None)
    container_role = _role(container.get("role") if container is not None else None)
    role = container_role if inner is None or not active else _role(inner.get("role"))
    return ReplicaStatus(
        bundle_id=bundle_id,
        replica=number,
        container_id=container.get("id", container_id) if container is not None else container_id,
        node=node_el.get("name") if node_el is not None else None,
        role=role if active else "Stopped",
        container_role=container_role,
        active=active,
        failed=any(_truthy(r.get("failed")) for r in resources),
        managed=all(_truthy(r.get("managed", "true")) for r in resources),
        blocked=any(_truthy(r.get("blocked")) for r in resources),
        resources=tuple(r.get("id", "") for r in resources if r.get("id")),
        guest=remote.get("id") if remote is not None and inner is not None else None,
    )


def _failure(el: Element) -> Failure:
    op_key = el.get("op_key", el.get("id", ""))
    task = el.get("task", "")
    interval = _int(el.get("interval"), 0)
    suffix = f"_{task}_{interval}"
    resource = op_key[: -len(suffix)] if task and op_key.endswith(suffix) else op_key
    if resource == op_key and op_key.count("_") >= 2:
        resource = op_key.rsplit("_", 2)[0]
    return Failure(
        op_key=op_key,
        resource=resource,
        task=task,
        interval_ms=interval,
        node=el.get("node", ""),
        exitcode=_int(el.get("exitcode"), -1),
        exitstatus=el.get("exitstatus", ""),
        exit_reason=el.get("exitreason", ""),
    )


def cluster_status(mon: Element) -> ClusterStatus:
    """The state in ``crm_mon --output-as=xml`` (see :func:`parse_crm_mon`)."""
    dc_el = mon.find("summary/current_dc")
    dc = None
    quorum = False
    if dc_el is not None and _truthy(dc_el.get("present")):
        dc = dc_el.get("name")
        quorum = _truthy(dc_el.get("with_quorum"))
    node_list = tuple(
        NodeStatus(
            name=el.get("name", ""),
            id=el.get("id", ""),
            kind=el.get("type", "member"),
            online=_truthy(el.get("online")),
            standby=_truthy(el.get("standby")),
            maintenance=_truthy(el.get("maintenance")),
            pending=_truthy(el.get("pending")),
            unclean=_truthy(el.get("unclean")),
            shutdown=_truthy(el.get("shutdown")),
            is_dc=_truthy(el.get("is_dc")),
        )
        for el in mon.findall("nodes/node")
    )
    replicas = tuple(
        _replica(bundle_el, replica_el)
        for bundle_el in mon.iterfind("resources//bundle")
        for replica_el in bundle_el.findall("replica")
    )
    failures = tuple(_failure(el) for el in mon.findall("failures/failure"))
    return ClusterStatus(
        have_quorum=quorum, dc=dc, nodes=node_list, replicas=replicas, failures=failures
    )


# --------------------------------------------------------------------------- patchsets


def _xpath_step(el: Element) -> str:
    el_id = el.get("id")
    return f"{el.tag}[@id='{el_id}']" if el_id is not None else str(el.tag)


def _xpath(el: Element) -> str:
    """Pacemaker's path of an element (``pcmk__element_xpath``)."""
    steps = []
    node: Element | None = el
    while node is not None:
        steps.append(_xpath_step(node))
        node = node.getparent()
    return "/" + "/".join(reversed(steps))


def _keyed_children(parent: Element) -> list[tuple[int, tuple[str, str], Element]]:
    """(position, key, child) of the element children; key is (tag, id), or without an id
    (tag, "#n") for the n-th such child. Positions count every child, as Pacemaker does."""
    result = []
    counts: dict[str, int] = {}
    for position, child in enumerate(parent):
        if not isinstance(child.tag, str):
            continue
        child_id = child.get("id")
        if child_id is None:
            n = counts.get(child.tag, 0)
            counts[child.tag] = n + 1
            child_id = f"#{n}"
        result.append((position, (child.tag, child_id), child))
    return result


def _shallow(el: Element) -> Element:
    result = etree.Element(el.tag)
    for name, value in el.attrib.items():
        result.set(name, value)
    return result


def _diff_attrs(old: Element, new: Element, out: Element) -> None:
    if dict(old.attrib.items()) == dict(new.attrib.items()):
        return
    change = etree.SubElement(out, "change", operation="modify", path=_xpath(old))
    changes = etree.SubElement(change, "change-list")
    for name, value in new.attrib.items():
        if old.get(name) != value:
            etree.SubElement(changes, "change-attr", name=name, operation="set", value=value)
    for name in old.attrib:
        if name not in new.attrib:
            etree.SubElement(changes, "change-attr", name=name, operation="unset")
    etree.SubElement(change, "change-result").append(_shallow(new))


def _diff_children(old: Element, new: Element, out: Element) -> None:
    old_children = {key: child for _, key, child in _keyed_children(old)}
    new_children = _keyed_children(new)
    new_keys = {key for _, key, _ in new_children}
    for key, child in old_children.items():
        if key not in new_keys:
            etree.SubElement(out, "change", operation="delete", path=_xpath(child))
    for position, key, child in new_children:
        before = old_children.get(key)
        if before is None:
            create = etree.SubElement(
                out, "change", operation="create", path=_xpath(old), position=str(position)
            )
            create.append(copy.deepcopy(child))
        elif etree.tostring(before) != etree.tostring(child):  # prune equal subtrees fast
            _diff_attrs(before, child, out)
            _diff_children(before, child, out)


def _patch(original: Element, new: Element, changes: Iterable[Element]) -> Element:
    diff = etree.Element("diff", format="2")
    version = etree.SubElement(diff, "version")
    for tag, cib in (("source", original), ("target", new)):
        v = cib_version(cib)
        etree.SubElement(
            version,
            tag,
            admin_epoch=str(v.admin_epoch),
            epoch=str(v.epoch),
            num_updates=str(v.num_updates),
        )
    _diff_attrs(original, new, diff)
    diff.extend(changes)
    return diff


def patchset(original: Element, new: Element) -> Element:
    """A Pacemaker format-2 patchset from ``original`` to ``new`` (``cibadmin --patch``).

    Its source version is ``original``'s: Pacemaker applies it only to a CIB of exactly that
    version. Elements are matched by tag and id (id-less ones by tag and order); a change of
    sibling order alone is not expressed (no edit here reorders).
    """
    changes = etree.Element("changes")
    _diff_children(original, new, changes)
    return _patch(original, new, list(changes))


def patch_changes(patch: Element) -> list[Element]:
    return patch.findall("change")


@dataclass(frozen=True)
class CibChange:
    """One atomic CIB change: apply ``patch`` (preferred) or replace with ``new_cib``."""

    description: str
    base_version: CibVersion
    new_cib: Element
    patch: Element

    @property
    def empty(self) -> bool:
        """Nothing to do (the CIB is already as wanted): apply nothing."""
        return not patch_changes(self.patch)

    def patch_xml(self) -> bytes:
        return to_xml(self.patch)

    def cib_xml(self) -> bytes:
        return to_xml(self.new_cib)


def make_change(original: Element, edited: Element, description: str) -> CibChange:
    """Wrap ``edited`` (an edited copy of ``original``, taken over): bump its epoch when the
    content differs, and build the patch."""
    changes = etree.Element("changes")
    _diff_children(original, edited, changes)
    if len(changes) or dict(original.attrib.items()) != dict(edited.attrib.items()):
        version = cib_version(original)
        edited.set("epoch", str(version.epoch + 1))
        edited.set("num_updates", "0")
    return CibChange(
        description=description,
        base_version=cib_version(original),
        new_cib=edited,
        patch=_patch(original, edited, list(changes)),
    )


# --------------------------------------------------------------------------- edits


def set_bundle_image(cib: Element, bundle_id: str, image: str) -> CibChange:
    new = copy.deepcopy(cib)
    el = _bundle_element(new, bundle_id)
    runtime_el = next((c for c in el if c.tag in RUNTIMES), None)
    if runtime_el is None:
        raise CibStructureError(f"bundle {bundle_id!r} has no container runtime", _FIX_CIB)
    runtime_el.set("image", image)
    return make_change(cib, new, f"set image of {bundle_id} to {image}")


def set_bundle_meta(cib: Element, bundle_id: str, name: str, value: str | None) -> CibChange:
    """Set a bundle meta attribute; ``value=None`` deletes it."""
    new = copy.deepcopy(cib)
    el = _bundle_element(new, bundle_id)
    _set_nvpair(new, el, "meta_attributes", f"{bundle_id}-meta_attributes", name, value)
    what = f"delete meta {name}" if value is None else f"set meta {name}={value}"
    return make_change(cib, new, f"{what} on {bundle_id}")


def _guard_clone_element(cib: Element, bundle_id: str, floating_name: str, record: str) -> Element:
    ids = guard_ids(bundle_id)
    clone = etree.Element("clone", id=ids["clone"])
    prim = etree.SubElement(
        clone,
        "primitive",
        attrib={"id": ids["primitive"], **dict(zip(("class", "provider", "type"), GUARD_AGENT))},
    )
    ia = etree.SubElement(prim, "instance_attributes", id=f"{ids['primitive']}-instance_attributes")
    etree.SubElement(ia, "nvpair", id=f"{ia.get('id')}-image", name="image", value=floating_name)
    ops = etree.SubElement(prim, "operations")
    for name, interval, timeout in GUARD_OPS:
        etree.SubElement(
            ops,
            "op",
            name=name,
            interval=interval,
            timeout=timeout,
            id=f"{ids['primitive']}-{name}-interval-{interval}",
        )
    meta = etree.SubElement(clone, "meta_attributes", id=f"{ids['clone']}-meta_attributes")
    for name, value in (("interleave", "true"), (GUARD_RECORD, record)):
        etree.SubElement(meta, "nvpair", id=f"{meta.get('id')}-{name}", name=name, value=value)
    for el in clone.iter():
        if el.get("id") and _by_id(cib, el.get("id", "")) is not None:
            raise GuardConflictError(
                f"id {el.get('id')!r} is already used in the CIB",
                "remove or rename that element, then retry",
            )
    return clone


def _detach(el: Element) -> None:
    parent = el.getparent()
    if parent is not None:
        parent.remove(el)


def _ensure_constraint(cib: Element, tag: str, attrs: dict[str, str]) -> None:
    constraints = _section(cib, "constraints")
    existing = _by_id(cib, attrs["id"])
    if existing is None:
        etree.SubElement(constraints, tag, attrib=attrs)
        return
    if existing.tag != tag or existing.getparent() is not constraints:
        raise GuardConflictError(
            f"id {attrs['id']!r} is taken by a <{existing.tag}> that is not the guard's",
            f"remove it ({cmd.quoted(cmd.delete_constraint(attrs['id']))}), then retry",
        )
    for name, value in attrs.items():
        existing.set(name, value)


def add_guard(
    cib: Element, bundle_id: str, floating_name: str, *, constraints: bool = True
) -> CibChange:
    """Wire the guard of ``bundle_id`` (idempotent: converges a partial guard).

    With ``constraints=False`` only the guard clone is added. On a running bundle the clone must
    be started before the order constraint exists: added together, the scheduler restarts every
    replica "due to required guard start".
    """
    new = copy.deepcopy(cib)
    bundle_el = _bundle_element(new, bundle_id)
    ids = guard_ids(bundle_id)
    clone = _guard_clone(new, bundle_id)
    if clone is None:
        before = _nvpairs(bundle_el, "meta_attributes").get("interleave", GUARD_RECORD_UNSET)
        _section(new, "resources").append(
            _guard_clone_element(new, bundle_id, floating_name, before)
        )
    else:
        prim = clone.find("primitive")
        if prim is None:
            raise GuardConflictError(
                f"{ids['clone']} exists but holds no primitive",
                f"remove it ({cmd.quoted(cmd.delete_resource(ids['clone']))}), then add the "
                "guard again",
            )
        _set_nvpair(
            new,
            prim,
            "instance_attributes",
            f"{prim.get('id')}-instance_attributes",
            "image",
            floating_name,
        )
        _set_nvpair(
            new, clone, "meta_attributes", f"{ids['clone']}-meta_attributes", "interleave", "true"
        )
    if not constraints:
        return make_change(cib, new, f"add guard clone {ids['clone']} ({floating_name})")
    _ensure_constraint(
        new,
        "rsc_order",
        {
            "id": ids["order"],
            "first": ids["clone"],
            "then": bundle_id,
            "kind": "Mandatory",
            "first-action": "start",
            "then-action": "start",
        },
    )
    _ensure_constraint(
        new,
        "rsc_colocation",
        {"id": ids["colocation"], "rsc": bundle_id, "with-rsc": ids["clone"], "score": "INFINITY"},
    )
    _set_nvpair(
        new, bundle_el, "meta_attributes", f"{bundle_id}-meta_attributes", "interleave", "true"
    )
    return make_change(cib, new, f"add guard {ids['clone']} ({floating_name}) to {bundle_id}")


_REFERENCE_ATTRS = ("rsc", "with-rsc", "first", "then")


def remove_guard(cib: Element, bundle_id: str) -> CibChange:
    """Undo :func:`add_guard`: the clone, every constraint naming it, and our interleave."""
    new = copy.deepcopy(cib)
    bundle_el = _bundle_element(new, bundle_id)
    ids = guard_ids(bundle_id)
    clone = _guard_clone(new, bundle_id)
    if clone is None:
        return make_change(cib, new, f"no guard on {bundle_id}: nothing to remove")
    guard_names = {ids["clone"], ids["primitive"]}
    for constraint in list(_section(new, "constraints")):
        if not isinstance(constraint.tag, str):
            continue
        if any(constraint.get(a) in guard_names for a in _REFERENCE_ATTRS):
            _detach(constraint)
        elif any(ref.get("id") in guard_names for ref in constraint.iter("resource_ref")):
            raise GuardConflictError(
                f"constraint {constraint.get('id')!r} names the guard in a resource set",
                "remove the guard from it "
                f"({cmd.quoted(cmd.delete_constraint(constraint.get('id', '')))})",
            )
    record = _nvpairs(clone, "meta_attributes").get(GUARD_RECORD)
    _detach(clone)
    if record is not None:
        value = None if record == GUARD_RECORD_UNSET else record
        _set_nvpair(
            new, bundle_el, "meta_attributes", f"{bundle_id}-meta_attributes", "interleave", value
        )
    return make_change(cib, new, f"remove guard {ids['clone']} from {bundle_id}")


def clear_cli_constraints(
    cib: Element, resource: str, node: str | None = None, *, prefer: bool = False
) -> CibChange:
    """Delete leftover ``cli-ban-*`` (and with ``prefer``, ``cli-prefer-*``) locations of
    ``resource`` (on ``node`` only, if given), as ``crm_resource --clear`` would."""
    new = copy.deepcopy(cib)
    prefixes = ("cli-ban-", "cli-prefer-") if prefer else ("cli-ban-",)
    removed = []
    for el in _section(new, "constraints").findall("rsc_location"):
        if (
            el.get("id", "").startswith(prefixes)
            and el.get("rsc") == resource
            and (node is None or el.get("node") == node)
        ):
            removed.append(el.get("id", ""))
            _detach(el)
    what = ", ".join(removed) if removed else "nothing"
    return make_change(cib, new, f"clear {what}")


def _property_sets(cib: Element) -> list[Element]:
    return _section(cib, "crm_config").findall("cluster_property_set")


def set_cluster_property(cib: Element, name: str, value: str) -> CibChange:
    """Set a crm_config nvpair (in ``cib-bootstrap-options``, the set crm_attribute uses)."""
    new = copy.deepcopy(cib)
    config = _section(new, "crm_config")
    sets = _property_sets(new)
    target = next((s for s in sets if s.get("id") == "cib-bootstrap-options"), None)
    holder = next(
        (s for s in sets if any(nv.get("name") == name for nv in s.findall("nvpair"))), target
    )
    if holder is None:
        holder = etree.SubElement(
            config, "cluster_property_set", id=_unique_id(new, "cib-bootstrap-options")
        )
    for nv in holder.findall("nvpair"):
        if nv.get("name") == name:
            nv.set("value", value)
            break
    else:
        etree.SubElement(
            holder,
            "nvpair",
            id=_unique_id(new, f"{holder.get('id')}-{name}"),
            name=name,
            value=value,
        )
    return make_change(cib, new, f"set cluster property {name}={value}")


def delete_cluster_property(cib: Element, name: str) -> CibChange:
    new = copy.deepcopy(cib)
    for nvset in _property_sets(new):
        for nv in nvset.findall("nvpair"):
            if nv.get("name") == name:
                nvset.remove(nv)
    return make_change(cib, new, f"delete cluster property {name}")


def guard_pcs_commands(cib: Element, bundle_id: str, floating_name: str) -> list[list[str]]:
    """The ``pcs`` commands that wire the same guard as :func:`add_guard` (for --dry-run)."""
    bundle_el = _bundle_element(cib, bundle_id)
    ids = guard_ids(bundle_id)
    before = _nvpairs(bundle_el, "meta_attributes").get("interleave", GUARD_RECORD_UNSET)
    create = ["pcs", "resource", "create", ids["primitive"], ":".join(GUARD_AGENT)]
    create.append(f"image={floating_name}")
    for name, interval, timeout in GUARD_OPS:
        create += ["op", name, f"timeout={timeout}"]
        if interval != "0s":
            create.append(f"interval={interval}")
    create += ["clone", ids["clone"], "interleave=true", f"{GUARD_RECORD}={before}"]
    return [
        create,
        ["pcs", "resource", "bundle", "update", bundle_id, "meta", "interleave=true"],
        [
            "pcs",
            "constraint",
            "order",
            "start",
            ids["clone"],
            "then",
            "start",
            bundle_id,
            "kind=Mandatory",
            f"id={ids['order']}",
        ],
        [
            "pcs",
            "constraint",
            "colocation",
            "add",
            bundle_id,
            "with",
            ids["clone"],
            "INFINITY",
            f"id={ids['colocation']}",
        ],
    ]


def banned_nodes(cib: Element, resource_id: str) -> set[str]:
    """Nodes that ``resource_id`` can never run on: a -INFINITY node location constraint that
    is not a ``cli-`` leftover (those are reported on their own, see :func:`cli_constraints`)."""
    found = set()
    for el in _constraints(cib, "rsc_location"):
        if el.get("rsc") != resource_id or el.get("id", "").startswith("cli-"):
            continue
        if el.get("node") and el.get("score", "").lstrip("-+").upper() == "INFINITY":
            if el.get("score", "").startswith("-"):
                found.add(el.get("node", ""))
    return found


def clone_instances(mon: Element, clone_id: str) -> dict[str, str]:
    """Node -> role of each active instance of a clone, from ``crm_mon --output-as=xml``."""
    found: dict[str, str] = {}
    clones = (c for c in mon.iterfind("resources/clone") if c.get("id") == clone_id)
    for res in (r for c in clones for r in c.iterfind("resource")):
        for node in res.iterfind("node"):
            if res.get("active") == "true":
                found[node.get("name", "")] = _role(res.get("role"))
    return found
