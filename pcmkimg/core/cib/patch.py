"""Format-2 patchsets and :class:`CibChange`, the one atomic change an edit returns."""

from __future__ import annotations

import copy
from collections.abc import Iterable

from lxml import etree

from pcmkimg.core.cib.xml import CibVersion, Element, cib_version, to_xml
from pcmkimg.records import dataclass

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


def _in_status(path: str) -> bool:
    return path == "/cib/status" or path.startswith("/cib/status/")


def make_change(original: Element, edited: Element, description: str) -> CibChange:
    """Wrap ``edited`` (an edited copy of ``original``, taken over): bump its epoch when the
    content differs (only ``num_updates`` when every change is under ``/cib/status``, as
    Pacemaker's own status writes do: the configuration did not change), and build the
    format-2 patch from ``original`` to it.

    The patch's source version is ``original``'s: Pacemaker applies it only to a CIB of exactly
    that version. Elements are matched by tag and id (id-less ones by tag and order); a change
    of sibling order alone is not expressed (no edit here reorders)."""
    changes = etree.Element("changes")
    _diff_children(original, edited, changes)
    root_changed = dict(original.attrib.items()) != dict(edited.attrib.items())
    if len(changes) or root_changed:
        version = cib_version(original)
        if not root_changed and all(_in_status(c.get("path", "")) for c in changes):
            # As Pacemaker's own status writes: the configuration's version stays.
            edited.set("num_updates", str(version.num_updates + 1))
        else:
            edited.set("epoch", str(version.epoch + 1))
            edited.set("num_updates", "0")
    return CibChange(
        description=description,
        base_version=cib_version(original),
        new_cib=edited,
        patch=_patch(original, edited, list(changes)),
    )
