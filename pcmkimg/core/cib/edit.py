"""Edits of the CIB: each returns a :class:`CibChange` and never touches its input."""

from __future__ import annotations

import copy
import re

from lxml import etree

from pcmkimg import GUARD_MONITOR_INTERVAL, GUARD_TIMEOUTS
from pcmkimg.core import commands as cmd
from pcmkimg.core.cib.patch import CibChange, make_change
from pcmkimg.core.cib.read import (
    GUARD_AGENT,
    GUARD_COLOCATION_SCORE,
    GUARD_RECORD,
    GUARD_RECORD_UNSET,
    RUNTIMES,
    _bundle_element,
    _by_id,
    _config_elements,
    _find_section,
    _guard_clone,
    _nvpairs,
    guard_ids,
)
from pcmkimg.core.cib.xml import (
    _FIX_CIB,
    Element,
)
from pcmkimg.core.errors import CibStructureError, GuardConflictError

# (name, interval, timeout) of the guard primitive's operations, as pcs writes them.
GUARD_OPS = (
    ("monitor", f"{GUARD_MONITOR_INTERVAL}s", f"{GUARD_TIMEOUTS['monitor']}s"),
    ("start", "0s", f"{GUARD_TIMEOUTS['start']}s"),
    ("stop", "0s", f"{GUARD_TIMEOUTS['stop']}s"),
)


# --------------------------------------------------------------------------- small helpers


def _section(cib: Element, name: str) -> Element:
    """The section ``name`` of the configuration, created when missing (edits only)."""
    section = _find_section(cib, name)
    if section is None:
        config = cib.find("configuration")
        assert config is not None  # _find_section raised otherwise
        section = etree.SubElement(config, name)
    return section


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
        {
            "id": ids["colocation"],
            "rsc": bundle_id,
            "with-rsc": ids["clone"],
            "score": GUARD_COLOCATION_SCORE,
        },
    )
    _set_nvpair(
        new, bundle_el, "meta_attributes", f"{bundle_id}-meta_attributes", "interleave", "true"
    )
    return make_change(cib, new, f"add guard {ids['clone']} ({floating_name}) to {bundle_id}")


_REFERENCE_ATTRS = ("rsc", "with-rsc", "first", "then")


def unwire_guard(cib: Element, bundle_id: str) -> CibChange:
    """Drop the guard's own order and colocation constraints (by their ids), nothing else.

    While they are gone the guard may restart (its image changes) without restarting a
    replica: the Mandatory order would restart every replica after its guard, and the
    colocation would stop a replica where its guard does not start. :func:`add_guard` puts them
    back.
    """
    new = copy.deepcopy(cib)
    _bundle_element(new, bundle_id)
    ids = guard_ids(bundle_id)
    dropped = []
    for constraint in list(_section(new, "constraints")):
        if constraint.get("id") in (ids["order"], ids["colocation"]):
            dropped.append(constraint.get("id", ""))
            _detach(constraint)
    what = " and ".join(dropped) if dropped else "no constraint"
    return make_change(cib, new, f"drop {what} of guard {ids['clone']}")


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


def _drop_property(cib: Element, name: str) -> None:
    if _find_section(cib, "crm_config") is None:
        return
    for nvset in _property_sets(cib):
        for nv in nvset.findall("nvpair"):
            if nv.get("name") == name:
                nvset.remove(nv)


def delete_cluster_property(cib: Element, name: str) -> CibChange:
    new = copy.deepcopy(cib)
    _drop_property(new, name)
    return make_change(cib, new, f"delete cluster property {name}")


def _ticket_states(cib: Element, ticket: str) -> list[Element]:
    return [el for el in cib.iterfind("status/tickets/ticket_state") if el.get("id") == ticket]


def set_ticket_attribute(
    cib: Element, ticket: str, name: str, value: str, *, drop_property: str | None = None
) -> CibChange:
    """Set attribute ``name`` of the ticket state ``ticket`` in the status section
    (``/cib/status/tickets/ticket_state``, what ``crm_ticket`` shows), creating what is
    missing; with ``drop_property`` the cluster property of that name goes in the same change.
    """
    new = copy.deepcopy(cib)
    states = _ticket_states(new, ticket)
    if states:
        states[0].set(name, value)
    else:
        status = new.find("status")
        if status is None:
            status = etree.SubElement(new, "status")
        tickets = status.find("tickets")
        if tickets is None:
            tickets = etree.SubElement(status, "tickets")
        etree.SubElement(tickets, "ticket_state", {"id": ticket, name: value})
    if drop_property is not None:
        _drop_property(new, drop_property)
    return make_change(cib, new, f"set ticket {ticket} {name}={value}")


def delete_ticket_state(cib: Element, ticket: str) -> CibChange:
    """Delete the ticket state ``ticket`` (nothing when there is none)."""
    new = copy.deepcopy(cib)
    for el in _ticket_states(new, ticket):
        _detach(el)
    return make_change(cib, new, f"delete ticket state {ticket}")


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
            GUARD_COLOCATION_SCORE,
            f"id={ids['colocation']}",
        ],
    ]
