# GNU General Public License v2.0 or later (see https://www.gnu.org/licenses/gpl-2.0.txt)
"""Run pcmkimg the way its README documents it for machines: ``--json`` on stdout, one error
line on stderr, a documented exit code. The modules never parse pcmkimg's text output and never
do what pcmkimg does: they build its argv, run it, read its JSON document and map its exit
code to Ansible's result.

Python 3.9 (RHEL 9's) is the oldest interpreter this runs under.
"""

from __future__ import annotations

import json

# pcmkimg's exit codes (README, "Exit codes"), one short phrase each, for a failure's msg.
EXIT_CODES = {
    0: "success",
    1: "internal error in pcmkimg",
    2: "bad input",
    3: "refused: a precondition failed, or check found problems",
    4: "the update lease is held, or its value can't be read",
    5: "a node, the registry or the cluster can't be reached, or a tool failed",
    6: "the update failed on a node; that node was rolled back",
    7: "something is left to do by hand",
    129: "terminated by SIGHUP; bans and the lease were cleaned up",
    130: "interrupted; bans and the lease were cleaned up",
    131: "terminated by SIGQUIT; bans and the lease were cleaned up",
    143: "terminated by SIGTERM; bans and the lease were cleaned up",
}

# The options every module takes (documented in the doc fragment pcmkimg.cluster.common).
COMMON_ARGS = {
    "executable": {"type": "str", "default": "pcmkimg"},
    "conf": {"type": "path"},
}


def meaning(rc: int) -> str:
    """What exit code ``rc`` of pcmkimg means."""
    return EXIT_CODES.get(rc, "unknown exit code")


def error_line(stderr: str) -> str | None:
    """pcmkimg's error line on stderr (``pcmkimg: error: ...``), without its prefix."""
    prefix = "pcmkimg: error: "
    for line in reversed(stderr.splitlines()):
        if line.startswith(prefix):
            return line[len(prefix) :].strip()
    return None


def argv(module, command: list[str]) -> list[str]:
    """The argv that runs ``pcmkimg --json [--conf FILE] COMMAND...``: a list, never a shell
    string. ``executable`` without a slash is looked up on the node's PATH."""
    exe = module.params["executable"]
    if "/" not in exe:
        exe = module.get_bin_path(exe, required=True)
    full = [exe, "--json"]
    if module.params.get("conf"):
        full += ["--conf", module.params["conf"]]
    return full + command


def run(module, command: list[str]) -> tuple[int, dict | None, dict]:
    """Run pcmkimg with ``command``; return its exit code, its JSON document (None when stdout
    held none) and the raw fields a result carries (cmd, stdout, stderr)."""
    cmd = argv(module, command)
    rc, out, err = module.run_command(cmd, check_rc=False)
    raw = {"cmd": cmd, "stdout": out, "stderr": err}
    try:
        doc = json.loads(out)
    except ValueError:
        doc = None
    if not isinstance(doc, dict):
        doc = None
    return rc, doc, raw


def fail(module, rc: int, doc: dict | None, raw: dict, **result) -> None:
    """Fail the task with pcmkimg's exit code and error line in ``msg``, ``rc``, ``error``, the
    JSON ``report`` (None when pcmkimg gave none) and its stderr."""
    error = doc.get("error") if doc else None
    if not error:
        error = error_line(raw["stderr"]) or raw["stderr"].strip() or raw["stdout"].strip()
    if doc is None and rc == 0:
        error = f"pcmkimg printed no JSON document: {raw['stdout'].strip()[:500]}"
    module.fail_json(
        msg=f"pcmkimg exited {rc} ({meaning(rc)}): {error}",
        rc=rc,
        error=error,
        report=doc.get("report") if doc else None,
        cmd=raw["cmd"],
        stdout=raw["stdout"],
        stderr=raw["stderr"],
        **result,
    )
