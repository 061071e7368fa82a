"""``python -m bench``: bring up a sandbox cluster, guard a bundle, time the agents, tear down.

Exit status: 0 when every budget holds, 1 when one is over budget (printed ``OVER BUDGET``),
2 when the benchmark itself could not run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

from bench import innode, status_figures
from tests.sandbox import lifecycle
from tests.sandbox.cluster import Cluster, from_state, wait_idle
from tests.sandbox.proc import SandboxError
from tests.sandbox.state import load, valid_name

SERVICE = "bench"
FLOATING = f"cluster.common.tag/{SERVICE}:pcmklatest"
BUNDLE = f"{SERVICE}-bundle"
GUARD = f"{BUNDLE}-guard"
NODE = "controller-0"
OUR_AGENT = "/usr/lib/ocf/resource.d/pcmkimg/floating-image"
PODMAN_AGENT = "/usr/lib/ocf/resource.d/heartbeat/podman"


class BenchError(Exception):
    """The benchmark could not run (not a budget miss)."""


@dataclass(frozen=True)
class Budget:
    """``ours`` must take at most ``ratio`` times as long as ``baseline`` (medians)."""

    label: str
    ours: str
    baseline: str
    ratio: float


#: The guard's monitor runs next to the bundle's own podman monitor on every node: issue 14's
#: budget is at most a quarter of its wall time (0.25; was 0.5). Without the API socket (the
#: podman command fallback, a degraded mode) it may cost as much as the podman monitor (1.0).
#: meta-data is what pcs and Pacemaker call most: at most twice an empty /usr/bin/python3 (a
#: shell agent's meta-data is shown for scale only; no Python agent can match it).
BUDGETS = (
    Budget("agent monitor / podman monitor", "agent monitor", "podman monitor", 0.25),
    Budget(
        "agent monitor, podman command fallback / podman monitor",
        "agent monitor (no API socket)",
        "podman monitor",
        1.0,
    ),
    Budget("agent meta-data / empty python3", "agent meta-data", "python3 -c pass", 2.0),
)


def cases(cl: Cluster) -> dict[str, innode.Case]:
    """Name -> the action as Pacemaker's executor runs it on NODE (environment only). Both
    monitors check the same running replica."""
    monitor = {"OCF_RESKEY_CRM_meta_interval": "30000", "OCF_RESKEY_CRM_meta_timeout": "30000"}
    # No PYTHONPATH, as the executor's: the node's .pth puts the checkout on the path, as the
    # RPM puts its packages there.
    base = {"OCF_ROOT": "/usr/lib/ocf"}
    ours = {
        **base,
        "OCF_RESOURCE_INSTANCE": GUARD,
        "OCF_RESKEY_image": FLOATING,
        "OCF_RESKEY_podman_url": cl.node(NODE).url,
        **monitor,
    }
    bogus = {**ours, "OCF_RESKEY_podman_url": "unix:///nonexistent/podman.sock"}
    podman = {
        **base,
        "OCF_RESOURCE_INSTANCE": f"{BUNDLE}-podman-0",
        "OCF_RESKEY_name": f"{BUNDLE}-podman-0",
        "OCF_RESKEY_image": FLOATING,
        **monitor,
    }
    return {
        "agent monitor": innode.Case([OUR_AGENT, "monitor"], ours),
        "agent monitor (no API socket)": innode.Case([OUR_AGENT, "monitor"], bogus),
        "podman monitor": innode.Case([PODMAN_AGENT, "monitor"], podman),
        "agent meta-data": innode.Case([OUR_AGENT, "meta-data"], base),
        "podman meta-data": innode.Case([PODMAN_AGENT, "meta-data"], base),
        "python3 -c pass": innode.Case(["/usr/bin/python3", "-c", "pass"]),
    }


def measure(cl: Cluster, rounds: int) -> dict[str, list[float]]:
    """Every case once per round on NODE, in a rotating order (interleaved), after one
    warm-up; timed inside the node (bench.innode)."""
    try:
        return innode.time_in_node(cl, NODE, cases(cl), rounds)
    except innode.HarnessError as exc:
        raise BenchError(str(exc)) from exc


def report(times: dict[str, list[float]], rounds: int) -> bool:
    """Print the medians and the budgets; True when every budget holds."""
    med = {name: statistics.median(values) for name, values in times.items()}
    width = max(len(n) for n in med)
    print(f"median of {rounds} interleaved rounds on {NODE} (ms; min-max):")
    for name, values in times.items():
        print(
            f"  {name:<{width}}  {med[name] * 1000:8.1f}   "
            f"({min(values) * 1000:.1f}-{max(values) * 1000:.1f})"
        )
    return check_budgets(times, BUDGETS, "budgets")


def check_budgets(times: dict[str, list[float]], budgets: Sequence[Budget], title: str) -> bool:
    """Print each budget's ratio of medians and verdict; True when every one holds."""
    ok = True
    print(f"{title}:")
    for b in budgets:
        ratio = statistics.median(times[b.ours]) / statistics.median(times[b.baseline])
        verdict = "OK" if ratio <= b.ratio else "OVER BUDGET"
        ok = ok and ratio <= b.ratio
        print(f"  {b.label}: {ratio:.2f} (budget <= {b.ratio:g}) {verdict}")
    return ok


def setup(cl: Cluster, registry: str) -> None:
    ref = f"{registry}/ns1/svc:1.0"
    for node in cl.names:
        cl.podman(node, "pull", "-q", ref)
        cl.podman(node, "tag", ref, FLOATING)
    cl.run(
        NODE,
        ["pcs", "resource", "bundle", "create", BUNDLE, "container", "podman"]
        + [f"image={FLOATING}", "replicas=3", "network=host"],
    )
    cl.pcmkimg(NODE, "guard", "add", BUNDLE)
    wait_idle(cl)
    mon = cl.crm_mon()
    where = {
        n.get("name")
        for r in mon.iterfind(f".//bundle[@id='{BUNDLE}']/replica/resource[@active='true']")
        for n in r.iterfind("node")
    }
    if NODE not in where:
        raise BenchError(f"the bundle's replica did not start on {NODE}")


# --------------------------------------------------------------------------- restarts (issue 14)

#: The restart budgets of issue 14, each a ratio of medians in one run (min/median/max of
#: RESTART_RUNS runs): 1. replica downtime during ``update --node`` at most 0.6x the bare
#: ``crm_resource --restart`` downtime (the container's own podman stop + start shown beside);
#: 2. the update step's wall time at most 0.5x the bare pull + tag + ``crm_resource --restart``
#: + ``--wait`` (image already pulled); 3. ``update --all`` on 3 nodes at most one pull plus 3
#: restart steps plus 1 s.
RESTART_RUNS = 3
RESTART_BUDGETS = (
    Budget(
        "1. downtime: update --node / bare crm_resource --restart",
        "update downtime",
        "bare restart downtime",
        0.6,
    ),
    Budget(
        "2. step wall: update --node / bare pull+tag+restart+wait",
        "update --node wall",
        "bare pull+tag+restart+wait",
        0.5,
    ),
    Budget(
        "3. update --all / (pull + 3 restart steps + 1 s)",
        "update --all wall",
        "pull + 3 restart steps + 1 s",
        1.0,
    ),
)
LIMIT = "bench-limit"  # a plain container of the same image on NODE: podman stop + start


def _event_time(event: dict[str, object]) -> float:
    nano = event.get("timeNano")
    if nano:
        return int(str(nano)) / 1e9
    when = str(event.get("Time") or event.get("time") or "0")
    if when.isdigit():
        return float(when)
    head, _, frac = when.rstrip("Z").partition(".")
    from datetime import datetime, timezone

    base = datetime.fromisoformat(head).replace(tzinfo=timezone.utc).timestamp()
    return base + (float(f"0.{frac}") if frac else 0.0)


def container_downtime(cl: Cluster, node: str, name: str, since: float) -> float:
    """Seconds no container ``name`` ran on ``node`` after ``since`` (podman's events)."""
    import json

    from pcmkimg.core.images import downtime

    out = cl.podman(
        node,
        "events",
        "--since",
        str(int(since) - 1),
        "--until",
        str(int(time.time()) + 1),
        "--filter",
        f"container={name}",
        "--format",
        "json",
    )
    events = []
    for line in out.stdout.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        status = str(event.get("Status") or event.get("status") or event.get("Action") or "")
        events.append((_event_time(event), status))
    found = downtime(events, since)
    if found is None:
        raise BenchError(f"no stop and start of {name} on {node} in podman's events")
    return found


def _pcmkimg_update(cl: Cluster, ref: str, *where: str) -> tuple[float, dict]:  # type: ignore[type-arg]
    import json

    start = time.perf_counter()
    out = cl.pcmkimg(NODE, "--json", "update", SERVICE, "--image", ref, *where, check=False)
    wall = time.perf_counter() - start
    if out.returncode != 0:
        raise BenchError(
            f"pcmkimg update {' '.join(where)} exit {out.returncode}: {out.stderr[-500:]}"
        )
    return wall, json.loads(out.stdout)["report"]


def _run_timed(cl: Cluster, argv: list[str]) -> float:
    start = time.perf_counter()
    proc = cl.run(NODE, argv, check=False, timeout=300)
    if proc.returncode != 0:
        raise BenchError(f"{' '.join(argv)} exit {proc.returncode}: {proc.stderr.strip()[:300]}")
    return time.perf_counter() - start


def measure_restarts(
    cl: Cluster, registry: str, runs: int = RESTART_RUNS
) -> dict[str, list[float]]:
    """The restart figures on NODE's replica of the bench bundle (3 of 3), ``runs`` times each."""
    old, new = f"{registry}/ns1/svc:1.0", f"{registry}/ns1/svc:1.1"
    replica = next((r for r in cl.replicas(BUNDLE) if r.node == NODE and r.active), None)
    if replica is None:
        raise BenchError(f"no active replica on {NODE}")
    container = f"{BUNDLE}-podman-{replica.index}"
    times: dict[str, list[float]] = {
        k: []
        for k in (
            "update downtime",
            "bare restart downtime",
            "podman stop+start",
            "update --node wall",
            "update restart step",
            "bare pull+tag+restart+wait",
            "update --all wall",
            "pull",
            "pull + 3 restart steps + 1 s",
        )
    }
    cl.podman(NODE, "pull", "-q", new)
    cl.podman(NODE, "rm", "-f", LIMIT, check=False)
    # The image's own command, as the replica runs it (it ends on SIGTERM).
    cl.podman(NODE, "run", "-d", "--network=none", "--name", LIMIT, old)
    try:
        for _ in range(runs):
            # Ours: update --node to the new image (already pulled), then the bare way back.
            since = time.time()
            wall, rep = _pcmkimg_update(cl, new, "--node", NODE)
            (res,) = rep["nodes"]
            if res["result"] != "ok":
                raise BenchError(f"update --node: {res}")
            times["update --node wall"].append(wall)
            times["update restart step"].append(float(res["restart_seconds"]))
            times["update downtime"].append(container_downtime(cl, NODE, container, since))
            wait_idle(cl)
            since = time.time()
            step = _run_timed(cl, ["podman", "pull", "-q", old])
            step += _run_timed(cl, ["podman", "tag", old, FLOATING])
            t0 = time.time()
            step += _run_timed(
                cl,
                [
                    "crm_resource",
                    "--restart",
                    "--resource",
                    BUNDLE,
                    "--node",
                    NODE,
                    "--timeout=120s",
                ],
            )
            step += _run_timed(cl, ["crm_resource", "--wait", "--timeout=120s"])
            times["bare pull+tag+restart+wait"].append(step)
            times["bare restart downtime"].append(container_downtime(cl, NODE, container, t0))
            since = time.time()
            _run_timed(cl, ["podman", "stop", LIMIT])
            _run_timed(cl, ["podman", "start", LIMIT])
            times["podman stop+start"].append(container_downtime(cl, NODE, LIMIT, since))
            # The image back on every node: the next update --node changes it again.
        restart_step = statistics.median(times["update restart step"])
        for i in range(runs):
            # update --all to an image no node has (removed first), then one bare pull of it.
            target = new if i % 2 == 0 else old
            for node in cl.names:
                cl.podman(node, "rmi", target, check=False)
            wall, rep = _pcmkimg_update(cl, target, "--all")
            if [n["result"] for n in rep["nodes"]] != ["ok"] * 3:
                raise BenchError(f"update --all: {rep['nodes']}")
            times["update --all wall"].append(wall)
            cl.podman(NODE, "rmi", target, check=False)
            pull = _run_timed(cl, ["podman", "pull", "-q", target])
            times["pull"].append(pull)
            times["pull + 3 restart steps + 1 s"].append(pull + 3 * restart_step + 1.0)
    finally:
        cl.podman(NODE, "rm", "-f", LIMIT, check=False)
    return times


def report_restarts(times: dict[str, list[float]], runs: int = RESTART_RUNS) -> bool:
    """Print the restart table (s; min / median / max) and its budgets; True when they hold."""
    width = max(len(n) for n in times)
    print(f"restarts (issue 14), {runs} runs on {NODE}'s replica (s: min / median / max):")
    for name, values in times.items():
        print(
            f"  {name:<{width}}  {min(values):7.2f} {statistics.median(values):7.2f} "
            f"{max(values):7.2f}"
        )
    return check_budgets(times, RESTART_BUDGETS, "restart budgets")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--rounds", type=int, default=15, help="interleaved rounds (15)")
    parser.add_argument(
        "--name", default=f"b{os.getpid() % 10**6}", help="sandbox name (1-8 a-z0-9)"
    )
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    try:
        valid_name(args.name)
    except ValueError as exc:
        parser.error(str(exc))
    if os.geteuid() != 0:
        print("bench: error: run as root (the sandbox cluster needs it)", file=sys.stderr)
        return 2
    print(f"bench: bringing up sandbox {args.name} ...", file=sys.stderr, flush=True)
    try:
        status_figures.byte_compile()  # the installed form: modules load from bytecode
        try:
            info = lifecycle.up_detached(args.name)
            state = load(args.name)
            if state is None:
                raise BenchError(f"sandbox {args.name} left no state")
            cl = from_state(state)
            setup(cl, str(info["registry"]))
            print(f"bench: measuring ({args.rounds} rounds) ...", file=sys.stderr, flush=True)
            times = measure(cl, args.rounds)
            print("bench: measuring status (live) ...", file=sys.stderr, flush=True)
            live_status = status_figures.live_status_figure(cl, NODE, max(10, args.rounds))
            print("bench: measuring the restarts ...", file=sys.stderr, flush=True)
            restarts = measure_restarts(cl, str(info["registry"]))
        finally:
            print(f"bench: tearing down sandbox {args.name}", file=sys.stderr, flush=True)
            lifecycle.down(args.name)
        print("bench: measuring status and model offline ...", file=sys.stderr, flush=True)
        figures = [live_status, *status_figures.offline_figures(max(10, args.rounds))]
    except (BenchError, SandboxError, RuntimeError, OSError, ValueError) as exc:
        print(f"bench: error: {exc}", file=sys.stderr)
        return 2
    except status_figures.FigureError as exc:
        print(f"bench: error: {exc}", file=sys.stderr)
        return 2
    print("status and model (issue 14, budgets 5-7):")
    print("\n".join(status_figures.table(figures)))
    status_ok = all(f.ok for f in figures)
    agents_ok = report(times, args.rounds)
    restarts_ok = report_restarts(restarts)
    return 0 if agents_ok and restarts_ok and status_ok else 1


if __name__ == "__main__":
    sys.exit(main())
