"""Cluster mode: a real 3-node Corosync + Pacemaker cluster in namespaces.

Each node (controller-0..2) is a network namespace joined to a bridge that
lives in a namespace of its own (the root namespace's links are never
touched), plus a private mount and UTS namespace held by ``nodeinit``.
Commands run "on" a node with ``nsenter`` into the holder's namespaces.
The registry is reached from every node at the same 127.0.0.1:PORT through a
socat bridge over a unix socket, so one image reference works everywhere.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from lxml import etree

from .podman_nodes import ApiSocket, store_mount
from .proc import SandboxError, run, spawn, unix_open, wait_for
from .state import State

REPO = Path(__file__).resolve().parents[2]
SUBNET = "10.254.77"
REMOTE_PORT = 3121  # pacemaker-remoted's port in a bundle with an inner resource
NODE_NAMES = ("controller-0", "controller-1", "controller-2")
BINDS = {
    "etc-corosync": "/etc/corosync",
    "var-lib-pacemaker": "/var/lib/pacemaker",
    "var-lib-corosync": "/var/lib/corosync",
    "log-pacemaker": "/var/log/pacemaker",
    "log-corosync": "/var/log/corosync",
    "etc-containers": "/etc/containers",
    "var-lib-pcmkimg": "/var/lib/pcmkimg",
    "etc-pacemaker": "/etc/pacemaker",
}
STORE = "/var/lib/containers"
"""A node's image store: a tmpfs of its own in the node's mount namespace (``store_mount``),
gone with the namespace."""
# Files bound over the host's in every node: node names resolve to the node addresses (a
# bundle's remote connection to its replica's pacemaker-remoted goes to the node's name).
FILE_BINDS = {"hosts": "/etc/hosts"}
SAFE_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False)


@dataclass(frozen=True)
class Node(ApiSocket):
    name: str
    index: int
    dir: Path
    netns: str
    holder: int

    @property
    def address(self) -> str:
        return f"{SUBNET}.{10 + self.index}"

    def enter(self) -> list[str]:
        return ["nsenter", "-t", str(self.holder), "-m", "-n", "-u", "--"]


@dataclass(frozen=True)
class Replica:
    """One replica of a bundle as crm_mon shows it."""

    index: int
    node: str | None  # where its container runs (None: nowhere)
    active: bool  # every resource of the replica (container, connection, inner) is active
    role: str  # the inner resource's role (Promoted, Unpromoted, Started...), else the container's


@dataclass(frozen=True)
class Cluster:
    state: State
    nodes: tuple[Node, ...]
    registry_port: int

    def node(self, name: str) -> Node:
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(f"no sandbox node {name!r}; nodes: {', '.join(self.names)}")

    @property
    def names(self) -> list[str]:
        return [n.name for n in self.nodes]

    def run(self, node: str, argv: Sequence[str], **kw):  # type: ignore[no-untyped-def]
        """Run a command on a node (its network, mount and UTS namespaces)."""
        env = node_env(kw.pop("env", None))
        return run([*self.node(node).enter(), *argv], env=env, **kw)

    def podman(self, node: str, *args: str, check: bool = True):  # type: ignore[no-untyped-def]
        return self.run(node, ["podman", *args], check=check)

    @property
    def conf(self) -> Path:
        """The pcmkimg.conf of the sandbox: every node's podman socket, the test registry."""
        return self.state.dir / "pcmkimg.conf"

    def pcmkimg(self, node: str, *args: str, check: bool = True, timeout: float = 600):  # type: ignore[no-untyped-def]
        """Run ``pcmkimg ARGS`` on a node, as an operator logged in there would."""
        env = {"PCMKIMG_CONF": str(self.conf), "PYTHONPATH": str(REPO)}
        return self.run(
            node, [sys.executable, "-m", "pcmkimg", *args], env=env, check=check, timeout=timeout
        )

    def seed(self, ref: str, *tags: str, nodes: Sequence[str] | None = None) -> None:
        """Pull ``ref`` on the nodes (default: all) and tag it with ``tags`` there."""
        for node in self.names if nodes is None else nodes:
            self.podman(node, "pull", "-q", ref)
            for tag in tags:
                self.podman(node, "tag", ref, tag)

    def create_bundle(
        self,
        bundle: str,
        image: str,
        replicas: int = 3,
        *,
        promotable: bool = False,
        inner: str | None = None,
        inner_id: str | None = None,
    ) -> None:
        """A podman bundle on the host network and wait until it is placed.

        ``inner`` (e.g. ``ocf:pacemaker:Stateful``) puts a primitive ``inner_id`` (default
        ``BUNDLE-rsc``) in it: the image must then run pacemaker-remoted (the sandbox's
        ``ns1/stateful:*`` images do), which listens on the control port 3121 of the node's own
        network namespace; the cluster reaches it by node name (each node's /etc/hosts).
        ``promotable`` sets ``promoted-max=1`` (needs an inner resource that can be promoted).
        """
        if promotable and inner is None:
            raise ValueError("a promotable bundle needs an inner resource")
        container = [f"image={image}", f"replicas={replicas}", "network=host"]
        if promotable:
            container.append("promoted-max=1")
        # With an inner resource the bundle is created disabled and enabled once the resource
        # is in: adding it changes the containers' run command, which would restart them all.
        network = ["network", f"control-port={REMOTE_PORT}", "--disabled"] if inner else []
        self.run(
            "controller-0",
            ["pcs", "resource", "bundle", "create", bundle, "container", "podman"]
            + container
            + network,
        )
        if inner:
            self.run(
                "controller-0",
                ["pcs", "resource", "create", inner_id or f"{bundle}-rsc", inner, "bundle", bundle],
            )
            self.run("controller-0", ["pcs", "resource", "enable", bundle])
        wait_idle(self)

    def replicas(self, bundle: str, mon: etree._Element | None = None) -> list[Replica]:
        """The replicas of a bundle in ``crm_mon --output-as=xml`` (read now, or ``mon``)."""
        mon = self.crm_mon() if mon is None else mon
        found = []
        for rep in mon.iterfind(f"resources/bundle[@id='{bundle}']/replica"):
            resources = rep.findall("resource")
            container = next(
                (r for r in resources if r.get("resource_agent") == "ocf:heartbeat:podman"), None
            )
            node = container.find("node") if container is not None else None
            inner = [
                r
                for r in resources
                if r.get("resource_agent") not in ("ocf:heartbeat:podman", "ocf:pacemaker:remote")
            ]
            role = (inner[0] if inner else container).get("role") if resources else None
            found.append(
                Replica(
                    index=int(rep.get("id", "-1")),
                    node=node.get("name") if node is not None else None,
                    active=bool(resources)
                    and all(
                        r.get("active") == "true" and r.get("failed") != "true" for r in resources
                    ),
                    role=role or "Stopped",
                )
            )
        return found

    def stateful_images(self) -> dict[str, str]:
        """The ``ns1/stateful:*`` test images (path -> image ID), built and pushed on first use."""
        from .registry import stateful_images
        from .state import load

        state = load(self.state.name) or self.state
        return stateful_images(state, f"127.0.0.1:{self.registry_port}")

    def wait_promoted(self, bundle: str, replicas: int, timeout: float = 120) -> list[Replica]:
        """Wait until ``replicas`` replicas of the bundle are active, exactly one promoted."""
        seen: list[Replica] = []

        def settled() -> bool:
            nonlocal seen
            try:
                seen = self.replicas(bundle)
            except SandboxError:
                return False
            active = [r for r in seen if r.active]
            return len(active) == replicas and [r.role for r in active].count("Promoted") == 1

        try:
            wait_for(settled, f"{bundle}: {replicas} active, 1 promoted", timeout, interval=0.5)
        except SandboxError as exc:
            raise SandboxError(f"{exc}; last seen: {seen}") from None
        return seen

    def delete_bundle(self, bundle: str) -> None:
        """Delete a bundle (and its guard, if any) and forget its failures."""
        if self.pcmkimg("controller-0", "guard", "remove", bundle, check=False).returncode:
            # `guard remove` refused (a test left the guard half wired): the clone goes anyway.
            self.run(
                "controller-0",
                ["pcs", "resource", "delete", f"{bundle}-guard-clone", "--force"],
                check=False,
                timeout=180,
            )
        self.run(
            "controller-0",
            ["pcs", "resource", "delete", bundle, "--force"],
            check=False,
            timeout=180,
        )
        self.run("controller-0", ["crm_resource", "--cleanup"], check=False)
        wait_idle(self)

    def failures(self, prefix: str, node: str | None = None) -> list[dict[str, str]]:
        """The failures in crm_mon whose operation starts with ``prefix`` (a resource id or its
        beginning), on ``node`` or anywhere, as their attributes (op_key, node, task, exitcode)."""
        return [
            {str(k): str(v) for k, v in f.items()}
            for f in self.crm_mon().iterfind("failures/failure")
            if f.get("op_key", "").startswith(prefix) and node in (None, f.get("node"))
        ]

    def restart_replica(self, bundle: str, node: str, timeout: int = 120) -> None:
        """Restart the bundle's replica on ``node`` as ``crm_resource --restart`` does, without
        it (Pacemaker 3.0.0 refuses it for a bundle: rc 105) and without pcmkimg's own restart
        (what the tests check): ban the bundle from ``node``, wait until crm_mon shows no
        replica there, clear the ban, wait until the cluster is idle. The start afterwards may
        fail: a test that took the floating name away wants that failed start."""
        where = ["--resource", bundle, "--node", node]

        def stopped() -> bool:
            try:
                return all(r.node != node for r in self.replicas(bundle))
            except SandboxError:
                return False

        self.run("controller-0", ["crm_resource", "--ban", *where])
        try:
            wait_for(stopped, f"{bundle}'s replica on {node} to stop", timeout, interval=0.5)
        finally:
            self.run("controller-0", ["crm_resource", "--clear", *where])
        wait_idle(self, timeout=timeout)

    def containers(self, prefix: str) -> dict[str, tuple[str, str]]:
        """Node -> (container ID, image ID) of the running container named ``prefix...``."""
        found = {}
        for node in self.names:
            for c in json.loads(self.podman(node, "ps", "--format", "json").stdout or "[]"):
                if c["Names"][0].startswith(prefix):
                    found[node] = (c["Id"], c["ImageID"])
        return found

    def guard(self, bundle: str, *, monitor: float | None = None) -> None:
        """``pcmkimg guard add BUNDLE`` and wait until the cluster is idle; ``monitor``: the
        guard's monitor interval in seconds instead of the agent's 30 s (so that a test sees
        what the monitor does within seconds). Only the interval changes, not its timeout."""
        self.pcmkimg("controller-0", "guard", "add", bundle)
        if monitor is not None:
            out = self.run("controller-0", ["cibadmin", "-Q", "-o", "resources"]).stdout
            resources = etree.fromstring(out.encode(), SAFE_PARSER)
            op = resources.find(
                f".//primitive[@id='{bundle}-guard']/operations/op[@name='monitor']"
            )
            if op is None:
                raise SandboxError(f"{bundle}-guard has no monitor operation")
            xml = f'<op id="{op.get("id")}" interval="{monitor:g}s"/>'
            self.run("controller-0", ["cibadmin", "--modify", "--xml-text", xml])
        wait_idle(self)

    def forget_images(self, floating: str, ref: str) -> None:
        """Remove from every node the floating name, its rollback name and every name of the
        registry of ``ref`` (what a test seeded, pulled or updated to); never an image in use."""
        previous = floating.rsplit(":", 1)[0] + ":pcmkprevious"
        registry = ref.rsplit("/", 2)[0] + "/"
        for node in self.names:
            out = self.podman(node, "images", "--format", "json", check=False).stdout
            names = {n for i in json.loads(out or "[]") for n in i.get("Names") or ()}
            ours = [n for n in names if n in (floating, previous) or n.startswith(registry)]
            if ours:
                self.podman(node, "rmi", *ours, check=False)

    @contextlib.contextmanager
    def seeded_bundle(
        self,
        bundle: str,
        floating: str,
        ref: str,
        replicas: int = 3,
        *,
        refs: Mapping[str, str] | None = None,
        promotable: bool = False,
        inner: str | None = None,
    ) -> Iterator[None]:
        """A bundle on ``floating``, tagged from ``ref`` (or ``refs[node]``) on every node, no
        guard; removed afterwards (with the guard, if the test added one), and
        :meth:`forget_images` then. ``replicas``, ``promotable`` and ``inner`` as in
        :meth:`create_bundle`."""
        for node in self.names:
            self.seed((refs or {}).get(node, ref), floating, nodes=[node])
        try:
            self.create_bundle(bundle, floating, replicas, promotable=promotable, inner=inner)
            yield
        finally:
            self.delete_bundle(bundle)
            self.forget_images(floating, ref)

    @contextlib.contextmanager
    def guarded_bundle(
        self,
        bundle: str,
        floating: str,
        ref: str,
        replicas: int = 3,
        *,
        promotable: bool = False,
        inner: str | None = None,
        monitor: float | None = None,
    ) -> Iterator[None]:
        """A :meth:`seeded_bundle` with the guard wired (:meth:`guard`, ``monitor`` there);
        removed afterwards with every image name the test may have given the nodes."""
        with self.seeded_bundle(
            bundle, floating, ref, replicas, promotable=promotable, inner=inner
        ):
            self.guard(bundle, monitor=monitor)
            yield

    @contextlib.contextmanager
    def promotable_bundle(
        self, bundle: str, floating: str, ref: str | None = None, replicas: int = 3
    ) -> Iterator[list[Replica]]:
        """A promotable bundle (``ocf:pacemaker:Stateful`` inside, promoted-max 1) on
        ``floating``, tagged from ``ref`` (default the sandbox's ``ns1/stateful:1.0``) on every
        node, guard wired; yields its replicas once ``replicas`` are active and exactly one is
        promoted. Removed afterwards as :meth:`guarded_bundle` removes its bundle."""
        self.stateful_images()
        ref = ref or f"127.0.0.1:{self.registry_port}/ns1/stateful:1.0"
        with self.guarded_bundle(
            bundle, floating, ref, replicas, promotable=True, inner="ocf:pacemaker:Stateful"
        ):
            yield self.wait_promoted(bundle, replicas)

    def crm_mon(self, node: str = "controller-0") -> etree._Element:
        out = self.run(node, ["crm_mon", "-1", "--output-as=xml"], timeout=60)
        return etree.fromstring(out.stdout.encode(), SAFE_PARSER)


def node_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a command on a node: no host podman settings leak in."""
    drop = ("CONTAINER_HOST", "CONTAINERS_CONF", "CONTAINERS_REGISTRIES_CONF", "CIB_file")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["LC_ALL"] = "C"
    env.update(extra or {})
    return env


def corosync_conf(nodes: Sequence[Node], cluster_name: str) -> str:
    entries = "".join(
        f"    node {{\n        ring0_addr: {n.address}\n        name: {n.name}\n"
        f"        nodeid: {n.index + 1}\n    }}\n"
        for n in nodes
    )
    return (
        "totem {\n    version: 2\n"
        f"    cluster_name: {cluster_name}\n"
        "    transport: knet\n    crypto_cipher: none\n    crypto_hash: none\n"
        "    token: 3000\n    join: 50\n}\n"
        f"nodelist {{\n{entries}}}\n"
        "quorum {\n    provider: corosync_votequorum\n}\n"
        "logging {\n    to_logfile: yes\n    logfile: /var/log/corosync/corosync.log\n"
        "    to_stderr: no\n    to_syslog: no\n    timestamp: on\n}\n"
    )


def seed_cib(path: Path) -> None:
    """An empty CIB with the properties every sandbox test relies on."""
    cib = etree.fromstring(run(["cibadmin", "--empty"]).stdout.encode(), SAFE_PARSER)
    config = cib.find("configuration")
    props = etree.SubElement(
        config.find("crm_config"), "cluster_property_set", id="cib-bootstrap-options"
    )
    for name, value in (("stonith-enabled", "false"), ("dc-deadtime", "5s")):
        etree.SubElement(
            props, "nvpair", id=f"cib-bootstrap-options-{name}", name=name, value=value
        )
    defaults = etree.SubElement(
        etree.SubElement(config, "rsc_defaults"), "meta_attributes", id="rsc_defaults-options"
    )
    etree.SubElement(
        defaults,
        "nvpair",
        id="rsc_defaults-options-resource-stickiness",
        name="resource-stickiness",
        value="INFINITY",
    )
    path.write_bytes(etree.tostring(cib))


def hosts_file(nodes: Sequence[Node]) -> str:
    lines = ["127.0.0.1 localhost", *(f"{n.address} {n.name}" for n in nodes)]
    return "\n".join(lines) + "\n"


def cluster_authkey(state: State) -> Path:
    """The Pacemaker Remote key of the sandbox: the same on every node (bundles with an inner
    resource mount it into their containers)."""
    key = state.dir / "authkey"
    if not key.exists():
        key.write_bytes(os.urandom(4096))
        key.chmod(0o600)
    return key


def prepare_node_dir(
    node_dir: Path, name: str, conf: str, cib: Path, state: State, hosts: str = ""
) -> None:
    hacluster = shutil.chown
    for sub in BINDS:
        (node_dir / sub).mkdir(parents=True, exist_ok=True)
    for sub in ("cib", "pengine", "blackbox", "cores"):
        d = node_dir / "var-lib-pacemaker" / sub
        d.mkdir(exist_ok=True)
        d.chmod(0o750)
        hacluster(d, "hacluster", "haclient")
    target = node_dir / "var-lib-pacemaker" / "cib" / "cib.xml"
    shutil.copy(cib, target)
    target.chmod(0o600)
    hacluster(target, "hacluster", "haclient")
    (node_dir / "var-lib-pcmkimg").chmod(0o700)
    logs = node_dir / "log-pacemaker"
    (logs / "bundles").mkdir(exist_ok=True)
    for d in (logs, logs / "bundles"):
        d.chmod(0o770)
        hacluster(d, "hacluster", "haclient")
    (node_dir / "etc-corosync" / "corosync.conf").write_text(conf)
    pcmk = node_dir / "etc-pacemaker"
    pcmk.chmod(0o750)
    hacluster(pcmk, "root", "haclient")
    shutil.copy(cluster_authkey(state), pcmk / "authkey")
    (pcmk / "authkey").chmod(0o640)
    hacluster(pcmk / "authkey", "root", "haclient")
    (node_dir / "hosts").write_text(hosts)
    (node_dir / "hosts").chmod(0o644)
    etc = node_dir / "etc-containers"
    shutil.copy(state.dir / "containers.conf", etc / "containers.conf")
    shutil.copy(state.dir / "registries.conf", etc / "registries.conf")
    shutil.copy("/etc/containers/policy.json", etc / "policy.json")


def make_network(state: State, count: int) -> tuple[str, list[str]]:
    prefix = f"pcmkimg-{state.name}"
    bridge = f"{prefix}-br"
    run(["ip", "netns", "add", bridge])
    state.add_netns(bridge)
    run(["ip", "-n", bridge, "link", "add", "br0", "type", "bridge"])
    run(["ip", "-n", bridge, "link", "set", "br0", "up"])
    names = []
    for i in range(count):
        ns = f"{prefix}-c{i}"
        run(["ip", "netns", "add", ns])
        state.add_netns(ns)
        run(
            [
                "ip",
                "-n",
                bridge,
                "link",
                "add",
                f"v{i}",
                "type",
                "veth",
                "peer",
                "name",
                "eth0",
                "netns",
                ns,
            ]
        )
        run(["ip", "-n", bridge, "link", "set", f"v{i}", "master", "br0", "up"])
        run(["ip", "-n", ns, "addr", "add", f"{SUBNET}.{10 + i}/24", "dev", "eth0"])
        run(["ip", "-n", ns, "link", "set", "eth0", "up"])
        names.append(ns)
    return bridge, names


SPEC = REPO / "packaging" / "pcmkimg.spec"


def write_site(script: Path, site: Path) -> None:
    """Write ``site`` into an agent script as the RPM's %install writes its sitelib: the
    spec's own sed expression, run on ``script``."""
    (line,) = (line for line in SPEC.read_text().splitlines() if "_SITE = None" in line)
    expr = line.split("'")[1]  # sed -i 's|^_SITE = None$|_SITE = "%{python3_sitelib}"|' ...
    run(["sed", "-i", expr.replace("%{python3_sitelib}", str(site)), str(script)])
    if f'\n_SITE = "{site}"\n' not in script.read_text():
        raise SandboxError(f"{script}: the spec's sed did not write _SITE")


def installed_agents(node_dir: Path) -> Path:
    """Our agent scripts as the RPM installs them, in ``node_dir/agents``: ``_SITE`` written
    with where our packages are (:func:`write_site`; here the checkout), so that the agent,
    started with ``python3 -S``, finds them without the site module. The checkout's own
    scripts, bind-mounted, could not tell where the checkout is."""
    out = node_dir / "agents"
    out.mkdir(exist_ok=True)
    for script in (REPO / "agents").iterdir():
        copy = out / script.name
        copy.write_bytes(script.read_bytes())
        copy.chmod(0o755)
        write_site(copy, REPO)
    return out


def start_holder(state: State, ns: str, name: str, node_dir: Path) -> int:
    cfg = {
        "name": name,
        "dir": str(node_dir),
        "binds": BINDS,
        "files": FILE_BINDS,
        "mounts": [store_mount(Path(STORE))],
        "agents": {"pcmkimg": str(installed_agents(node_dir))},
        "site": system_site(),
        # The checkout only, as the RPM puts ocf/ and pcmkimg/ on the path: the agent needs the
        # standard library and the distribution's lxml (python3-lxml), never this test
        # virtualenv, whose packages would shadow the system's in every Python start on the node
        # (its certifi, imported by a .pth of this machine's platform, cost 23 ms of each).
        "pth": [str(REPO)],
    }
    for marker in ("init.ready", "init.error"):
        (node_dir / marker).unlink(missing_ok=True)
    proc = spawn(
        [
            "ip",
            "netns",
            "exec",
            ns,
            "unshare",
            "-m",
            "-u",
            "--propagation",
            "private",
            sys.executable,
            "-m",
            "tests.sandbox.nodeinit",
            json.dumps(cfg),
        ],
        log=node_dir / "init.log",
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    state.add_proc(proc.pid, f"holder {name}")

    def ready() -> bool:
        if (node_dir / "init.error").exists():
            raise SandboxError(f"{name}: {(node_dir / 'init.error').read_text().strip()}")
        if proc.poll() is not None:
            log = (node_dir / "init.log").read_text(errors="replace")[-1500:]
            raise SandboxError(f"{name}: node init exited {proc.returncode}: {log}")
        return (node_dir / "init.ready").exists()

    wait_for(ready, f"namespaces of {name}", timeout=30)
    return proc.pid


def system_site() -> str:
    """The first site directory of /usr/bin/python3, which runs the agents."""
    out = run(["/usr/bin/python3", "-c", "import site; print(site.getsitepackages()[0])"])
    return out.stdout.strip()


def agent_pythonpath() -> str:
    """Our repo and this interpreter's site-packages, for agents run by /usr/bin/python3."""
    import podman

    site = Path(podman.__file__).resolve().parents[1]
    return f"{REPO}:{site}"


def start(state: State, registry_port: int, timeout: float = 60) -> Cluster:
    count = len(NODE_NAMES)
    seed = state.dir / "cib-seed.xml"
    seed_cib(seed)
    _, namespaces = make_network(state, count)
    conf_nodes = [
        Node(name, i, state.dir / "cluster" / name, namespaces[i], 0)
        for i, name in enumerate(NODE_NAMES)
    ]
    conf = corosync_conf(conf_nodes, f"pcmkimg-{state.name}")
    hosts = hosts_file(conf_nodes)
    bridge_sock = state.dir / "registry-bridge.sock"
    proc = spawn(
        [
            "socat",
            f"UNIX-LISTEN:{bridge_sock},fork,unlink-early,mode=600",
            f"TCP:127.0.0.1:{registry_port}",
        ],
        log=state.dir / "socat-root.log",
    )
    state.add_proc(proc.pid, "socat registry bridge")
    nodes = []
    for proto in conf_nodes:
        prepare_node_dir(proto.dir, proto.name, conf, seed, state, hosts)
        holder = start_holder(state, proto.netns, proto.name, proto.dir)
        nodes.append(Node(proto.name, proto.index, proto.dir, proto.netns, holder))
    cluster = Cluster(state, tuple(nodes), registry_port)
    write_conf(cluster)
    state.info["cluster"] = [
        {"name": n.name, "dir": str(n.dir), "netns": n.netns, "holder": n.holder} for n in nodes
    ]
    state.save()
    for node in nodes:
        env = node_env()
        daemons = [
            (
                "socat",
                [
                    "socat",
                    f"TCP-LISTEN:{registry_port},bind=127.0.0.1,fork,reuseaddr",
                    f"UNIX-CONNECT:{bridge_sock}",
                ],
                env,
            ),
            ("podman", ["podman", "system", "service", "--time=0", node.url], env),
            ("corosync", ["corosync", "-f"], env),
        ]
        for what, argv, penv in daemons:
            p = spawn([*node.enter(), *argv], log=node.dir / f"{what}.log", env=penv)
            state.add_proc(p.pid, f"{what} {node.name}")
    for node in nodes:
        env = node_env(
            {
                "PCMK_logfile": "/var/log/pacemaker/pacemaker.log",
                "PCMK_logfacility": "none",
            }
        )
        p = spawn([*node.enter(), "pacemakerd", "-f"], log=node.dir / "pacemakerd.log", env=env)
        state.add_proc(p.pid, f"pacemakerd {node.name}")
    for node in nodes:
        wait_for(lambda n=node: unix_open(n.socket), f"podman socket of {node.name}", timeout=30)
    wait_for(lambda: cluster_ready(cluster, count), "a DC and 3 online nodes", timeout=timeout)
    return cluster


LEASE_PERIOD = 10.0
"""The sandbox's ``[lease] period`` (seconds): renewed every 3.3 s, lapses 10 s after a holder
died."""


def write_conf(cluster: Cluster) -> None:
    lines = ["[nodes]"]
    lines += [f"{n.name} = {n.url}" for n in cluster.nodes]
    lines += ["[registries]", f"127.0.0.1:{cluster.registry_port} = tls_verify=false"]
    # A short lease: a test that kills a holder waits this long before the next run takes it.
    lines += ["[lease]", f"period = {LEASE_PERIOD:g}"]
    cluster.conf.write_text("\n".join(lines) + "\n")


def cluster_ready(cluster: Cluster, count: int) -> bool:
    try:
        mon = cluster.crm_mon()
    except SandboxError:
        return False
    dc = mon.find("summary/current_dc")
    online = [n for n in mon.iterfind("nodes/node") if n.get("online") == "true"]
    return dc is not None and dc.get("present") == "true" and len(online) == count


def from_state(state: State) -> Cluster:
    raw = state.info.get("cluster")
    if not raw:
        raise SandboxError(f"sandbox {state.name!r} has no cluster")
    nodes = tuple(
        Node(r["name"], i, Path(r["dir"]), r["netns"], int(r["holder"]))  # type: ignore[index]
        for i, r in enumerate(raw)  # type: ignore[arg-type]
    )
    return Cluster(state, nodes, int(state.info["registry_port"]))  # type: ignore[arg-type]


def wait_idle(cluster: Cluster, node: str = "controller-0", timeout: int = 120) -> None:
    cluster.run(node, ["crm_resource", "--wait", f"--timeout={timeout}s"], timeout=timeout + 30)


def stop(cluster: Cluster) -> None:
    """Stop pacemaker everywhere first (it stops the bundles), then corosync."""
    from .proc import terminate

    by_kind: dict[str, list[int]] = {"pacemakerd": [], "corosync": []}
    for proc in cluster.state.procs:
        kind = proc.what.split()[0]
        if kind in by_kind:
            by_kind[kind].append(proc.pid)
    terminate(by_kind["pacemakerd"], timeout=90)
    time.sleep(0.2)
    terminate(by_kind["corosync"], timeout=30)
