#!/usr/bin/python
# GNU General Public License v2.0 or later (see https://www.gnu.org/licenses/gpl-2.0.txt)
"""pcmkimg.cluster.check: ``pcmkimg --json check`` on a cluster node."""

from __future__ import annotations

DOCUMENTATION = r"""
module: check
short_description: Preflight of a Pacemaker cluster's bundles with pcmkimg
description:
  - Runs C(pcmkimg check) on a cluster node, which lists every problem that would make an
    update unsafe (a floating name that does not resolve, drift, failed operations, a bundle
    without a guard or without C(interleave=true), stickiness 0, leftover bans, a held lease,
    unreachable nodes or podman sockets, nodes offline, in standby or in maintenance), each
    with its fix.
  - The task fails with the list of problems when pcmkimg finds any (its exit code 3), unless
    I(fail_on_problems=false); then it succeeds and returns the list.
  - Any other failure of pcmkimg fails the task with its exit code and error line.
  - Read-only; it changes nothing and runs in check mode too.
version_added: 0.1.0
author:
  - pcmkimg maintainers
extends_documentation_fragment:
  - pcmkimg.cluster.common
options:
  cib_file:
    description:
      - Offline, read this saved CIB (C(cibadmin --query > FILE)) instead of the live cluster
        (C(--cib-file)). The nodes' image stores are still asked, as pcmkimg's configuration
        says.
    type: path
  fail_on_problems:
    description:
      - Fail the task when pcmkimg finds problems. With C(false) the task succeeds and returns
        them in I(problems), with I(ok=false).
    type: bool
    default: true
attributes:
  check_mode:
    support: full
    details: Read-only; runs the same in check mode.
  diff_mode:
    support: none
seealso:
  - module: pcmkimg.cluster.status
  - module: pcmkimg.cluster.update
"""

EXAMPLES = r"""
- name: Refuse to go on while pcmkimg finds a problem
  pcmkimg.cluster.check:
  become: true
  run_once: true

- name: Collect the problems without failing
  pcmkimg.cluster.check:
    fail_on_problems: false
  become: true
  run_once: true
  register: preflight

- name: Show each problem's kind and message (with its fix)
  ansible.builtin.debug:
    msg: "{{ item.kind }}: {{ item.message }}"
  loop: "{{ preflight.problems }}"
"""

RETURN = r"""
ok:
  description: True when pcmkimg found no problem.
  returned: when pcmkimg ran its check
  type: bool
problems:
  description: The problems pcmkimg found, each with its C(kind) and C(message) (with the fix).
  returned: when pcmkimg ran its check
  type: list
  elements: dict
  sample:
    - kind: stickiness
      message: >-
        resource-stickiness is 0: any change in the cluster can move replicas between nodes
        (pcmkimg's own restarts pin them; a node's failover or return does not); fix: pcs
        resource defaults update resource-stickiness=INFINITY
rc:
  description: pcmkimg's exit code (0 no problem, 3 problems found).
  returned: always
  type: int
error:
  description: pcmkimg's error line.
  returned: failure
  type: str
report:
  description: pcmkimg's JSON report of a failed check (C(ok), C(problems)).
  returned: failure
  type: dict
cmd:
  description: The argv that ran pcmkimg.
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402 - after the docs

from ansible_collections.pcmkimg.cluster.plugins.module_utils import pcmkimg  # noqa: E402

PROBLEMS = 3  # pcmkimg check's exit code when it found problems (README, "Exit codes")


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            pcmkimg.COMMON_ARGS,
            cib_file={"type": "path"},
            fail_on_problems={"type": "bool", "default": True},
        ),
        supports_check_mode=True,
    )
    command = ["check"]
    if module.params["cib_file"]:
        command += ["--cib-file", module.params["cib_file"]]
    rc, doc, raw = pcmkimg.run(module, command)
    if rc == 0 and doc is not None:
        module.exit_json(
            changed=False,
            ok=bool(doc.get("ok", True)),
            problems=doc.get("problems", []),
            rc=rc,
            cmd=raw["cmd"],
        )
    report = doc.get("report") if doc else None
    if rc != PROBLEMS or not isinstance(report, dict) or "problems" not in report:
        pcmkimg.fail(module, rc, doc, raw, changed=False)
    problems = report["problems"]
    if not module.params["fail_on_problems"]:
        # failed=False: Ansible takes a result with a non-zero rc for a failure otherwise
        module.exit_json(
            changed=False, failed=False, ok=False, problems=problems, rc=rc, cmd=raw["cmd"]
        )
    listed = "; ".join(f"{p.get('kind')}: {p.get('message')}" for p in problems)
    pcmkimg.fail(
        module,
        rc,
        {**doc, "error": f"{len(problems)} problem(s) found: {listed}"},
        raw,
        changed=False,
        ok=False,
        problems=problems,
    )


if __name__ == "__main__":
    main()
