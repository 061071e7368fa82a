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

The guard (README.md, "The guard agent"): a clone ``<bundle>-guard-clone`` of the primitive
``<bundle>-guard`` (``ocf:pcmkimg:floating-image``, ``image=<floating name>``), the order
``<bundle>-guard-order`` (start guard clone, then start bundle, Mandatory), the colocation
``<bundle>-guard-colocation`` (bundle with guard clone, score 999999: not INFINITY, which
Pacemaker 3.0 turns against a promotable bundle's inner instances, see
``read.GUARD_COLOCATION_SCORE``), ``interleave=true`` on the clone and on the bundle. The
bundle's ``interleave`` value from before the guard is recorded in the clone's meta attribute
``pcmkimg-bundle-interleave`` (``unset`` when there was none), so :func:`remove_guard` puts
back exactly what was there; a guard without that record (made by hand) leaves the bundle's
``interleave`` as it is.
"""

from __future__ import annotations

from pcmkimg.core.cib.edit import (
    GUARD_OPS,
    add_guard,
    delete_cluster_property,
    delete_ticket_state,
    guard_pcs_commands,
    remove_guard,
    set_bundle_image,
    set_bundle_meta,
    set_cluster_property,
    set_ticket_attribute,
    unwire_guard,
)
from pcmkimg.core.cib.patch import (
    CibChange,
    make_change,
    patch_changes,
)
from pcmkimg.core.cib.read import (
    GUARD_AGENT,
    GUARD_RECORD,
    GUARD_RECORD_UNSET,
    RUNTIMES,
    Bundle,
    CliConstraint,
    ColocationConstraint,
    Guard,
    Node,
    OrderConstraint,
    Primitive,
    all_banned_nodes,
    banned_nodes,
    bundle,
    bundles,
    cli_constraints,
    cluster_properties,
    colocation_constraints,
    guard_ids,
    nodes,
    order_constraints,
    rsc_defaults,
    ticket_element,
    ticket_state,
)
from pcmkimg.core.cib.status import (
    DEGRADED_EXITCODES,
    ClusterStatus,
    Failure,
    FailureKey,
    NodeStatus,
    ReplicaStatus,
    clone_instances,
    cluster_status,
    is_replica_resource,
)
from pcmkimg.core.cib.xml import (
    CibVersion,
    Element,
    XmlInput,
    cib_version,
    is_true,
    parse_cib,
    parse_crm_mon,
    parse_xml,
    to_xml,
)

__all__ = [
    "is_replica_resource",
    "Bundle",
    "CibChange",
    "CibVersion",
    "CliConstraint",
    "ClusterStatus",
    "ColocationConstraint",
    "DEGRADED_EXITCODES",
    "Element",
    "Failure",
    "FailureKey",
    "GUARD_AGENT",
    "GUARD_OPS",
    "GUARD_RECORD",
    "GUARD_RECORD_UNSET",
    "Guard",
    "Node",
    "NodeStatus",
    "OrderConstraint",
    "Primitive",
    "RUNTIMES",
    "ReplicaStatus",
    "XmlInput",
    "add_guard",
    "all_banned_nodes",
    "banned_nodes",
    "bundle",
    "bundles",
    "cib_version",
    "cli_constraints",
    "clone_instances",
    "cluster_properties",
    "ticket_element",
    "ticket_state",
    "cluster_status",
    "colocation_constraints",
    "delete_cluster_property",
    "delete_ticket_state",
    "guard_ids",
    "guard_pcs_commands",
    "is_true",
    "make_change",
    "nodes",
    "order_constraints",
    "parse_cib",
    "parse_crm_mon",
    "parse_xml",
    "patch_changes",
    "remove_guard",
    "rsc_defaults",
    "set_bundle_image",
    "set_bundle_meta",
    "set_cluster_property",
    "set_ticket_attribute",
    "to_xml",
    "unwire_guard",
]
