"""The commands pcmkimg tells an operator to run, as data.

Every fix that names a command builds it here (an argv list) and shows it with :func:`shown`,
so that each one can be checked against the real tool (``tests/unit/test_commands.py`` runs
every function's argv through the tool's own parser, on a CIB file). Pure: nothing here runs.

Pacemaker's own tools come first (``crm_resource``, ``crm_attribute``, ``cibadmin``): their
options are the same on Pacemaker 2.1 and 3.0, while pcs changed its syntax between 0.10, 0.11
and 0.12 (e.g. ``pcs resource cleanup R --node N`` is refused by pcs 0.11). pcs is used only
where Pacemaker's tools have no simple equivalent, in forms that pcs 0.11 and 0.12 both accept.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

# --------------------------------------------------------------------------- showing


def shown(argv: Sequence[str]) -> str:
    """The argv as one shell-quoted line, for a message."""
    return shlex.join(argv)


def quoted(argv: Sequence[str]) -> str:
    """The argv as a shell line in backticks, as fixes in messages show commands."""
    return f"`{shown(argv)}`"


def _node(node: str | None) -> list[str]:
    return ["--node", node] if node else []


# --------------------------------------------------------------------------- crm_resource


def cleanup(resource: str, node: str | None = None) -> list[str]:
    """Forget the failures of ``resource`` (on ``node``): Pacemaker tries it again."""
    return ["crm_resource", "--cleanup", "--resource", resource, *_node(node)]


def refresh(resource: str, node: str | None = None) -> list[str]:
    """Forget the whole history of ``resource`` (on ``node``): Pacemaker probes it again."""
    return ["crm_resource", "--refresh", "--resource", resource, *_node(node)]


def clear_ban(resource: str, node: str) -> list[str]:
    """Remove the ``cli-ban``/``cli-prefer`` constraints of ``resource`` on ``node``."""
    return ["crm_resource", "--clear", "--resource", resource, "--node", node]


def wait() -> list[str]:
    """Wait until the cluster has nothing left to do."""
    return ["crm_resource", "--wait"]


def manage(resource: str) -> list[str]:
    """Managed again (``is-managed`` removed; managed is the default), as pcmkimg does it."""
    return ["crm_resource", "--resource", resource, "--meta", "--delete-parameter", "is-managed"]


def enable(resource: str) -> list[str]:
    """Started again (``target-role`` removed; Started is the default)."""
    return ["crm_resource", "--resource", resource, "--meta", "--delete-parameter", "target-role"]


def leave_resource_maintenance(resource: str) -> list[str]:
    """``resource`` leaves maintenance (its ``maintenance`` meta attribute removed)."""
    return ["crm_resource", "--resource", resource, "--meta", "--delete-parameter", "maintenance"]


def set_interleave(bundle: str) -> list[str]:
    """``interleave=true`` on a bundle (what ``pcmkimg guard add`` sets)."""
    return [
        "crm_resource",
        "--resource",
        bundle,
        "--meta",
        "--set-parameter",
        "interleave",
        "--parameter-value",
        "true",
    ]


def list_resources() -> list[str]:
    """Every resource id of the cluster."""
    return ["crm_resource", "--list"]


# --------------------------------------------------------------------------- crm_attribute


def leave_maintenance_mode() -> list[str]:
    """The cluster leaves maintenance mode."""
    return [
        "crm_attribute",
        "--type",
        "crm_config",
        "--name",
        "maintenance-mode",
        "--update",
        "false",
    ]


def delete_property(name: str) -> list[str]:
    """Remove a cluster property (e.g. an older pcmkimg's update lease ``pcmkimg-lease``)."""
    return ["crm_attribute", "--type", "crm_config", "--name", name, "--delete"]


def delete_ticket(ticket: str) -> list[str]:
    """Delete the state of a ticket that is not granted (e.g. the update lease
    ``pcmkimg-lease``: ``crm_ticket --ticket pcmkimg-lease --query-xml`` shows it); a granted
    one would need ``--force``, ours never is."""
    return ["crm_ticket", "--ticket", ticket, "--cleanup"]


def node_unstandby(node: str) -> list[str]:
    """``node`` leaves standby (the permanent ``standby`` node attribute removed, as pcs and
    crm_standby set it)."""
    return ["crm_attribute", "--node", node, "--name", "standby", "--delete"]


def node_unmaintenance(node: str) -> list[str]:
    """``node`` leaves maintenance (its ``maintenance`` node attribute removed)."""
    return ["crm_attribute", "--node", node, "--name", "maintenance", "--delete"]


# --------------------------------------------------------------------------- cibadmin, crm_mon


def delete_constraint(constraint_id: str) -> list[str]:
    """Remove the constraint with this id, whatever its kind."""
    return ["cibadmin", "--delete", "--xpath", f"//constraints/*[@id='{constraint_id}']"]


def delete_meta_set(set_id: str) -> list[str]:
    """Remove the meta attribute set with this id (e.g. a restart's pin of a bundle)."""
    return ["cibadmin", "--delete", "--xpath", f"//meta_attributes[@id='{set_id}']"]


def cluster_state() -> list[str]:
    """The cluster's state, once, for a person to read."""
    return ["crm_mon", "-1"]


def status_xml() -> list[str]:
    """The cluster's state as XML (what pcmkimg reads)."""
    return ["crm_mon", "-1", "--output-as=xml"]


def query_cib() -> list[str]:
    """The whole CIB (what pcmkimg reads)."""
    return ["cibadmin", "--query"]


# --------------------------------------------------------------------------- pcs


def delete_resource(resource: str) -> list[str]:
    """Remove a resource and every constraint that names it (pcs 0.10 to 0.12)."""
    return ["pcs", "resource", "delete", resource]


def stickiness_infinity() -> list[str]:
    """``resource-stickiness=INFINITY`` as the resource default (pcs 0.10 to 0.12;
    ``crm_attribute --type rsc_defaults`` fails on Pacemaker 2.1.5)."""
    return ["pcs", "resource", "defaults", "update", "resource-stickiness=INFINITY"]


# --------------------------------------------------------------------------- pcmkimg


def update(node: str, service: str, image: str = "REF") -> list[str]:
    """Point ``service``'s floating name on ``node`` at ``image`` and restart that replica."""
    return ["pcmkimg", "update", "--node", node, service, "--image", image]


def guard_add(bundle: str) -> list[str]:
    return ["pcmkimg", "guard", "add", bundle]


def guard_remove(bundle: str) -> list[str]:
    return ["pcmkimg", "guard", "remove", bundle]


def migrate(bundle: str) -> list[str]:
    return ["pcmkimg", "migrate", bundle]


def status(*services: str) -> list[str]:
    return ["pcmkimg", "status", *services]


# --------------------------------------------------------------------------- podman, skopeo


def enable_podman_socket() -> list[str]:
    """Start the podman API socket now and at boot (what the RPM's %post does)."""
    return ["systemctl", "enable", "--now", "podman.socket"]


def podman_login(registry: str = "REGISTRY") -> list[str]:
    return ["podman", "login", registry]


def podman_pull(ref: str = "REF") -> list[str]:
    return ["podman", "pull", ref]


def tag(image: str, name: str) -> list[str]:
    """Give ``image`` (an ID or a name) the name ``name`` on the node (podman moves it from
    any image that holds it)."""
    return ["podman", "tag", image, name]


def skopeo_list_tags(repository: str = "REGISTRY/REPO") -> list[str]:
    return ["skopeo", "list-tags", f"docker://{repository}"]


# --------------------------------------------------------------------------- ssh


def ssh_keyscan(host: str, port: int | None = None) -> list[str]:
    """The host keys ``host`` offers (to compare with its own /etc/ssh/*.pub)."""
    return ["ssh-keyscan", *(["-p", str(port)] if port else []), host]
