"""The release figure (issue 20): a release of four bundles vs single-service updates.

On the sandbox cluster, four guarded bundles (3 of 3, 2 of 3, the promotable one, and one of
3 ordered after the 3-of-3 one, interleaved clones: OpenStack's shape), both images of each
already pulled on every node, side by side in one run:

- **release**: ``pcmkimg update A=REF B=REF C=REF D=REF --all``;
- **operator's loop**: the four single-service ``update SERVICE --image REF --all`` one after
  the other (back to the other image); the slowest of them is the **single update --all**.

For each: the wall time, the container starts counted from podman's events on every node
(the loop restarts the dependent bundle twice per node: with the bundle it depends on, then
for its own image) and the longest replica downtime pcmkimg reported. Budgets: the release
at most 1.5x the slowest single update --all, at most 0.4x the loop.

:func:`measure` runs on a cluster the caller brought up (``python -m bench`` may call it);
``python -m bench.release_figure`` brings up its own sandbox and prints the figure alone.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from tests.sandbox.cluster import Cluster, wait_idle

NODE = "controller-0"
THREE, PAIR, DEP, STATEFUL = "relthree", "relpair", "reldep", "relstateful"
BUNDLES = {s: f"{s}-bundle" for s in (THREE, PAIR, DEP, STATEFUL)}
IMAGES = {
    THREE: ("ns1/svc:1.0", "ns1/svc:1.1"),
    PAIR: ("ns1/svc:1.0", "ns1/svc:1.1"),
    DEP: ("ns1/svc:1.0", "ns1/svc:1.1"),
    STATEFUL: ("ns1/stateful:1.0", "ns1/stateful:1.1"),
}
RELEASE_VS_SINGLE = 1.5
RELEASE_VS_LOOP = 0.4


class ReleaseBenchError(Exception):
    """The figure could not be measured."""


def floating(service: str) -> str:
    return f"cluster.common.tag/{service}:pcmklatest"


@dataclass
class Run:
    """One way of moving the four bundles: wall time, container starts, longest downtime."""

    label: str
    wall: float = 0.0
    starts: dict[str, int] = field(default_factory=dict)
    """bundle -> container starts seen in podman's events, every node."""
    longest_down: float = 0.0
    walls: dict[str, float] = field(default_factory=dict)
    """The loop's: service -> its own update --all."""


@contextlib.contextmanager
def bundles(cl: Cluster, registry: str) -> Iterator[None]:
    """The four bundles, guarded, every image of them pulled on every node; removed after."""
    cl.stateful_images()  # built and pushed on first use
    for paths in IMAGES.values():
        for path in paths:
            for node in cl.names:
                cl.podman(node, "pull", "-q", f"{registry}/{path}")
    with contextlib.ExitStack() as stack:
        ref = {s: f"{registry}/{IMAGES[s][0]}" for s in IMAGES}
        stack.enter_context(cl.guarded_bundle(BUNDLES[THREE], floating(THREE), ref[THREE]))
        stack.enter_context(cl.guarded_bundle(BUNDLES[PAIR], floating(PAIR), ref[PAIR], replicas=2))
        stack.enter_context(cl.guarded_bundle(BUNDLES[DEP], floating(DEP), ref[DEP]))
        cl.run(NODE, ["pcs", "constraint", "order", "start", BUNDLES[THREE], "then", "start",
                      BUNDLES[DEP]])  # fmt: skip
        stack.enter_context(
            cl.promotable_bundle(BUNDLES[STATEFUL], floating(STATEFUL), ref[STATEFUL])
        )
        wait_idle(cl)
        yield


def starts(cl: Cluster, since: float) -> dict[str, int]:
    """bundle -> container starts on every node since ``since`` (podman's events)."""
    found = {b: 0 for b in BUNDLES.values()}
    for node in cl.names:
        out = cl.podman(
            node, "events", "--since", str(int(since) - 1), "--until", str(int(time.time()) + 1),
            "--filter", "event=start", "--format", "json",
        )  # fmt: skip
        for line in out.stdout.splitlines():
            with contextlib.suppress(ValueError):
                event = json.loads(line)
                name = str(event.get("Name") or event.get("name") or "")
                when = int(event.get("timeNano") or 0) / 1e9
                if when and when < since:
                    continue
                for bundle in found:
                    if name.startswith(f"{bundle}-podman-"):
                        found[bundle] += 1
    return found


def _update(cl: Cluster, *args: str) -> tuple[float, dict]:  # type: ignore[type-arg]
    t0 = time.perf_counter()
    out = cl.pcmkimg(NODE, "--json", "update", *args, "--all", check=False, timeout=900)
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        raise ReleaseBenchError(f"update {' '.join(args)}: exit {out.returncode}: {out.stderr}")
    return wall, json.loads(out.stdout)["report"]


def _downs(report: dict) -> list[float]:  # type: ignore[type-arg]
    per = report["nodes"]
    results = [r for n in per for r in (n["services"].values() if "services" in n else [n])]
    return [float(r["down_seconds"]) for r in results if r.get("down_seconds") is not None]


def measure(cl: Cluster, registry: str) -> list[Run]:
    """The release (to the second image of each), then the operator's loop (back to the
    first), on the four bundles (see the module's text)."""
    with bundles(cl, registry):
        release = Run("release (4 bundles, one run)")
        since = time.time()
        args = [f"{s}={registry}/{IMAGES[s][1]}" for s in (THREE, PAIR, DEP, STATEFUL)]
        release.wall, report = _update(cl, *args)
        wait_idle(cl)
        release.starts = starts(cl, since)
        release.longest_down = max(_downs(report), default=0.0)
        loop = Run("operator's loop (4 single update --all)")
        since = time.time()
        for service in (THREE, PAIR, DEP, STATEFUL):
            wall, report = _update(cl, service, "--image", f"{registry}/{IMAGES[service][0]}")
            loop.walls[service] = wall
            loop.longest_down = max([loop.longest_down, *_downs(report)])
            wait_idle(cl)
        loop.wall = sum(loop.walls.values())
        loop.starts = starts(cl, since)
    return [release, loop]


def report(runs: Sequence[Run]) -> bool:
    """Print the figure and its budgets; True when they hold."""
    release, loop = runs
    slowest = max(loop.walls, key=lambda s: loop.walls[s])
    single = loop.walls[slowest]
    print("release (issue 20): 4 bundles on 3 nodes, images already pulled")
    rows = [
        (release.label, release.wall, release.starts, release.longest_down),
        (f"single update --all of the slowest ({slowest})", single, None, None),
        (loop.label, loop.wall, loop.starts, loop.longest_down),
    ]
    for label, wall, counted, down in rows:
        text = f"  {label:<48} {wall:7.1f}s"
        if counted is not None:
            text += "  container starts " + ", ".join(f"{b}={n}" for b, n in counted.items())
        if down is not None:
            text += f"  longest downtime {down:.1f}s"
        print(text)
    ok = True
    for name, ratio, budget in (
        ("release / single update --all of the slowest", release.wall / single, RELEASE_VS_SINGLE),
        ("release / operator's loop", release.wall / loop.wall, RELEASE_VS_LOOP),
    ):
        verdict = "ok" if ratio <= budget else "OVER BUDGET"
        ok = ok and ratio <= budget
        print(f"  {name}: {ratio:.2f} (budget <= {budget:g}) {verdict}")
    return ok


def main() -> int:
    from tests.sandbox import lifecycle
    from tests.sandbox.cluster import from_state
    from tests.sandbox.state import load

    name = f"r{os.getpid() % 10**6}"
    info = lifecycle.up_detached(name)
    try:
        state = load(name)
        if state is None:
            raise ReleaseBenchError(f"sandbox {name} left no state")
        runs = measure(from_state(state), str(info["registry"]))
    finally:
        lifecycle.down(name)
    return 0 if report(runs) else 1


if __name__ == "__main__":
    sys.exit(main())
