"""Runs as PID-holder inside one sandbox node: ``ip netns exec NS unshare -m -u ...``.

It gives the node its own hostname, /run, /dev/shm, cgroup mounts (``ip netns
exec`` remounts /sys, which hides the host's), its own pacemaker, corosync
and podman directories, its image store on a filesystem of its own, and our
OCF agents. Then it sleeps until it is told
to stop. The mount namespace lives as long as this process and the daemons
started in it, so every mount goes away with them.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

CGROUP_V1 = ("cpu", "cpuacct", "cpuset", "memory", "devices", "freezer", "blkio", "pids")
OCF_ROOT = Path("/usr/lib/ocf/resource.d")


def sh(*argv: str) -> None:
    subprocess.run(argv, check=True)


def mount(*args: str) -> None:
    sh("mount", *args)


def setup(cfg: dict[str, object]) -> None:
    node_dir = Path(str(cfg["dir"]))
    sh("hostname", str(cfg["name"]))
    sh("ip", "link", "set", "lo", "up")
    mount("-t", "tmpfs", "-o", "mode=755", "tmpfs", "/run")
    mount("-t", "tmpfs", "-o", "mode=1777", "tmpfs", "/dev/shm")
    for sub in ("lock", "crm", "podman", "containers"):
        Path("/run", sub).mkdir(exist_ok=True)
    mount("-t", "tmpfs", "-o", "mode=755", "tmpfs", "/sys/fs/cgroup")
    for ctl in CGROUP_V1:
        Path("/sys/fs/cgroup", ctl).mkdir()
        mount("-t", "cgroup", "-o", ctl, "cgroup", f"/sys/fs/cgroup/{ctl}")
    Path("/sys/fs/cgroup/systemd").mkdir()
    mount("-t", "cgroup", "-o", "none,name=systemd", "cgroup", "/sys/fs/cgroup/systemd")
    Path("/sys/fs/cgroup/unified").mkdir()
    mount("-t", "cgroup2", "cgroup2", "/sys/fs/cgroup/unified")
    for src, dst in dict(cfg["binds"]).items():  # type: ignore[call-overload]
        Path(dst).mkdir(parents=True, exist_ok=True)
        mount("--bind", str(node_dir / src), dst)
    for argv in list(cfg.get("mounts", [])):  # type: ignore[call-overload]
        Path(argv[-1]).mkdir(parents=True, exist_ok=True)
        sh(*argv)
    for src, dst in dict(cfg.get("files", {})).items():  # type: ignore[call-overload]
        mount("--bind", "-o", "ro", str(node_dir / src), dst)
    # Our agents beside the stock ones: keep the originals reachable, then
    # lay a tmpfs over the OCF directory and bind each provider back.
    orig = node_dir / "ocf-orig"
    orig.mkdir(exist_ok=True)
    mount("--bind", str(OCF_ROOT), str(orig))
    providers = [p.name for p in orig.iterdir() if p.is_dir()]
    mount("-t", "tmpfs", "-o", "mode=755", "tmpfs", str(OCF_ROOT))
    for provider in providers:
        (OCF_ROOT / provider).mkdir()
        mount("--bind", str(orig / provider), str(OCF_ROOT / provider))
    for provider, path in dict(cfg.get("agents", {})).items():  # type: ignore[call-overload]
        (OCF_ROOT / provider).mkdir(exist_ok=True)
        mount("--bind", "-o", "ro", str(path), str(OCF_ROOT / provider))
    # As if pcmkimg were installed: a .pth in the system python's first site directory, so
    # that the agent imports our packages whatever its environment (pcs runs crm_resource
    # with an empty one).
    site = cfg.get("site")
    if site:
        pylib = node_dir / "pylib"
        pylib.mkdir(exist_ok=True)
        (pylib / "pcmkimg-sandbox.pth").write_text("\n".join(cfg["pth"]) + "\n")  # type: ignore[arg-type]
        Path(str(site)).mkdir(parents=True, exist_ok=True)
        mount("--bind", "-o", "ro", str(pylib), str(site))
    # The default podman_url of the guard, unix:///run/podman/podman.sock, reaches the node's
    # API service, which listens at a path the test process can reach too.
    Path("/run/podman/podman.sock").symlink_to(node_dir / "podman.sock")


def main() -> int:
    cfg = json.loads(sys.argv[1])
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        setup(cfg)
    except Exception as exc:  # report any set-up failure to the parent, then exit
        Path(str(cfg["dir"]), "init.error").write_text(f"{type(exc).__name__}: {exc}\n")
        return 1
    Path(str(cfg["dir"]), "init.ready").write_text(str(os.getpid()))
    while True:
        signal.pause()


if __name__ == "__main__":
    sys.exit(main())
