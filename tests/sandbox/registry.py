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


# The promotable test images: an ocf:pacemaker:Stateful replica needs pacemaker-remoted (the
# run-command of a bundle with an inner resource), the agent, what the agent runs (/bin/sh and
# busybox's applets, ocf-shellfuncs, crm_attribute), and the libraries ``ldd`` lists. They
# are copied from the installed Debian packages (pacemaker-cli-utils, pacemaker-resource-agents,
# resource-agents, busybox-static): no network. pacemaker-remoted comes from the package
# pacemaker-remote, which conflicts with pacemaker: packaging/install-deps.sh unpacks it into
# REMOTE_CACHE instead of installing it. One base layer holds it all; each tag adds a /VERSION
# layer on top, so a second tag costs a few bytes.
REMOTED = "/usr/sbin/pacemaker-remoted"  # where the bundle runs it, in the image
REMOTE_CACHE = Path("/var/cache/pcmkimg-sandbox/pacemaker-remote")
CRM_ATTRIBUTE = "/usr/sbin/crm_attribute"
OCF_FILES = (
    "/usr/lib/ocf/resource.d/pacemaker/Stateful",
    "/usr/lib/ocf/lib/heartbeat/ocf-shellfuncs",
    "/usr/lib/ocf/lib/heartbeat/ocf-binaries",
    "/usr/lib/ocf/lib/heartbeat/ocf-directories",
    "/usr/lib/ocf/lib/heartbeat/ocf-returncodes",
    "/usr/lib/ocf/lib/heartbeat/ocf-rarun",
    "/usr/lib/ocf/lib/heartbeat/ocf-distro",
)
# Repository path -> version text; "broken" has a pacemaker-remoted that exits 1 at once.
STATEFUL_IMAGES: dict[str, str] = {
    "ns1/stateful:1.0": "1.0",
    "ns1/stateful:1.1": "1.1",
    "ns1/stateful:broken": "broken",
}
# pacemaker-remoted as PID 1 forks and leaves a "pcmk-init" parent that catches no signal, so
# SIGTERM is lost and every container stop takes podman's full 10 s. The image's
# /usr/sbin/pacemaker-remoted is this wrapper instead: a shell (PID 1) that passes SIGTERM on to
# the real daemon, which then stops in well under a second.
REMOTED_REAL = "/usr/libexec/pacemaker/pacemaker-remoted"
REMOTED_WRAPPER = f"""#!/bin/sh
trap 'kill -TERM "$child" 2>/dev/null' TERM INT
{REMOTED_REAL} "$@" &
child=$!
wait "$child"
rc=$?
while kill -0 "$child" 2>/dev/null; do wait "$child"; rc=$?; done
exit "$rc"
""".encode()
BROKEN_REMOTED = b'#!/bin/sh\necho "pacemaker-remoted of a broken image"; exit 1\n'


def _libraries(binaries: tuple[str, ...]) -> list[str]:
    """Every shared library the binaries load (ldd's list, with the dynamic loader)."""
    found: set[str] = set()
    for binary in binaries:
        for line in run(["ldd", binary]).stdout.splitlines():
            parts = line.split()
            if "=>" in parts and len(parts) > parts.index("=>") + 1:
                path = parts[parts.index("=>") + 1]
            elif parts and parts[0].startswith("/"):
                path = parts[0]
            else:
                continue
            if path.startswith("/"):
                found.add(path)
    return sorted(found)


class _Tar:
    """A tar with fixed metadata (mtime 0, root): the same inputs give the same bytes."""

    def __init__(self, tar: tarfile.TarFile) -> None:
        self.tar = tar
        self.seen: set[str] = set()

    def _info(self, name: str, mode: int) -> tarfile.TarInfo:
        info = tarfile.TarInfo(name)
        info.mtime = 0
        info.uid = info.gid = 0
        info.mode = mode
        return info

    def dir(self, name: str) -> None:
        parts = name.strip("/").split("/")
        for i in range(1, len(parts) + 1):
            sub = "/".join(parts[:i])
            if sub and sub not in self.seen:
                self.seen.add(sub)
                info = self._info(sub, 0o755)
                info.type = tarfile.DIRTYPE
                self.tar.addfile(info)

    def file(self, name: str, data: bytes, mode: int = 0o755) -> None:
        name = name.strip("/")
        self.dir(os.path.dirname(name))
        if name in self.seen:
            return
        self.seen.add(name)
        info = self._info(name, mode)
        info.size = len(data)
        self.tar.addfile(info, io.BytesIO(data))

    def link(self, name: str, target: str) -> None:
        name = name.strip("/")
        self.dir(os.path.dirname(name))
        if name in self.seen:
            return
        self.seen.add(name)
        info = self._info(name, 0o777)
        info.type = tarfile.SYMTYPE
        info.linkname = target
        self.tar.addfile(info)


def remoted_source() -> Path | None:
    """The pacemaker-remoted binary to copy into the image (installed, or unpacked)."""
    for path in (Path(REMOTED), REMOTE_CACHE / REMOTED.lstrip("/")):
        if path.is_file():
            return path
    return None


def stateful_missing() -> list[str]:
    """What the Stateful images need from this machine and it lacks."""
    missing = [] if remoted_source() else [f"{REMOTE_CACHE / REMOTED.lstrip('/')}"]
    return missing + [p for p in (CRM_ATTRIBUTE, *OCF_FILES, BUSYBOX) if not Path(p).exists()]


def stateful_base_tar() -> bytes:
    """The root filesystem of the Stateful images, without /VERSION."""
    missing = stateful_missing()
    remoted = remoted_source()
    if missing or remoted is None:
        raise SandboxError(
            f"missing {', '.join(missing)}: run packaging/install-deps.sh (it unpacks "
            "pacemaker-remote; never apt-get install it, that removes pacemaker)"
        )
    import grp
    import pwd

    uid, gid = pwd.getpwnam("hacluster").pw_uid, grp.getgrnam("haclient").gr_gid
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as raw:
        tar = _Tar(raw)
        for d in ("tmp", "proc", "sys", "dev", "run", "var/log", "etc"):
            tar.dir(d)
        for d in ("cib", "pengine", "blackbox", "cores"):
            tar.dir(f"var/lib/pacemaker/{d}")
        tar.link("var/run", "../run")
        tar.file("bin/busybox", Path(BUSYBOX).read_bytes())
        listed = run([BUSYBOX, "--list"]).stdout.split()
        for applet in sorted(set(listed) - {"busybox"}):
            tar.link(f"bin/{applet}", "busybox")
        tar.file(REMOTED_REAL, remoted.read_bytes())
        tar.file(REMOTED, REMOTED_WRAPPER)
        tar.file(CRM_ATTRIBUTE, Path(CRM_ATTRIBUTE).read_bytes())
        for path in _libraries((str(remoted), CRM_ATTRIBUTE)):
            real = Path(path).resolve()
            tar.file(str(real), real.read_bytes(), 0o755)
            if str(real) != path:
                tar.link(path, str(real))
        for path in OCF_FILES:
            tar.file(path, Path(path).read_bytes(), 0o755 if "resource.d" in path else 0o644)
        tar.link(
            "usr/lib/ocf/resource.d/heartbeat/.ocf-shellfuncs", "../../lib/heartbeat/ocf-shellfuncs"
        )
        passwd = (
            "root:x:0:0:root:/root:/bin/sh\n"
            f"hacluster:x:{uid}:{gid}::/var/lib/pacemaker:/bin/false\n"
        )
        tar.file("etc/passwd", passwd.encode(), 0o644)
        tar.file("etc/group", f"root:x:0:\nhaclient:x:{gid}:hacluster\n".encode(), 0o644)
        # With network=host the container shares the node's network namespace, and with it
        # libqb's abstract sockets: pacemaker-remoted's "lrmd" would clash with the node's
        # pacemaker-execd. This file makes libqb use filesystem sockets in the container.
        tar.file("etc/libqb/force-filesystem-sockets", b"", 0o644)
        tar.file("etc/nsswitch.conf", b"passwd: files\ngroup: files\nhosts: files dns\n", 0o644)
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
    base = _build_cli(state)
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


def _build_cli(state: State) -> list[str]:
    """The podman command line on the sandbox's build store."""
    store = state.dir / "build"
    for sub in ("storage", "run", "tmp"):
        (store / sub).mkdir(parents=True, exist_ok=True)
    return [
        "podman",
        "--root",
        str(store / "storage"),
        "--runroot",
        str(store / "run"),
        "--tmpdir",
        str(store / "tmp"),
    ]


def stateful_images(state: State, host: str) -> dict[str, str]:
    """Build the Stateful test images and push them to the registry at ``host``, once per
    sandbox (later calls return the IDs recorded in the state); return path -> image ID."""
    done = state.info.get("stateful_images")
    if isinstance(done, dict) and set(done) == set(STATEFUL_IMAGES):
        return {str(k): str(v) for k, v in done.items()}
    base = _build_cli(state)
    env = podman_env(state)
    work = state.dir / "build" / "stateful"
    work.mkdir(parents=True, exist_ok=True)
    tar = work / "rootfs.tar"
    tar.write_bytes(stateful_base_tar())
    os.utime(tar, (0, 0))
    change = 'CMD ["' + REMOTED + '"]'
    run(
        [*base, "import", "--change", change, str(tar), "localhost/build/stateful:base"],
        env=env,
        timeout=120,
    )
    tar.unlink()
    ids: dict[str, str] = {}
    for path, version in STATEFUL_IMAGES.items():
        ctx = work / version
        ctx.mkdir(exist_ok=True)
        (ctx / "VERSION").write_text(f"{version}\n")
        lines = ["FROM localhost/build/stateful:base", "COPY VERSION /VERSION"]
        if version == "broken":
            (ctx / "pacemaker-remoted").write_bytes(BROKEN_REMOTED)
            (ctx / "pacemaker-remoted").chmod(0o755)
            lines.append(f"COPY pacemaker-remoted {REMOTED}")
        (ctx / "Containerfile").write_text("\n".join(lines) + "\n")
        for f in ctx.iterdir():
            os.utime(f, (0, 0))
        tag = f"localhost/build/stateful:{version}"
        run(
            [
                *base,
                "build",
                "--timestamp",
                "0",
                "-q",
                "-t",
                tag,
                "-f",
                str(ctx / "Containerfile"),
                str(ctx),
            ],
            env=env,
            timeout=120,
        )
        image_id = run([*base, "image", "inspect", "--format", "{{.Id}}", tag], env=env).stdout
        ref = f"{host}/{path}"
        run([*base, "tag", tag, ref], env=env)
        run([*base, "push", "--tls-verify=false", ref], env=env, timeout=120)
        ids[path] = image_id.strip()
    state.info["stateful_images"] = ids
    state.save()
    return ids


def _json_str(text: str) -> str:
    import json

    return json.dumps(text)


def remove_data(state: State) -> None:
    shutil.rmtree(state.dir / "registry-data", ignore_errors=True)
