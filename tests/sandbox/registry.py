"""A local image registry on 127.0.0.1 and the reproducible test images."""

from __future__ import annotations

import io
import os
import shutil
import tarfile
from dataclasses import dataclass
from pathlib import Path

from .proc import SandboxError, free_port, run, spawn, tcp_open, wait_for
from .state import State

BUSYBOX = "/bin/busybox"
APPLETS = ("sh", "true", "false", "sleep", "cat", "echo", "ls", "ps", "kill", "date")

SERVICE_CMD = (
    'trap "exit 0" TERM INT; echo "svc $(cat /VERSION) up"; while :; do sleep 1 & wait $!; done'
)
BROKEN_CMD = 'echo "svc $(cat /VERSION) is broken"; exit 1'


@dataclass(frozen=True)
class Registry:
    port: int
    pid: int

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def ref(self, path: str) -> str:
        return f"{self.host}/{path}"


# The images every test can rely on: repository path -> (version text, command).
IMAGES: dict[str, tuple[str, str]] = {
    "ns1/svc:1.0": ("1.0", SERVICE_CMD),
    "ns1/svc:1.1": ("1.1", SERVICE_CMD),
    "ns2/svc:1.1": ("1.1", SERVICE_CMD),
    "ns1/svc:broken": ("broken", BROKEN_CMD),
}


def rootfs_tar(version: str) -> bytes:
    """A busybox root filesystem as a tar with fixed metadata: the same bytes every time."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:

        def add(name: str, *, data: bytes | None = None, link: str | None = None, mode=0o755):  # type: ignore[no-untyped-def]
            info = tarfile.TarInfo(name)
            info.mtime = 0
            info.uid = info.gid = 0
            info.mode = mode
            if data is None and link is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif link is not None:
                info.type = tarfile.SYMTYPE
                info.linkname = link
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))

        for d in ("bin", "etc", "tmp", "proc", "sys", "dev", "run", "var"):
            add(d)
        add("bin/busybox", data=Path(BUSYBOX).read_bytes())
        for applet in APPLETS:
            add(f"bin/{applet}", link="busybox")
        add("VERSION", data=f"{version}\n".encode(), mode=0o644)
        add("etc/passwd", data=b"root:x:0:0:root:/:/bin/sh\n", mode=0o644)
    return buf.getvalue()


def write_config(state: State, port: int) -> Path:
    data = state.dir / "registry-data"
    data.mkdir(parents=True, exist_ok=True)
    config = state.dir / "registry.yml"
    config.write_text(
        "version: 0.1\n"
        "log:\n  level: warn\n"
        "storage:\n"
        f"  filesystem:\n    rootdirectory: {data}\n"
        "  delete:\n    enabled: true\n"
        f"http:\n  addr: 127.0.0.1:{port}\n"
    )
    return config


def start(state: State, port: int | None = None) -> Registry:
    """Start (or restart on the same port and storage) the registry."""
    port = port or free_port()
    config = write_config(state, port)
    proc = spawn(["docker-registry", "serve", str(config)], log=state.dir / "registry.log")
    state.add_proc(proc.pid, "registry")
    state.info["registry_port"] = port
    state.info["registry_pid"] = proc.pid
    state.save()
    try:
        wait_for(lambda: tcp_open(port), f"the registry on 127.0.0.1:{port}", timeout=20)
    except SandboxError:
        log = (state.dir / "registry.log").read_text(errors="replace")[-2000:]
        raise SandboxError(f"registry did not start: {log}") from None
    return Registry(port, proc.pid)


def podman_conf(state: State, port: int) -> tuple[Path, Path]:
    """containers.conf and registries.conf for every podman of the sandbox."""
    conf = state.dir / "containers.conf"
    conf.write_text(
        "[containers]\n"
        'default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]\n'
        "[engine]\n"
        'runtime = "runc"\n'
        'cgroup_manager = "cgroupfs"\n'
        'events_logger = "file"\n'
    )
    regs = state.dir / "registries.conf"
    regs.write_text(
        "unqualified-search-registries = []\n"
        f'[[registry]]\nlocation = "127.0.0.1:{port}"\ninsecure = true\n'
    )
    return conf, regs


def podman_env(state: State) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "CONTAINER_HOST"}
    env["CONTAINERS_CONF"] = str(state.dir / "containers.conf")
    env["CONTAINERS_REGISTRIES_CONF"] = str(state.dir / "registries.conf")
    return env


def build_and_push(state: State, registry: Registry) -> dict[str, str]:
    """Build the test images offline and push them; return path -> image ID."""
    if not Path(BUSYBOX).exists():
        raise SandboxError(f"{BUSYBOX} is missing: install busybox-static")
    store = state.dir / "build"
    for sub in ("storage", "run", "tmp"):
        (store / sub).mkdir(parents=True, exist_ok=True)
    base = [
        "podman",
        "--root",
        str(store / "storage"),
        "--runroot",
        str(store / "run"),
        "--tmpdir",
        str(store / "tmp"),
    ]
    env = podman_env(state)
    ids: dict[str, str] = {}
    by_content: dict[tuple[str, str], str] = {}
    for path, (version, cmd) in IMAGES.items():
        key = (version, cmd)
        if key not in by_content:
            tar = store / f"rootfs-{version}.tar"
            tar.write_bytes(rootfs_tar(version))
            os.utime(tar, (0, 0))
            change = 'CMD ["/bin/sh", "-c", ' + _json_str(cmd) + "]"
            out = run(
                [*base, "import", "--change", change, str(tar), f"localhost/build/svc:{version}"],
                env=env,
            )
            by_content[key] = out.stdout.strip().splitlines()[-1].removeprefix("sha256:")
        image_id = by_content[key]
        run([*base, "tag", image_id, registry.ref(path)], env=env)
        run([*base, "push", "--tls-verify=false", registry.ref(path)], env=env, timeout=120)
        ids[path] = image_id
    state.info["images"] = ids
    state.save()
    return ids


def _json_str(text: str) -> str:
    import json

    return json.dumps(text)


def remove_data(state: State) -> None:
    shutil.rmtree(state.dir / "registry-data", ignore_errors=True)
