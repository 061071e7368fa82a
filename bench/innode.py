"""Time commands from inside a sandbox node, as the node's own processes start them.

Pacemaker's executor forks each agent action inside the node; an operator's shell starts
``pcmkimg status`` there. Timing each run from the host through ``nsenter`` adds the cost of
entering the namespaces (and of forking the bench's large process) to every figure, a constant
that belongs to neither side and shrinks the ratio's spread unfairly. So one ``nsenter`` starts
:data:`HARNESS` (standard library only, the node's ``/usr/bin/python3``), which runs every case
once as a warm-up, then ``rounds`` interleaved rounds in a rotating order, and prints the
seconds of each run as JSON.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

HARNESS = r"""
import json, os, subprocess, sys, time
spec = json.loads(sys.argv[1])
cases = spec["cases"]
names = list(cases)

def once(name):
    case = cases[name]
    env = {**os.environ, **case["env"]}
    start = time.perf_counter()
    proc = subprocess.run(case["argv"], env=env, capture_output=True, check=False)
    took = time.perf_counter() - start
    if proc.returncode != case["expect"]:
        err = proc.stderr.decode(errors="replace")[-300:]
        said = f"{name} returned {proc.returncode}, expected {case['expect']}: {err}"
        print(json.dumps({"error": said}))
        sys.exit(0)
    return took

for name in names:
    once(name)
times = {name: [] for name in names}
for i in range(spec["rounds"]):
    shift = i % len(names)
    for name in names[shift:] + names[:shift]:
        times[name].append(once(name))
print(json.dumps({"times": times}))
"""


class HarnessError(Exception):
    """The harness could not time a case (a wrong exit code, or no answer)."""


@dataclass(frozen=True)
class Case:
    argv: Sequence[str]
    env: Mapping[str, str] = field(default_factory=dict)
    expect: int = 0


def time_in_node(
    cl: object, node: str, cases: Mapping[str, Case], rounds: int
) -> dict[str, list[float]]:
    """Seconds of each run of each case on ``node`` (the sandbox's Cluster), interleaved."""
    spec = {
        "rounds": rounds,
        "cases": {
            name: {"argv": list(c.argv), "env": dict(c.env), "expect": c.expect}
            for name, c in cases.items()
        },
    }
    argv = ["/usr/bin/python3", "-c", HARNESS, json.dumps(spec)]
    proc = cl.run(node, argv, check=False, timeout=3600)  # type: ignore[attr-defined]
    try:
        answer = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError) as exc:
        raise HarnessError(
            f"the timing harness on {node} gave no answer (rc {proc.returncode}): "
            f"{proc.stderr[-300:]}"
        ) from exc
    if "error" in answer:
        raise HarnessError(answer["error"])
    return {name: [float(t) for t in values] for name, values in answer["times"].items()}
