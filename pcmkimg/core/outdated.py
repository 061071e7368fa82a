"""``pcmkimg outdated``: does the registry serve a newer image under the name a node runs? Pure.

For each service and node, :class:`NodeImage` is what the node has behind the floating name:
the image's real names (those ``status`` shows: the names the last update installed) and its
``RepoDigests``. Each real name with a tag and a registry (``REG/NS/IMG:TAG``; not
``localhost/``) is a *reference* to ask the registry about, once whatever the number of nodes
(:func:`references`). The registry's answer, :class:`Served`, is the digest of the manifest it
serves now (:func:`served`: the sha256 of the raw bytes, as podman records it), and for a
manifest list or an OCI index the digests of its instances.

A name is *current* on a node when one of the node's digests of that repository is among them
(podman records a pulled list's digest and its instance's: either matches), else *outdated*: the
registry moved the tag. A node is ``outdated`` when any of its names is, ``unknown`` when a
registry could not be asked about one (or no longer serves it) and none is outdated,
``current`` when every name is; ``untracked`` when its image has no name to ask about (pulled
by digest only, or a local name), ``missing`` when the floating name does not resolve there,
``unreachable`` when its store could not be read.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pcmkimg.core import naming
from pcmkimg.core.reference import InvalidReference, parse
from pcmkimg.records import dataclass, field

SCHEMA_ID = "pcmkimg-outdated/1"

STATES = ("current", "outdated", "unknown", "untracked", "missing", "unreachable")
"""A node's state for one service (the recorded node attribute's value)."""

ATTRIBUTE_PREFIX = "pcmkimg-outdated:"
"""The node attribute ``pcmkimg-outdated:SERVICE``: the ``:`` can't be part of a service name,
so it never meets the guard's ``pcmkimg-SERVICE`` of another service."""

RECORD_FILE = "outdated.json"
"""The recorded result of the last ``outdated --record``, in the state directory."""

_LISTS = (
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.oci.image.index.v1+json",
)


def attribute_name(service: str) -> str:
    """The node attribute that records the service's state on a node."""
    return f"{ATTRIBUTE_PREFIX}{service}"


@dataclass(frozen=True)
class NodeImage:
    """What a node has behind a service's floating name."""

    node: str
    names: tuple[str, ...] = ()
    """The image's real names (the scheme's names left out)."""
    repo_digests: tuple[str, ...] = ()
    image_id: str | None = None
    """None: the floating name does not resolve there (or the store was not read)."""
    error: str | None = None
    """Why the node's store was not read."""


@dataclass(frozen=True)
class Served:
    """The registry's answer about one reference."""

    reference: str
    digest: str | None = None
    """The digest of the manifest (or list) it serves now; None when it could not say."""
    instances: tuple[str, ...] = ()
    """A manifest list's (OCI index's) instance digests."""
    error: str | None = None
    """Why there is no digest: the registry could not be asked, or no longer serves the name."""
    gone: bool = False
    """The registry answered that it does not serve the name (manifest or repository unknown)."""

    @property
    def digests(self) -> frozenset[str]:
        return frozenset(d for d in (self.digest, *self.instances) if d)


def served(reference: str, raw: bytes) -> Served:
    """The answer of a raw manifest: its sha256, and a list's instances."""
    digest = "sha256:" + hashlib.sha256(raw).hexdigest()
    try:
        doc = json.loads(raw)
    except ValueError:
        doc = None
    instances: tuple[str, ...] = ()
    if isinstance(doc, dict) and (
        doc.get("mediaType") in _LISTS or isinstance(doc.get("manifests"), list)
    ):
        instances = tuple(
            str(m["digest"])
            for m in doc.get("manifests") or ()
            if isinstance(m, dict) and isinstance(m.get("digest"), str)
        )
    return Served(reference, digest, instances)


def askable(name: str) -> bool:
    """Whether a registry can be asked about ``name``: a tag on a registry (not localhost)."""
    try:
        ref = parse(name)
    except InvalidReference:
        return False
    return bool(ref.tag and ref.domain and ref.domain != "localhost" and not ref.digest)


def registry_of(reference: str) -> str:
    """The registry host[:port] of an askable reference."""
    return parse(reference).domain or ""


def repository(reference: str) -> str:
    """``REG/NS/IMG`` of ``REG/NS/IMG:TAG``."""
    return parse(reference).repository


def references(images: Iterable[NodeImage]) -> list[str]:
    """Every distinct reference to ask about, sorted."""
    return sorted({n for i in images for n in i.names if askable(n)})


def _digests_of(image: NodeImage, name: str) -> list[str]:
    repo = repository(name)
    return sorted(d.partition("@")[2] for d in image.repo_digests if d.partition("@")[0] == repo)


def judge(image: NodeImage, answers: Mapping[str, Served]) -> dict[str, Any]:
    """A node's row: its state and, per name asked about, what it has and what is served."""
    row: dict[str, Any] = {
        "node": image.node,
        "image_id": image.image_id,
        "names": list(image.names),
        "error": image.error,
        "checks": [],
    }
    if image.error is not None:
        row["state"] = "unreachable"
        return row
    if image.image_id is None:
        row["state"] = "missing"
        return row
    states = []
    for name in image.names:
        if not askable(name):
            continue
        have = _digests_of(image, name)
        answer = answers.get(name, Served(name, error="not asked"))
        if answer.digest is None:
            state = "unknown"
        else:
            state = "current" if answer.digests & set(have) else "outdated"
        states.append(state)
        row["checks"].append(
            {
                "reference": name,
                "node_digests": have,
                "registry_digest": answer.digest,
                "state": state,
                "error": answer.error,
            }
        )
    if not states:
        row["state"] = "untracked"
    elif "outdated" in states:
        row["state"] = "outdated"
    elif "unknown" in states:
        row["state"] = "unknown"
    else:
        row["state"] = "current"
    return row


@dataclass(frozen=True)
class ServiceImages:
    """A service and what each of its nodes has."""

    service: str
    bundle: str
    floating: str
    nodes: Sequence[NodeImage] = field(default_factory=tuple)


def document(services: Sequence[ServiceImages], answers: Mapping[str, Served]) -> dict[str, Any]:
    """The ``outdated --json`` document (schema :data:`SCHEMA_ID`)."""
    rows = []
    for s in services:
        nodes = [judge(n, answers) for n in s.nodes]
        rows.append(
            {
                "service": s.service,
                "bundle": s.bundle,
                "floating": s.floating,
                "outdated": [n["node"] for n in nodes if n["state"] == "outdated"],
                "nodes": nodes,
            }
        )
    refs = [
        {
            "reference": a.reference,
            "registry": registry_of(a.reference),
            "digest": a.digest,
            "error": a.error,
            "gone": a.gone,
        }
        for _, a in sorted(answers.items())
    ]
    return {
        "schema": SCHEMA_ID,
        "outdated": any(s["outdated"] for s in rows),
        "complete": all(r["digest"] is not None for r in refs),
        "references": refs,
        "services": rows,
    }


def failed_lines(doc: Mapping[str, Any]) -> list[str]:
    """One line per reference the registry could not be asked about (or no longer serves)."""
    return [f"{r['reference']}: {r['error']}" for r in doc["references"] if r["digest"] is None]


def lines(doc: Mapping[str, Any]) -> list[str]:
    """The human form of :func:`document`: per service, per node its state and why."""
    out = []
    for s in doc["services"]:
        out.append(f"{s['service']}  bundle {s['bundle']}  floating {s['floating']}")
        for n in s["nodes"]:
            if n["state"] == "unreachable":
                out.append(f"  {n['node']}: unreachable: {n['error']}")
                continue
            if n["state"] == "missing":
                out.append(f"  {n['node']}: missing: the floating name does not resolve there")
                continue
            if n["state"] == "untracked":
                names = ", ".join(n["names"]) or "no other name"
                out.append(f"  {n['node']}: untracked: no tag on a registry to ask about ({names})")
                continue
            for c in n["checks"]:
                have = c["node_digests"][0][:19] if c["node_digests"] else "no digest"
                if c["state"] == "outdated":
                    what = f"OUTDATED: has {have}, the registry serves {c['registry_digest'][:19]}"
                elif c["state"] == "current":
                    what = f"current ({have})"
                else:
                    what = f"unknown: {c['error']}"
                out.append(f"  {n['node']}: {c['reference']} {what}")
    if not doc["services"]:
        out.append("no bundle runs behind a floating name")
    behind = sorted({n for s in doc["services"] for n in s["outdated"]})
    if behind:
        out.append(f"an update is available on: {', '.join(behind)}")
    return out


def real_names(names: Iterable[str]) -> tuple[str, ...]:
    """The names of an image that are not the scheme's (floating, rollback, hold)."""
    return tuple(sorted(n for n in names if not naming.is_scheme_name(n)))


def node_states(doc: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """(node, service, state) of every node row (what ``--record`` writes as attributes)."""
    return [(n["node"], s["service"], n["state"]) for s in doc["services"] for n in s["nodes"]]
