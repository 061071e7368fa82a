#!/usr/bin/python
# GNU General Public License v2.0 or later (see https://www.gnu.org/licenses/gpl-2.0.txt)
"""pcmkimg.cluster.status: ``pcmkimg --json status`` on a cluster node, as facts."""

from __future__ import annotations

DOCUMENTATION = r"""
module: status
short_description: What runs behind each bundle's floating name on each node, as facts
description:
  - Runs C(pcmkimg status) on a cluster node and returns its JSON document (schema
    C(pcmkimg-status/1), pcmkimg's C(status_schema.json)) as the fact C(pcmkimg_status) and as
    C(status).
  - Per bundle behind a floating name and per node, the real image behind the floating name
    with its digest, the image the running container uses, drift, the replica's role, the
    guard's state and failed operations.
  - Read-only; it changes nothing and runs in check mode too.
version_added: 0.1.0
author:
  - pcmkimg maintainers
extends_documentation_fragment:
  - pcmkimg.cluster.common
options:
  services:
    description:
      - Only these services (bundle ids or service names); all when empty.
    type: list
    elements: str
    default: []
  cib_file:
    description:
      - Offline, read this saved CIB (C(cibadmin --query > FILE)) instead of the live cluster
        (C(--cib-file)). The nodes' image stores are still asked, as pcmkimg's configuration
        says.
    type: path
attributes:
  check_mode:
    support: full
    details: Read-only; runs the same in check mode.
  diff_mode:
    support: none
  facts:
    support: full
seealso:
  - module: pcmkimg.cluster.check
  - module: pcmkimg.cluster.update
"""

EXAMPLES = r"""
- name: Read what each node runs behind the floating names
  pcmkimg.cluster.status:
  become: true
  run_once: true

- name: Nodes where a replica runs another image than its floating name names
  ansible.builtin.debug:
    msg: >-
      {{ pcmkimg_status.services | map(attribute='nodes') | flatten
         | selectattr('drift') | map(attribute='node') | list }}

- name: One service, from a saved CIB
  pcmkimg.cluster.status:
    services:
      - mariadb
    cib_file: /root/cib.xml
  become: true
"""

RETURN = r"""
status:
  description:
    - C(status --json)'s document, schema C(pcmkimg-status/1).
    - C(cluster) (C(quorum), C(dc)) and C(services), each with C(service), C(bundle),
      C(floating), C(guard), C(interleave) and C(nodes) (C(node), C(reachable), C(error),
      C(can_run), C(floating), C(container), C(drift), C(role), C(guard), C(failures)).
  returned: success
  type: dict
  sample:
    schema: pcmkimg-status/1
    cluster:
      quorum: true
      dc: controller-0
    services:
      - service: svc
        bundle: svc-bundle
        floating: cluster.common.tag/svc:pcmklatest
        guard: wired
        interleave: true
        nodes:
          - node: controller-0
            reachable: true
            drift: false
            role: Started
ansible_facts:
  description: The same document as the fact C(pcmkimg_status).
  returned: success
  type: dict
  contains:
    pcmkimg_status:
      description: C(status --json)'s document.
      type: dict
      returned: success
rc:
  description: pcmkimg's exit code.
  returned: always
  type: int
error:
  description: pcmkimg's error line (the message and its fix).
  returned: failure
  type: str
cmd:
  description: The argv that ran pcmkimg.
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402 - after the docs

from ansible_collections.pcmkimg.cluster.plugins.module_utils import pcmkimg  # noqa: E402


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            pcmkimg.COMMON_ARGS,
            services={"type": "list", "elements": "str", "default": []},
            cib_file={"type": "path"},
        ),
        supports_check_mode=True,
    )
    command = ["status"]
    if module.params["cib_file"]:
        command += ["--cib-file", module.params["cib_file"]]
    command += module.params["services"]
    rc, doc, raw = pcmkimg.run(module, command)
    if rc != 0 or doc is None:
        pcmkimg.fail(module, rc, doc, raw, changed=False)
    module.exit_json(
        changed=False,
        status=doc,
        ansible_facts={"pcmkimg_status": doc},
        rc=rc,
        cmd=raw["cmd"],
    )


if __name__ == "__main__":
    main()
