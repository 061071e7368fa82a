"""``make demo``: the seed scenario on a fresh sandbox, end to end.

1. A registry and a 3-node cluster; a bundle runs ``ns1/svc:1.0`` behind the floating name
   ``cluster.common.tag/svc:pcmklatest`` on every node, guarded by ``ocf:pcmkimg:floating-image``.
2. ``pcmkimg status``.
3. ``pcmkimg update svc --image REG/ns2/svc:1.1 --all``: the image moved to another namespace.
4. ``pcmkimg status`` and ``crm_mon -A`` again.
5. Everything torn down.

It ends with one summary line: nodes updated, containers restarted, and the longest time
``crm_mon`` (sampled while the update runs) showed a replica not active. That is not the update's
own "replica downtime", which is how long no container of the replica ran (podman's events).
"""

from __future__ import annotations

import json
import threading
import time

from . import cluster as cluster_mod
from . import lifecycle
from .state import load

FLOATING = "cluster.common.tag/svc:pcmklatest"
BUNDLE = "svc-bundle"


def banner(text: str) -> None:
    print(f"\n=== {text}", flush=True)


def show(proc) -> None:  # type: ignore[no-untyped-def]
    for stream in (proc.stderr, proc.stdout):
        if stream.strip():
            print(stream.rstrip(), flush=True)


class DowntimeSampler(threading.Thread):
    """Samples crm_mon and records, per node, the longest stretch without an active replica."""

    def __init__(self, cl: cluster_mod.Cluster) -> None:
        super().__init__(daemon=True)
        self.cl = cl
        self.stop = threading.Event()
        self.down_since: dict[str, float] = {}
        self.longest: dict[str, float] = {}
        self.min_active = 3

    def run(self) -> None:
        while not self.stop.is_set():
            now = time.monotonic()
            try:
                mon = self.cl.crm_mon()
            except Exception:
                continue
            active = set()
            for res in mon.iterfind(f".//bundle[@id='{BUNDLE}']/replica/resource"):
                node = res.find("node")
                if res.get("active") == "true" and node is not None:
                    if res.get("resource_agent") == "ocf:heartbeat:podman":
                        active.add(node.get("name"))
            self.min_active = min(self.min_active, len(active))
            for name in self.cl.names:
                if name in active:
                    start = self.down_since.pop(name, None)
                    if start is not None:
                        self.longest[name] = max(self.longest.get(name, 0.0), now - start)
                else:
                    self.down_since.setdefault(name, now)
            time.sleep(0.2)


def run_demo(name: str) -> int:
    started = time.monotonic()
    banner("bringing up a registry and a 3-node Pacemaker cluster (controller-0..2)")
    info = lifecycle.up_detached(name)
    state = load(name)
    assert state is not None
    cl = cluster_mod.from_state(state)
    reg = str(info["registry"])
    try:
        print(f"registry {reg}; nodes: {', '.join(cl.names)}")
        old, new = f"{reg}/ns1/svc:1.0", f"{reg}/ns2/svc:1.1"
        banner(f"each node tags {old} as {FLOATING}; a bundle runs it, guarded")
        cl.seed(old, FLOATING)
        cl.create_bundle(BUNDLE, FLOATING)
        show(cl.pcmkimg("controller-0", "guard", "add", BUNDLE))
        cluster_mod.wait_idle(cl)
        banner("pcmkimg status")
        show(cl.pcmkimg("controller-0", "status"))
        banner(f"pcmkimg update svc --image {new} --all")
        sampler = DowntimeSampler(cl)
        sampler.start()
        upd = cl.pcmkimg(
            "controller-0", "--json", "update", "svc", "--image", new, "--all", check=False
        )
        sampler.stop.set()
        sampler.join()
        show(type(upd)(upd.args, upd.returncode, "", upd.stderr))
        if upd.returncode != 0:
            print(f"update failed with exit code {upd.returncode}")
            return 1
        report = json.loads(upd.stdout)["report"]
        banner("pcmkimg status")
        show(cl.pcmkimg("controller-0", "status"))
        banner("crm_mon -A (each node publishes the real image behind the floating name)")
        mon = cl.run("controller-0", ["crm_mon", "-1", "-A"])
        print(mon.stdout.split("Node Attributes:")[-1].rstrip())
        longest = max(sampler.longest.values(), default=0.0)
        updated = sum(1 for n in report["nodes"] if n["result"] in ("ok", "unchanged"))
        banner("summary")
        print(
            f"{updated} nodes updated, {report['restarted']} containers restarted, longest time "
            f"crm_mon showed a replica not active {longest:.1f}s (never fewer than "
            f"{sampler.min_active} of 3 "
            f"replicas active); demo took {time.monotonic() - started:.0f}s"
        )
        return 0
    finally:
        banner("tearing the sandbox down")
        lifecycle.down(name)
        print("done")
