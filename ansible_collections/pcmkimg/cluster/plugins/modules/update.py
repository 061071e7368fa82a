#!/usr/bin/python
# GNU General Public License v2.0 or later (see https://www.gnu.org/licenses/gpl-2.0.txt)
"""pcmkimg.cluster.update: ``pcmkimg --json update`` on a cluster node."""

from __future__ import annotations

DOCUMENTATION = r"""
module: update
short_description: Per-node minor update of a Pacemaker bundle with pcmkimg
description:
  - Runs C(pcmkimg update SERVICE --image REF) on a cluster node. pcmkimg pulls the image on the
    target nodes, then node by node moves the bundle's floating name to it and restarts only that
    node's replica, rolling back a node whose restart fails.
  - pcmkimg does the work and decides what is needed; an update to the image the nodes already
    run retags and restarts nothing, so the task is idempotent.
  - In check mode it runs C(pcmkimg update --dry-run) and returns the plan; nothing changes.
  - C(changed) is true when a node's floating name was moved, a replica was restarted, started
    after a failed start, or rolled back (the report's C(retagged), C(restarted) and
    C(rolled_back) flags and C(result) per node).
  - On failure C(msg) has pcmkimg's exit code, its meaning and pcmkimg's error line (with the
    fix), and C(rc), C(error) and C(report) (the nodes done so far) are returned.
version_added: 0.1.0
author:
  - pcmkimg maintainers
extends_documentation_fragment:
  - pcmkimg.cluster.common
options:
  service:
    description:
      - The bundle id, or the service name of its floating name (C(mariadb) for
        C(cluster.common.tag/mariadb:pcmklatest)).
    type: str
    required: true
  image:
    description:
      - The real image reference to run (C(REGISTRY/NS/IMAGE:TAG), C(NAME@sha256:...)). A
        floating or rollback name is refused by pcmkimg (exit 2).
    type: str
    required: true
  nodes:
    description:
      - The nodes to update (C(--node), repeated).
      - Give either I(nodes) or I(all); pcmkimg refuses both or neither (exit 2).
    type: list
    elements: str
  all:
    description:
      - Update every node that can run the bundle (C(--all)).
    type: bool
    default: false
  digest:
    description:
      - Refuse an image with another digest (C(--digest sha256:...)).
    type: str
  timeout:
    description:
      - Seconds to wait for each restart (C(--timeout)); pcmkimg's default (300) when not given.
      - The task can take several times this long, one restart per node.
    type: int
  no_restart:
    description:
      - Pull and retag only; restart nothing (C(--no-restart)).
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    details: Runs C(pcmkimg update --dry-run), which prints the plan and changes nothing.
  diff_mode:
    support: none
seealso:
  - module: pcmkimg.cluster.status
  - module: pcmkimg.cluster.check
"""

EXAMPLES = r"""
- name: Update mariadb to 17.1 on every node, one node at a time
  pcmkimg.cluster.update:
    service: mariadb
    image: registry.example.com:8787/rhosp17/openstack-mariadb:17.1
    all: true
  become: true
  run_once: true
  register: update

- name: Show what was done
  ansible.builtin.debug:
    msg: "{{ update.summary }}"

- name: Only the plan for one node (check mode runs pcmkimg update --dry-run)
  pcmkimg.cluster.update:
    service: mariadb
    image: registry.example.com:8787/rhosp17/openstack-mariadb:17.1
    digest: sha256:0b6a4814795c5e64aa9a7e1b2c7b0b36a4a3f1d5c4e7e2f4a1b2c3d4e5f60718
    nodes:
      - controller-1
  check_mode: true
  become: true
  run_once: true
"""

RETURN = r"""
plan:
  description: The plan pcmkimg printed, one line per step.
  returned: when pcmkimg got as far as the plan
  type: list
  elements: str
targets:
  description: The nodes the update was planned for.
  returned: when pcmkimg got as far as the plan
  type: list
  elements: str
dry_run:
  description: True in check mode (pcmkimg stopped after the plan).
  returned: always
  type: bool
report:
  description:
    - What the update did (C(update --json)'s C(report)), the nodes done so far on a failure.
    - C(nodes) holds per node C(node), C(before), C(after), C(retagged), C(restarted),
      C(rolled_back), C(down_seconds), C(restart_seconds), C(container_before),
      C(container_after) and C(result) (C(ok), C(unchanged), C(started), C(retag-only),
      C(rolled-back), C(rollback-failed), C(failed), C(pending)).
  returned: when the update ran, or failed with a report
  type: dict
  sample:
    bundle: mariadb-bundle
    service: mariadb
    target: registry.example.com:8787/ns/mariadb:17.1
    restarted: 1
    longest_down_seconds: 0.9
    longest_restart_seconds: 6.2
    nodes:
      - node: controller-0
        retagged: true
        restarted: true
        rolled_back: false
        result: ok
summary:
  description: pcmkimg's one-line summary of the update.
  returned: when the update ran
  type: str
  sample: 3 node(s) updated, 3 container(s) restarted, longest replica downtime 0.9s
rc:
  description: pcmkimg's exit code (see its README, I(Exit codes)).
  returned: always
  type: int
error:
  description: pcmkimg's error line (the message and its fix).
  returned: failure
  type: str
stderr:
  description: pcmkimg's progress lines (and its error line on a failure).
  returned: always
  type: str
cmd:
  description: The argv that ran pcmkimg.
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402 - after the docs

from ansible_collections.pcmkimg.cluster.plugins.module_utils import pcmkimg  # noqa: E402

# A node's result that changed the cluster whatever the flags say (a cleanup and start, a
# rollback); "retag-only" and "unchanged" change something only when the name moved.
CHANGING_RESULTS = ("ok", "started", "rolled-back", "rollback-failed")


def changed_by(report: dict | None) -> bool:
    """Whether the update ``report`` retagged, restarted, started or rolled back a node."""
    if not report:
        return False
    for node in report.get("nodes") or []:
        if node.get("retagged") or node.get("restarted") or node.get("rolled_back"):
            return True
        if node.get("result") in CHANGING_RESULTS:
            return True
    return False


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            pcmkimg.COMMON_ARGS,
            service={"type": "str", "required": True},
            image={"type": "str", "required": True},
            nodes={"type": "list", "elements": "str"},
            all={"type": "bool", "default": False},
            digest={"type": "str"},
            timeout={"type": "int"},
            no_restart={"type": "bool", "default": False},
        ),
        supports_check_mode=True,
    )
    p = module.params
    command = ["update", p["service"], "--image", p["image"]]
    for node in p["nodes"] or []:
        command += ["--node", node]
    if p["all"]:
        command.append("--all")
    if p["digest"] is not None:
        command += ["--digest", p["digest"]]
    if p["timeout"] is not None:
        command += ["--timeout", str(p["timeout"])]
    if p["no_restart"]:
        command.append("--no-restart")
    if module.check_mode:
        command.append("--dry-run")

    rc, doc, raw = pcmkimg.run(module, command)
    if rc != 0 or doc is None:
        report = doc.get("report") if doc else None
        pcmkimg.fail(module, rc, doc, raw, changed=changed_by(report), dry_run=module.check_mode)
    module.exit_json(
        changed=False if module.check_mode else changed_by(doc.get("report")),
        dry_run=bool(doc.get("dry_run", False)),
        plan=doc.get("plan", []),
        targets=doc.get("targets", []),
        report=doc.get("report"),
        summary=doc.get("summary"),
        rc=rc,
        cmd=raw["cmd"],
        stderr=raw["stderr"],
    )


if __name__ == "__main__":
    main()
