"""Readers of the configuration section: bundles, guards, nodes, constraints, properties."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from pcmkimg.core import commands as cmd
from pcmkimg.core.cib.xml import (
    _FIX_CIB,
    Element,
    _int,
    is_true,
)
from pcmkimg.core.errors import BundleNotFoundError, CibStructureError, GuardConflictError
from pcmkimg.records import dataclass, field

GUARD_AGENT = ("ocf", "pcmkimg", "floating-image")
GUARD_RECORD = "pcmkimg-bundle-interleave"
GUARD_RECORD_UNSET = "unset"
GUARD_COLOCATION_SCORE = "999999"
"""The score of the bundle's colocation with its guard clone: the strongest that is not
INFINITY. Pacemaker 3.0 applies a promotable bundle's colocations to its inner instances too
when it chooses their roles; with ``interleave=true`` on the bundle it looks for a guard
instance on the instance's guest node, finds none and, for an INFINITY colocation only, stops
the instance ("cannot run because it cannot interleave with any instance of ...-guard-clone").
Where the guard cannot run, the Mandatory interleaved order still keeps the replica stopped.
An INFINITY colocation (a guard wired before) is still read as the guard's."""
RUNTIMES = ("podman", "docker", "rkt")


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
        if el.get("id") == element_id:
            return el
    return None


@dataclass(frozen=True)
class _Index:
    """The configuration's lookups, made in one pass: readers of many bundles use one index
    instead of scanning the whole configuration once per bundle (read-only: nothing is
    stored in the tree)."""

    by_id: Mapping[str, Element]
    """The first element of the configuration with each id."""
    orders: Mapping[tuple[str, str, str, str, str], str]
    """(first, then, kind, first-action, then-action) -> the first such order's id."""
    colocations: Mapping[tuple[str, str], str]
    """(rsc, with-rsc) -> the first such colocation's id, INFINITY or the guard's score."""


def _index(cib: Element) -> _Index:
    by_id: dict[str, Element] = {}
    for el in _config_elements(cib):
        element_id = el.get("id")
        if element_id is not None:
            by_id.setdefault(element_id, el)
    orders: dict[tuple[str, str, str, str, str], str] = {}
    for o in order_constraints(cib):
        orders.setdefault((o.first, o.then, o.kind, o.first_action, o.then_action), o.id)
    colocations: dict[tuple[str, str], str] = {}
    for c in colocation_constraints(cib):
        if c.score in ("INFINITY", "+INFINITY", GUARD_COLOCATION_SCORE):
            colocations.setdefault((c.rsc, c.with_rsc), c.id)
    return _Index(by_id, orders, colocations)


def _find_section(cib: Element, name: str) -> Element | None:
    """The section ``name`` of the configuration; None when the CIB has none (readers never
    create one: only the edits do, in their copy)."""
    config = cib.find("configuration")
    if config is None:
        raise CibStructureError("CIB has no <configuration>", _FIX_CIB)
    return config.find(name)


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
    attribute: str | None = None
    """The guard's ``attribute`` parameter: the node attribute it publishes (None: default)."""
    managed: bool = True
    """Neither the clone nor its primitive has ``is-managed=false``."""

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
    replicas_per_host: int = 1

    @property
    def promotable(self) -> bool:
        return self.promoted_max > 0

    @property
    def interleave(self) -> bool:
        return is_true(self.meta.get("interleave"))

    @property
    def target_role(self) -> str | None:
        return self.meta.get("target-role")

    @property
    def is_managed(self) -> bool:
        return is_true(self.meta.get("is-managed", "true"))

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
    return _guard_clone_in(_index(cib), bundle_id)


def _guard_clone_in(index: _Index, bundle_id: str) -> Element | None:
    ids = guard_ids(bundle_id)
    clone = index.by_id.get(ids["clone"])
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


def _find_guard(index: _Index, bundle_id: str) -> Guard | None:
    clone = _guard_clone_in(index, bundle_id)
    if clone is None:
        return None
    prim = clone.find("primitive")
    assert prim is not None  # checked by _guard_clone
    ids = guard_ids(bundle_id)
    clone_id = clone.get("id", "")
    order = index.orders.get((clone_id, bundle_id, "Mandatory", "start", "start"))
    colocation = index.colocations.get((bundle_id, clone_id))
    meta = _nvpairs(clone, "meta_attributes")
    params = _nvpairs(prim, "instance_attributes")
    return Guard(
        clone_id=clone_id,
        primitive_id=prim.get("id", ids["primitive"]),
        image=params.get("image"),
        order_id=order,
        colocation_id=colocation,
        clone_interleave=is_true(meta.get("interleave")),
        interleave_record=meta.get(GUARD_RECORD),
        attribute=params.get("attribute") or None,
        managed=all(
            is_true(m.get("is-managed", "true")) for m in (meta, _nvpairs(prim, "meta_attributes"))
        ),
    )


def _bundle_from(index: _Index, el: Element) -> Bundle:
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
        guard=_find_guard(index, bundle_id),
        replicas_per_host=_int(runtime_el.get("replicas-per-host"), 1),
    )


def _bundle_elements(cib: Element) -> Iterator[Element]:
    resources = _find_section(cib, "resources")
    if resources is not None:
        yield from resources.iter("bundle")


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
    """Every bundle of the CIB, in document order (one pass over the configuration)."""
    index = _index(cib)
    return [_bundle_from(index, el) for el in _bundle_elements(cib)]


def bundle(cib: Element, bundle_id: str) -> Bundle:
    element = _bundle_element(cib, bundle_id)
    return _bundle_from(_index(cib), element)


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
    members = _find_section(cib, "nodes")
    for el in members.findall("node") if members is not None else ():
        kind = el.get("type", "member")
        kind = "member" if kind == "normal" else kind
        uname = el.get("uname", el.get("id", ""))
        found[uname] = Node(id=el.get("id", uname), uname=uname, kind=kind)
    resources = _find_section(cib, "resources")
    for prim in resources.iter("primitive") if resources is not None else ():
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
    section = _find_section(cib, "constraints")
    return section.findall(tag) if section is not None else []


def cli_constraints(cib: Element) -> list[CliConstraint]:
    return [
        CliConstraint(
            id=el.get("id", ""),
            resource=el.get("rsc", ""),
            # With a lifetime (crm_resource --lifetime, pcmkimg's restart) the node is in a rule.
            node=el.get("node")
            or next(
                (e.get("value", "") for e in el.iterfind("rule/expression[@attribute='#uname']")),
                "",
            ),
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
    return _nvpairs(_find_section(cib, "crm_config"), "cluster_property_set")


def ticket_element(cib: Element, ticket: str) -> Element | None:
    """``/cib/status/tickets/ticket_state[@id=ticket]`` (None: no such state). A CIB without a
    status section (a configuration alone) has none."""
    return next(
        (el for el in cib.iterfind("status/tickets/ticket_state") if el.get("id") == ticket),
        None,
    )


def ticket_state(cib: Element, ticket: str) -> dict[str, str] | None:
    """The attributes of :func:`ticket_element` (None: no such state)."""
    el = ticket_element(cib, ticket)
    return None if el is None else {str(k): str(v) for k, v in el.attrib.items()}


def rsc_defaults(cib: Element) -> dict[str, str]:
    """Resource defaults (e.g. ``resource-stickiness``); rule-less meta sets only."""
    section = _find_section(cib, "rsc_defaults")
    result: dict[str, str] = {}
    for nvset in section.findall("meta_attributes") if section is not None else ():
        if nvset.find("rule") is not None:
            continue
        for nv in nvset.findall("nvpair"):
            result.setdefault(nv.get("name", ""), nv.get("value", ""))
    return result


def banned_nodes(cib: Element, resource_id: str) -> set[str]:
    """Nodes that ``resource_id`` can never run on: a -INFINITY node location constraint that
    is not a ``cli-`` leftover (those are reported on their own, see :func:`cli_constraints`)."""
    return set(all_banned_nodes(cib).get(resource_id, ()))


def all_banned_nodes(cib: Element) -> dict[str, set[str]]:
    """:func:`banned_nodes` of every resource, in one pass: resource id -> nodes."""
    found: dict[str, set[str]] = {}
    for el in _constraints(cib, "rsc_location"):
        if el.get("id", "").startswith("cli-") or not el.get("node"):
            continue
        score = el.get("score", "")
        if score.startswith("-") and score.lstrip("-+").upper() == "INFINITY":
            found.setdefault(el.get("rsc", ""), set()).add(el.get("node", ""))
    return found
