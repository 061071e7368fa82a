"""ocf:pcmkimg:floating-image against real tools: ocf-tester, crm_resource, pcs, podman.

- ocf-tester runs the agent on the host against a podman-only sandbox node's API socket.
- crm_resource --validate runs on the host, where no cluster runs (a private mount namespace
  puts the agent under /usr/lib/ocf/resource.d/pcmkimg for that one command).
- crm_resource --force-* and pcs run on a sandbox cluster node, where the sandbox bind-mounts
  agents/ at /usr/lib/ocf/resource.d/pcmkimg.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sandbox.cluster import agent_pythonpath
from tests.sandbox.require import need, need_tools

REPO = Path(__file__).resolve().parents[2]
AGENT = REPO / "agents" / "floating-image"
SERVICE = "agentlive"
FLOATING = f"cluster.common.tag/{SERVICE}:pcmklatest"
MISSING = "cluster.common.tag/agentlive-absent:pcmklatest"
RA = ["--class", "ocf", "--provider", "pcmkimg", "--agent", "floating-image"]
NODE = "controller-0"


def _nobody_can_run(agent: Path) -> bool:
    probe = f"test -r {agent} && test -x {agent} && test -r {agent.parents[1]}/ocf/__init__.py"
    proc = subprocess.run(["su", "nobody", "-s", "/bin/sh", "-c", probe], check=False)
    return proc.returncode == 0


@pytest.fixture(scope="module")
def agent_path() -> Iterator[Path]:
    """The agent script, where user nobody can run it (a copy if the checkout is private)."""
    if _nobody_can_run(AGENT):
        yield AGENT
        return
    tmp = Path(tempfile.mkdtemp(prefix="pcmkimg-agent-"))
    try:
        for sub in ("agents", "ocf", "pcmkimg"):
            shutil.copytree(REPO / sub, tmp / sub, ignore=shutil.ignore_patterns("__pycache__"))
        for path in [tmp, *tmp.rglob("*")]:
            path.chmod(0o755 if path.is_dir() or path.name == "floating-image" else 0o644)
        copy = tmp / "agents" / "floating-image"
        assert _nobody_can_run(copy), f"user nobody cannot run {copy}"
        yield copy
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _ocf_tester(agent: Path, *options: str, instance: str) -> subprocess.CompletedProcess[str]:
    need_tools("ocf-tester", "xmllint", "su")
    need(os.path.exists("/usr/bin/python3"), "needs /usr/bin/python3 (the agent's interpreter)")
    drop = ("OCF_", "HA_", "CONTAINER")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env["PYTHONPATH"] = agent_pythonpath()
    opts = [arg for opt in options for arg in ("-o", opt)]
    return subprocess.run(
        ["ocf-tester", "-n", instance, *opts, str(agent)],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


# --------------------------------------------------------------------------- ocf-tester


def test_ocf_tester_passes_on_a_podman_node_holding_the_name(podman_sandbox, agent_path) -> None:
    sb = podman_sandbox
    node = sb.podman_nodes[0]
    ref = sb.ref("ns1/svc:1.0")
    sb.podman(node, "pull", "-q", ref)
    sb.podman(node, "tag", ref, FLOATING)
    instance = f"pcmkimg-tester-{os.getpid()}"
    state = Path("/run/pcmkimg") / f"{instance}.state"
    had_state_dir = state.parent.exists()
    try:
        result = _ocf_tester(
            agent_path, f"image={FLOATING}", f"podman_url={node.url}", instance=instance
        )
        assert result.returncode == 0, result.stdout + result.stderr
        assert "passed all tests" in result.stdout
        assert not state.exists()  # the last step stops the guard: its state is gone
    finally:
        state.unlink(missing_ok=True)
        if not had_state_dir:
            shutil.rmtree(state.parent, ignore_errors=True)
        sb.podman(node, "rmi", "-f", ref, FLOATING, check=False)


def test_ocf_tester_stops_at_start_when_the_name_is_absent(
    podman_sandbox, agent_path, tmp_path
) -> None:
    node = podman_sandbox.podman_nodes[1]
    result = _ocf_tester(
        agent_path,
        f"image={MISSING}",
        f"podman_url={node.url}",
        f"state_dir={tmp_path}",
        instance="pcmkimg-tester-absent",
    )
    assert result.returncode != 0
    assert "Start failed" in result.stdout
    assert f"ocf-exit-reason:{MISSING} missing on" in result.stdout


# --------------------------------------------------------------------------- validate, no cluster


def _validate_on_host(*options: str) -> subprocess.CompletedProcess[str]:
    """crm_resource --validate on the host (no cluster there), the agent in a private mount."""
    need_tools("crm_resource", "unshare", "mount")
    need(os.geteuid() == 0, "needs root (a private mount namespace)")
    with tempfile.TemporaryDirectory(prefix="pcmkimg-ra-") as tmp:
        (Path(tmp) / "pcmkimg").mkdir()
        (Path(tmp) / "pcmkimg" / "floating-image").symlink_to(AGENT)
        opts = [arg for opt in options for arg in ("--option", opt)]
        script = 'mount --bind "$1" /usr/lib/ocf/resource.d && shift && exec "$@"'
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OCF_", "CIB_"))}
        env["LC_ALL"] = "C"
        return subprocess.run(
            ["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", tmp]
            + ["crm_resource", "--validate", *RA, *opts],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )


def test_validate_without_a_cluster_checks_parameters_only() -> None:
    result = _validate_on_host(f"image={MISSING}")  # absent everywhere: level 0 does not care
    assert result.returncode == 0, result.stdout + result.stderr


def test_validate_without_a_cluster_refuses_a_malformed_image() -> None:
    result = _validate_on_host("image=Bad:://x")
    assert result.returncode == 6, result.stdout + result.stderr
    reasons = [ln for ln in result.stdout.splitlines() if ln.startswith("ocf-exit-reason:")]
    assert len(reasons) == 1 and reasons[0].startswith("ocf-exit-reason:image: "), result.stdout
    assert len(reasons[0]) - len("ocf-exit-reason:") <= 128


def test_validate_without_a_cluster_refuses_a_remote_podman_url() -> None:
    result = _validate_on_host(f"image={FLOATING}", "podman_url=tcp://127.0.0.1:1")
    assert result.returncode == 6, result.stdout + result.stderr
    assert "unix://" in result.stdout


# --------------------------------------------------------------------------- on a cluster node


@pytest.fixture(scope="module")
def cl(cluster_sandbox):  # type: ignore[no-untyped-def]
    """The cluster, with FLOATING tagged on controller-0 only."""
    cluster = cluster_sandbox.cluster
    ref = cluster_sandbox.ref("ns1/svc:1.0")
    cluster.podman(NODE, "pull", "-q", ref)
    cluster.podman(NODE, "tag", ref, FLOATING)
    try:
        yield cluster
    finally:
        cluster.podman(NODE, "untag", ref, FLOATING, check=False)
        cluster.podman(NODE, "rmi", ref, check=False)


def _crm_resource(cluster, node: str, *args: str):  # type: ignore[no-untyped-def]
    env = {"PYTHONPATH": agent_pythonpath()}
    return cluster.run(node, ["crm_resource", *args], env=env, check=False, timeout=120)


def _force(cluster, node: str, action: str, image: str, *options: str):  # type: ignore[no-untyped-def]
    opts = [f"image={image}", f"attribute=pcmkimg-{SERVICE}-test", f"state_dir=/run/{SERVICE}"]
    flat = [arg for opt in [*opts, *options] for arg in ("--option", opt)]
    return _crm_resource(cluster, node, f"--force-{action}", *RA, *flat)


def test_force_start_of_an_absent_name_is_5_with_the_reason_and_the_probe_is_7(cl) -> None:
    start = _force(cl, "controller-2", "start", FLOATING)
    assert start.returncode == 5, start.stdout + start.stderr
    reason = (
        f"ocf-exit-reason:{FLOATING} missing on controller-2; "
        f"fix: pcmkimg update --node controller-2 {SERVICE} --image REF"
    )
    assert reason in start.stdout.splitlines(), start.stdout
    probe = _force(cl, "controller-2", "check", FLOATING)
    assert probe.returncode == 7, probe.stdout + probe.stderr


@pytest.mark.parametrize(
    "url", ["unix:///run/podman/podman.sock", "unix:///nonexistent/podman.sock"]
)
def test_start_and_monitor_resolve_with_or_without_the_api_socket(cl, url: str) -> None:
    """No new single point of failure: without the podman API the podman command answers."""
    node = cl.node(NODE)
    real = url if "nonexistent" in url else node.url
    try:
        start = _force(cl, NODE, "start", FLOATING, f"podman_url={real}")
        assert start.returncode == 0, start.stdout + start.stderr
        check = _force(cl, NODE, "check", FLOATING, f"podman_url={real}")
        assert check.returncode == 0, check.stdout + check.stderr
        absent = _force(cl, NODE, "start", MISSING, f"podman_url={real}")
        assert absent.returncode == 5, absent.stdout + absent.stderr
    finally:
        stop = _force(cl, NODE, "stop", FLOATING, f"podman_url={real}")
        assert stop.returncode == 0, stop.stdout + stop.stderr
    assert _force(cl, NODE, "check", FLOATING).returncode == 7


def test_show_metadata(cl) -> None:
    out = _crm_resource(cl, NODE, "--show-metadata", "ocf:pcmkimg:floating-image")
    assert out.returncode == 0, out.stderr
    assert '<resource-agent name="floating-image"' in out.stdout


@pytest.fixture
def system_python_sees_the_checkout(cl) -> Iterator[None]:
    """pcs runs crm_resource with an empty environment: no PYTHONPATH reaches the agent.

    On a real node the RPM puts ocf/ and pcmkimg/ on /usr/bin/python3's path. On this node
    only (its own mount namespace), a .pth file in /usr/local/lib/python3.X/dist-packages
    does the same for the checkout.
    """
    proc = subprocess.run(
        ["/usr/bin/python3", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
        capture_output=True,
        text=True,
        check=True,
    )
    site = Path(f"/usr/local/lib/python{proc.stdout.strip()}/dist-packages")
    need(site.is_dir(), f"needs {site} (the system python's local site directory)")
    with tempfile.TemporaryDirectory(prefix="pcmkimg-site-") as tmp:
        Path(tmp).chmod(0o755)
        (Path(tmp) / "pcmkimg-checkout.pth").write_text(f"{REPO}\n")
        cl.run(NODE, ["mount", "--bind", tmp, str(site)])
        try:
            yield
        finally:
            cl.run(NODE, ["umount", str(site)], check=False)


_PCS_OPTION = re.compile(r"  (?P<name>[A-Za-z_][\w-]*)(?P<flags>(?: \([^)]*\))*)(?::.*)?")


def pcs_described_options(text: str) -> dict[str, set[str]]:
    """Each option of `pcs resource describe`'s "Resource options:" with its flags.

    pcs has no machine output for describe, so this reads only what both pcs 0.11 and
    0.12 print: each option starts a line at two spaces with its name and its flags, each
    in parentheses (`ip (required) (unique)`). pcs 0.11 puts ": DESCRIPTION" after them;
    pcs 0.12 puts the description, type and default on lines indented further below.
    """
    options: dict[str, set[str]] = {}
    lines = iter(text.splitlines())
    for line in lines:
        if line.rstrip() == "Resource options:":
            break
    for line in lines:
        if not line.startswith("  "):
            break
        m = _PCS_OPTION.fullmatch(line.rstrip())
        if m:
            options[m.group("name")] = set(re.findall(r"\(([^)]*)\)", m.group("flags")))
    return options


@pytest.mark.parametrize(
    "text",
    [
        # pcs 0.11.5 (Debian 12)
        "ocf:x:y - short\n\nlong text\n\nResource options:\n"
        "  image (required): The floating name: the image the bundle runs.\n"
        "  podman_url: The node's podman API socket.\n"
        "  attribute (required) (unique): Where to publish it.\n\n"
        "Default operations:\n  start:\n    interval=0s\n",
        # pcs 0.12.0 (Debian 13)
        "ocf:x:y - short\n\nlong text\n\nResource options:\n"
        "  image (required)\n    Description: The floating name: the image the bundle runs.\n"
        "    Type: string\n"
        "  podman_url\n    Description: The node's podman API socket.\n    Type: string\n"
        "    Default: unix:///run/podman/podman.sock\n"
        "  attribute (required) (unique)\n    Description: Where to publish it.\n"
        "    Type: string\n\n"
        "Default operations:\n  start:\n    interval=0s timeout=20s\n",
    ],
    ids=["pcs-0.11", "pcs-0.12"],
)
def test_pcs_described_options_reads_both_pcs_layouts(text: str) -> None:
    assert pcs_described_options(text) == {
        "image": {"required"},
        "podman_url": set(),
        "attribute": {"required", "unique"},
    }


def test_pcs_resource_describe(cl, system_python_sees_the_checkout) -> None:
    out = cl.run(NODE, ["pcs", "resource", "describe", "ocf:pcmkimg:floating-image"], check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Guards a bundle whose image is a node-local floating name" in out.stdout
    options = pcs_described_options(out.stdout)
    assert "required" in options.get("image", set()), out.stdout
    for param in ("podman_url", "attribute", "state_dir"):
        assert param in options, out.stdout
