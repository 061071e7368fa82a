"""Hardened parsing of CIB and crm_mon XML, serialisation, versions, attribute values."""

from __future__ import annotations

from typing import NamedTuple, Union

from lxml import etree

from pcmkimg.core import commands as cmd
from pcmkimg.core.errors import CibParseError, CibStructureError

Element = etree._Element
XmlInput = Union[bytes, str]

_FIX_CIB = f"pass the unmodified output of {cmd.quoted(cmd.query_cib())} (or a file saved from it)"
_FIX_MON = f"pass the unmodified output of {cmd.quoted(cmd.status_xml())}"


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


# --------------------------------------------------------------------------- small helpers


_TRUE_WORDS = frozenset({"true", "on", "yes", "y", "1"})


def is_true(value: str | None) -> bool:
    """A boolean as Pacemaker reads one (``crm_is_true``): true, on, yes, y or 1, in any case;
    anything else, None included, is false. Surrounding blanks are not ignored (nor are they by
    Pacemaker)."""
    return value is not None and value.lower() in _TRUE_WORDS


def _int(value: str | None, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except ValueError:
        return default
