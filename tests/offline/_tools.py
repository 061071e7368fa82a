"""Run Pacemaker tools on CIB files (no cluster) and read their XML results."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from lxml import etree

from pcmkimg.core import cib as C

NODES = ("controller-0", "controller-1", "controller-2")


def run(
    *args: str, cib_file: Path | None = None, check: bool = True
) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("CIB_file", None)
    if cib_file is not None:
        env["CIB_file"] = str(cib_file)
    proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=60)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(args)} -> rc {proc.returncode}\n{proc.stderr}")
    return proc


def write(path: Path, tree: etree._Element) -> Path:
    path.write_bytes(C.to_xml(tree))
    return path


def graph_ops(graph: Path) -> set[tuple[str, str]]:
    """(operation_key, node) of every resource action in a transition graph (--save-graph)."""
    root = etree.parse(str(graph)).getroot()
    return {(op.get("operation_key", ""), op.get("on_node", "")) for op in root.iter("rsc_op")}


def simulate(src: Path, dst: Path, *extra: str) -> set[tuple[str, str]]:
    """One simulated transition (with quorum) from ``src`` into ``dst``; its resource actions."""
    graph = dst.with_suffix(".graph.xml")
    run(
        "crm_simulate",
        "-x",
        str(src),
        "-S",
        "-O",
        str(dst),
        "-q",
        "1",
        "-Q",
        "-G",
        str(graph),
        *extra,
    )
    return graph_ops(graph)


def converge(src: Path, dst: Path, *extra: str, prefix: str = "", rounds: int = 4) -> Path:
    """Simulate (``extra`` in the first round) until a transition has nothing left to do for
    the resources whose ids start with ``prefix`` (the other bundles' inner resources never
    settle: crm_simulate leaves their guest nodes down)."""
    current = src
    for n in range(rounds):
        out = dst.with_name(f"{dst.stem}-{n}.xml")
        ops = simulate(current, out, *(extra if n == 0 else ()))
        current = out
        if not [key for key, _ in ops if key.startswith(prefix)]:
            return current
    raise AssertionError(f"no convergence after {rounds} transitions from {src}")


def status(cib_file: Path) -> C.ClusterStatus:
    out = run("crm_mon", "-1", "--output-as=xml", cib_file=cib_file).stdout
    return C.cluster_status(C.parse_crm_mon(out))
