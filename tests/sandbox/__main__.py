"""python -m tests.sandbox up|down|status|exec NODE CMD...|demo"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from . import cluster as cluster_mod
from . import lifecycle
from .state import existing, load

DEFAULT = os.environ.get("PCMKIMG_SANDBOX", "sb")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.sandbox")
    parser.add_argument("--name", default=DEFAULT, help="sandbox name (default %(default)s)")
    sub = parser.add_subparsers(dest="cmd", required=True)
    p_up = sub.add_parser("up", help="registry, test images and a 3-node cluster")
    p_up.add_argument("--podman", type=int, default=0, help="also N podman-only nodes")
    p_up.add_argument("--no-cluster", action="store_true")
    p_up.add_argument("--json", action="store_true", help="print what is up as JSON")
    p_down = sub.add_parser("down", help="tear down (also after a crashed run)")
    p_down.add_argument("--all", action="store_true", help="every sandbox found")
    sub.add_parser("status", help="what runs")
    p_exec = sub.add_parser("exec", help="run a command on a node")
    p_exec.add_argument("node")
    p_exec.add_argument("argv", nargs=argparse.REMAINDER)
    sub.add_parser("demo", help="the demo job")
    args = parser.parse_args(argv)

    if args.cmd == "up":
        try:
            info = lifecycle.up_detached(args.name, podman=args.podman, cluster=not args.no_cluster)
        except RuntimeError as exc:
            print(f"sandbox {args.name}: up failed: {exc}", file=sys.stderr)
            return 1
        if args.json:
            print(json.dumps(info))
            return 0
        print(f"registry: {info['registry']}")
        for path, image_id in dict(info["images"]).items():  # type: ignore[call-overload]
            print(f"image: {info['registry']}/{path} {image_id[:12]}")
        for node in list(info["podman_nodes"]):  # type: ignore[call-overload]
            print(f"podman node: {node['name']} unix://{node['dir']}/podman.sock")
        if info["cluster"]:
            cl = cluster_mod.from_state(load(args.name))  # type: ignore[arg-type]
            for n in cl.nodes:
                print(f"cluster node: {n.name} {n.address} podman {n.url}")
        return 0
    if args.cmd == "down":
        names = existing() if args.all else [args.name]
        for name in names:
            for note in lifecycle.down(name):
                print(note)
            print(f"sandbox {name}: down")
        return 0
    if args.cmd == "demo":
        from .demo import run_demo

        return run_demo(args.name)
    state = load(args.name)
    if state is None:
        print(f"sandbox {args.name}: not up", file=sys.stderr)
        return 1
    if args.cmd == "status":
        for proc in state.procs:
            mark = "running" if lifecycle.ours(proc.pid, proc.start) else "gone"
            print(f"{proc.pid:>8} {mark:8} {proc.what}")
        for ns in state.netns:
            print(f"netns {ns}")
        return 0
    if args.cmd == "exec":
        cl = cluster_mod.from_state(state)
        node = cl.node(args.node)
        cmd = args.argv or ["/bin/sh"]
        return subprocess.call([*node.enter(), *cmd], env=cluster_mod.node_env())
    return 2


if __name__ == "__main__":
    sys.exit(main())
