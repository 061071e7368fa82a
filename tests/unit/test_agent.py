"""The guard agent's logic (pcmkimg.agent) with plain data: no podman, no cluster.

The image store and the node attribute are replaced by in-memory stand-ins; the agent runs
through the OCF toolkit's dispatcher exactly as the script does.
"""

from __future__ import annotations

import io
import json
import socket
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ocf import OCFRC, run
from pcmkimg import agent
from pcmkimg.images import ImageInfo, Resolved, StoreError

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "agents" / "floating-image"
FLOATING = "cluster.common.tag/svc:pcmklatest"
PREFIX = "ocf-exit-reason:"
ID_A = "a" * 64
ID_B = "b" * 64
DIGEST = "sha256:" + "d" * 64


def resolved(image_id: str = ID_A, *names: str, digest: str | None = DIGEST) -> Resolved:
    info = ImageInfo(id=image_id, digest=digest, repo_digests=(), names=(FLOATING, *names))
    return Resolved("n1", FLOATING, info)


@dataclass
class World:
    """What the agent sees: this node's store and the node attributes it set."""

    store: Resolved | None | Exception = None
    attributes: dict[str, str] = field(default_factory=dict)
    resolves: int = 0


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> World:
    w = World()

    def fake_resolve(ctx, recorded=None):  # type: ignore[no-untyped-def]
        agent._image_text(ctx, recorded)
        w.resolves += 1
        if isinstance(w.store, Exception):
            raise w.store
        return w.store

    def fake_set(ctx, name: str, value: str | None) -> None:  # type: ignore[no-untyped-def]
        if value is None:
            w.attributes.pop(name, None)
        else:
            w.attributes[name] = value

    monkeypatch.setattr(agent, "_resolve", fake_resolve)
    monkeypatch.setattr(agent, "_set_attribute", fake_set)
    return w


@dataclass
class Result:
    rc: int
    stdout: str
    stderr: str

    @property
    def reasons(self) -> list[str]:
        return [ln[len(PREFIX) :] for ln in self.stderr.splitlines() if ln.startswith(PREFIX)]


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    return tmp_path / "state"


def act(action: str, state_dir: Path, **params: str) -> Result:
    env = {
        "OCF_ROOT": "/usr/lib/ocf",
        "OCF_RESOURCE_INSTANCE": "svc-guard",
        "OCF_RESKEY_CRM_meta_on_node": "controller-1",
        "OCF_RESKEY_image": FLOATING,
        "OCF_RESKEY_state_dir": str(state_dir),
        "HA_LOGFILE": "/dev/null",
    }
    interval = params.pop("interval", None)
    if action == "monitor":
        env["OCF_RESKEY_CRM_meta_interval"] = "30000" if interval is None else interval
    for key, value in params.items():
        env[key if key.startswith("OCF_") else f"OCF_RESKEY_{key}"] = value
    out, err = io.StringIO(), io.StringIO()
    rc = run(agent.AGENT, [action], env, stdout=out, stderr=err)
    return Result(rc, out.getvalue(), err.getvalue())


# --------------------------------------------------------------------------- describe / fit


def test_describe_names_the_real_image_with_its_digest() -> None:
    found = resolved(
        ID_A, "reg.example.com:8787/ns1/svc:1.1", "cluster.common.tag/svc:pcmkprevious"
    )
    assert agent.describe(found) == f"reg.example.com:8787/ns1/svc:1.1@{DIGEST}"


def test_describe_picks_the_first_real_name_in_order() -> None:
    found = resolved(ID_A, "reg.example.com/ns2/svc:1.1", "reg.example.com/ns1/svc:1.1")
    assert agent.describe(found).startswith("reg.example.com/ns1/svc:1.1@")


def test_describe_without_a_real_name_shows_the_image_id() -> None:
    assert agent.describe(resolved(ID_A, digest=None)) == f"sha256:{ID_A[:12]}"
    assert agent.describe(resolved(ID_A)) == f"sha256:{ID_A[:12]}@{DIGEST}"


def test_describe_keeps_a_name_that_already_has_a_digest() -> None:
    name = f"reg.example.com/ns1/svc@{DIGEST}"
    assert agent.describe(resolved(ID_A, name)) == name


def test_fit_takes_the_first_candidate_that_fits() -> None:
    long = "x" * 200
    assert agent.fit("short") == "short"
    assert agent.fit(long, "fallback") == "fallback"
    cut = agent.fit(long, "y" * 129)
    assert len(cut) == agent.REASON_MAX and cut.endswith("...")


# --------------------------------------------------------------------------- validate-all


def test_validate_level_0_checks_parameters_only(world: World, state_dir: Path) -> None:
    world.store = None  # the name is absent: level 0 must not care
    result = act("validate-all", state_dir)
    assert result.rc == OCFRC.SUCCESS
    assert world.resolves == 0


def test_validate_refuses_a_malformed_image_with_a_short_reason(
    world: World, state_dir: Path
) -> None:
    result = act("validate-all", state_dir, image="Bad:://" + "x" * 300)
    assert result.rc == OCFRC.ERR_CONFIGURED
    assert len(result.reasons) == 1
    assert result.reasons[0].startswith("image: ")
    assert len(result.reasons[0]) <= agent.REASON_MAX


def test_validate_requires_the_image(world: World, state_dir: Path) -> None:
    result = act("validate-all", state_dir, image="")
    assert result.rc == OCFRC.ERR_CONFIGURED
    assert "image" in result.reasons[0]


@pytest.mark.parametrize("url", ["tcp://127.0.0.1:8080", "ssh://root@h/run/podman/podman.sock"])
def test_validate_refuses_a_remote_podman_url(world: World, state_dir: Path, url: str) -> None:
    result = act("validate-all", state_dir, podman_url=url)
    assert result.rc == OCFRC.ERR_CONFIGURED
    assert "unix://" in result.reasons[0]
    assert len(result.reasons[0]) <= agent.REASON_MAX


def test_validate_level_10_needs_the_name_here(world: World, state_dir: Path) -> None:
    world.store = None
    assert act("validate-all", state_dir, OCF_CHECK_LEVEL="10").rc == OCFRC.ERR_INSTALLED
    world.store = resolved()
    assert act("validate-all", state_dir, OCF_CHECK_LEVEL="10").rc == OCFRC.SUCCESS


# --------------------------------------------------------------------------- start / stop


def test_start_refuses_a_missing_name_with_rc_5_and_the_fix(world: World, state_dir: Path) -> None:
    result = act("start", state_dir)
    assert result.rc == OCFRC.ERR_INSTALLED
    assert result.reasons == [
        f"{FLOATING} missing on controller-1; fix: pcmkimg update --node controller-1 svc "
        "--image REF"
    ]
    assert not state_dir.exists() or not any(state_dir.iterdir())
    assert world.attributes == {}


@pytest.mark.parametrize(
    "image, node",
    [
        (f"registry.example.com:8787/{'a' * 60}/{'b' * 60}:pcmklatest", "controller-1"),
        (FLOATING, "n" * 120),
        (f"cluster.common.tag/{'s' * 100}:pcmklatest", "overcloud-controller-0.example.com"),
    ],
)
def test_exit_reasons_fit_in_128_characters(
    world: World, state_dir: Path, image: str, node: str
) -> None:
    start = act("start", state_dir, image=image, CRM_meta_on_node=node)
    assert start.rc == OCFRC.ERR_INSTALLED
    assert len(start.reasons) == 1 and len(start.reasons[0]) <= agent.REASON_MAX
    assert "missing" in start.reasons[0]

    world.store = resolved()
    assert act("start", state_dir, image=image, CRM_meta_on_node=node).rc == OCFRC.SUCCESS
    world.store = None
    degraded = act("monitor", state_dir, image=image, CRM_meta_on_node=node)
    assert degraded.rc == OCFRC.DEGRADED
    assert len(degraded.reasons) == 1 and len(degraded.reasons[0]) <= agent.REASON_MAX
    assert "vanished" in degraded.reasons[0]


def test_start_records_state_and_publishes_the_real_image(world: World, state_dir: Path) -> None:
    world.store = resolved(ID_A, "reg.example.com/ns1/svc:1.0")
    result = act("start", state_dir)
    assert result.rc == OCFRC.SUCCESS, result.stderr
    assert world.attributes == {"pcmkimg-svc": f"reg.example.com/ns1/svc:1.0@{DIGEST}"}
    state = state_dir / "svc-guard.json"
    assert stat.S_IMODE(state.stat().st_mode) == 0o600
    assert stat.S_IMODE(state_dir.stat().st_mode) == 0o700
    assert act("start", state_dir).rc == OCFRC.SUCCESS  # a started resource starts again


def test_start_refuses_a_state_dir_others_can_write(world: World, state_dir: Path) -> None:
    world.store = resolved(ID_A, "reg.example.com/ns1/svc:1.0")
    state_dir.mkdir(mode=0o777)
    state_dir.chmod(0o777)
    result = act("start", state_dir)
    assert result.rc == OCFRC.ERR_PERM
    assert "not writable by others" in result.stderr
    assert not (state_dir / "svc-guard.json").exists()


def test_start_never_writes_through_a_planted_symlink(world: World, state_dir: Path) -> None:
    world.store = resolved(ID_A, "reg.example.com/ns1/svc:1.0")
    state_dir.mkdir(mode=0o700)
    victim = state_dir.parent / "victim"
    victim.write_text("keep")
    (state_dir / "svc-guard.tmp").symlink_to(victim)
    assert act("start", state_dir).rc == OCFRC.SUCCESS
    assert victim.read_text() == "keep"
    assert not (state_dir / "svc-guard.json").is_symlink()


def test_attribute_parameter_overrides_the_name(world: World, state_dir: Path) -> None:
    world.store = resolved(ID_A, "reg.example.com/ns1/svc:1.0")
    assert act("start", state_dir, attribute="galera-image").rc == OCFRC.SUCCESS
    assert set(world.attributes) == {"galera-image"}
    assert act("stop", state_dir, attribute="galera-image").rc == OCFRC.SUCCESS
    assert world.attributes == {}


def test_stop_clears_state_and_attribute_and_is_idempotent(world: World, state_dir: Path) -> None:
    world.store = resolved(ID_A, "reg.example.com/ns1/svc:1.0")
    act("start", state_dir)
    assert act("stop", state_dir).rc == OCFRC.SUCCESS
    assert world.attributes == {}
    assert not (state_dir / "svc-guard.json").exists()
    assert act("stop", state_dir).rc == OCFRC.SUCCESS


def test_stop_succeeds_even_when_misconfigured(world: World, state_dir: Path) -> None:
    assert act("stop", state_dir, image="").rc == OCFRC.SUCCESS
    assert act("stop", state_dir, image="Bad:://x").rc == OCFRC.SUCCESS


# --------------------------------------------------------------------------- monitor


@pytest.fixture
def started(world: World, state_dir: Path) -> Iterator[World]:
    world.store = resolved(ID_A, "reg.example.com/ns1/svc:1.0")
    assert act("start", state_dir).rc == OCFRC.SUCCESS
    yield world


def test_monitor_of_a_stopped_guard_is_7_without_touching_the_store(
    world: World, state_dir: Path
) -> None:
    assert act("monitor", state_dir).rc == OCFRC.NOT_RUNNING
    assert act("monitor", state_dir, interval="0").rc == OCFRC.NOT_RUNNING  # probe
    assert act("monitor", state_dir, interval="0", image="").rc == OCFRC.NOT_RUNNING
    assert world.resolves == 0


def test_monitor_running_is_0(started: World, state_dir: Path) -> None:
    assert act("monitor", state_dir).rc == OCFRC.SUCCESS
    assert act("monitor", state_dir, interval="0").rc == OCFRC.SUCCESS


def test_monitor_is_degraded_when_the_name_vanished(started: World, state_dir: Path) -> None:
    started.store = None
    for interval in ("30000", "0"):  # a probe of a running guard says the same
        result = act("monitor", state_dir, interval=interval)
        assert result.rc == OCFRC.DEGRADED
        assert result.reasons == [
            f"{FLOATING} vanished; fix: pcmkimg update --node controller-1 svc --image REF"
        ]
    # The attribute keeps the last image known to run here.
    assert started.attributes["pcmkimg-svc"].startswith("reg.example.com/ns1/svc:1.0@")


def test_monitor_is_degraded_when_the_store_cannot_be_read(started: World, state_dir: Path) -> None:
    started.store = agent.OCFError(OCFRC.ERR_GENERIC, "image store unreadable: boom")
    result = act("monitor", state_dir)
    assert result.rc == OCFRC.DEGRADED
    assert "image store unreadable" in result.reasons[0]


def test_start_fails_generic_when_the_store_cannot_be_read(world: World, state_dir: Path) -> None:
    world.store = agent.OCFError(OCFRC.ERR_GENERIC, "image store unreadable: boom")
    assert act("start", state_dir).rc == OCFRC.ERR_GENERIC


def test_monitor_republishes_when_the_tag_moved(started: World, state_dir: Path) -> None:
    started.store = resolved(ID_B, "reg.example.com/ns2/svc:1.1")
    assert act("monitor", state_dir).rc == OCFRC.SUCCESS
    assert started.attributes["pcmkimg-svc"] == f"reg.example.com/ns2/svc:1.1@{DIGEST}"
    assert ID_B in (state_dir / "svc-guard.json").read_text()


def test_resolve_maps_a_store_error_to_a_short_generic_failure(
    monkeypatch: pytest.MonkeyPatch, state_dir: Path
) -> None:
    from pcmkimg import localstore

    def broken(*args: object, **kw: object) -> None:
        raise StoreError("podman said: " + "z" * 300, "look at it", node="controller-1")

    monkeypatch.setattr(localstore, "resolve_local", broken)
    monkeypatch.setattr(agent, "_set_attribute", lambda *a: None)
    result = act("start", state_dir)
    assert result.rc == OCFRC.ERR_GENERIC
    assert result.reasons[0].startswith("image store unreadable: ")
    assert len(result.reasons[0]) <= agent.REASON_MAX


# --------------------------------------------------------------------------- the script


def test_script_runs_under_the_system_python_and_is_world_executable() -> None:
    mode = SCRIPT.stat().st_mode
    assert mode & stat.S_IXOTH and mode & stat.S_IROTH
    assert SCRIPT.read_text().startswith("#!/usr/bin/python3\n")


def run_script(action: str, env: dict[str, str] | None = None) -> tuple[str, list[str]]:
    """Run the script's ``action`` under the system python: its stdout and the modules of
    pcmkimg, podman-py and lxml it imported. The action must exit 0."""
    code = (
        "import os, runpy, sys\n"
        f"os.environ.update({env or {}!r})\n"
        f"sys.argv = [{str(SCRIPT)!r}, {action!r}]\n"
        "try:\n"
        f"    runpy.run_path({str(SCRIPT)!r}, run_name='__main__')\n"
        "except SystemExit as exc:\n"
        "    assert exc.code in (0, None), exc.code\n"
        "watch = ('pcmkimg', 'podman', 'lxml')\n"
        "mods = sorted(m for m in sys.modules if m.split('.')[0] in watch)\n"
        "print(' '.join(mods), file=sys.stderr)\n"
    )
    python = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
    proc = subprocess.run(
        [python, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout, proc.stderr.split()


def test_meta_data_imports_only_the_toolkit_and_the_agent_module() -> None:
    """meta-data runs as nobody, often: no podman-py, lxml or pacemaker runner."""
    stdout, modules = run_script("meta-data")
    assert stdout.startswith('<?xml version="1.0"')
    assert modules == ["pcmkimg", "pcmkimg.agent"]


@pytest.fixture
def api_socket(tmp_path: Path) -> Iterator[Path]:
    """A stand-in podman API socket that answers every request with the image of FLOATING."""
    path = tmp_path / "api.sock"
    image = {
        "Id": ID_A,
        "Digest": DIGEST,
        "RepoTags": [FLOATING, "reg.example.com/ns1/svc:1.0"],
        "Created": "2024-05-01T10:00:00.123456789Z",
    }
    answer = (
        b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n" + json.dumps(image).encode()
    )
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen()

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:  # closed: the test is over
                return
            with conn:
                conn.recv(65536)
                conn.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield path
    server.shutdown(socket.SHUT_RDWR)  # wakes up the accept()
    server.close()
    thread.join(timeout=5)


def test_monitor_imports_neither_podman_lxml_images_nor_config(
    api_socket: Path, state_dir: Path
) -> None:
    """monitor runs every 30 s on every node: no podman-py, lxml, config or pacemaker runner."""
    state_dir.mkdir(mode=0o700)
    recorded = {
        "image": FLOATING,
        "image_id": ID_A,
        "value": f"reg.example.com/ns1/svc:1.0@{DIGEST}",
        "attribute": "pcmkimg-svc",
    }
    (state_dir / "svc-guard.json").write_text(json.dumps(recorded))
    env = {
        "OCF_ROOT": "/usr/lib/ocf",
        "OCF_RESOURCE_INSTANCE": "svc-guard",
        "OCF_RESKEY_image": FLOATING,
        "OCF_RESKEY_podman_url": f"unix://{api_socket}",
        "OCF_RESKEY_state_dir": str(state_dir),
        "OCF_RESKEY_CRM_meta_interval": "30000",
        "HA_LOGFILE": "/dev/null",
    }
    loaded = set(run_script("monitor", env)[1])
    assert "pcmkimg.localstore" in loaded  # the store was read
    assert not loaded & {"pcmkimg.images", "pcmkimg.config", "pcmkimg.pacemaker"}
    assert not any(m.split(".")[0] in ("podman", "lxml") for m in loaded)


def test_the_local_store_quotes_and_defaults_as_the_library_does() -> None:
    from urllib.parse import quote

    from pcmkimg import config, localstore

    assert localstore.LOCAL_URL == config.LOCAL_URL == agent.DEFAULT_URL
    for name in (FLOATING, "[::1]:5000/ns/img:1.0", f"reg.example.com/a_b/c-d@{DIGEST}", "é %/?#"):
        assert localstore._quote(name) == quote(name, safe="/:@")


def test_meta_data_advertises_the_parameters_and_actions() -> None:
    from lxml import etree

    out = io.StringIO()
    assert run(agent.AGENT, ["meta-data"], {}, stdout=out, stderr=io.StringIO()) == 0
    doc = etree.fromstring(out.getvalue().encode())
    params = {p.get("name"): p for p in doc.iterfind("parameters/parameter")}
    assert set(params) == {"image", "podman_url", "attribute", "state_dir"}
    assert params["image"].get("required") == "1"
    assert params["podman_url"].find("content").get("default") == agent.DEFAULT_URL
    actions = {a.get("name"): a for a in doc.iterfind("actions/action")}
    assert {"start", "stop", "monitor", "validate-all", "meta-data"} <= set(actions)
    assert actions["monitor"].get("interval") == "30s"


def test_monitor_that_cannot_record_a_moved_tag_is_degraded_not_failed(
    started: World, state_dir: Path
) -> None:
    """A failed monitor would restart the replica (order + colocation): degraded instead."""
    started.store = resolved(ID_B, "reg.example.com/ns2/svc:1.1")
    state_dir.chmod(0o777)  # the state can no longer be written safely
    try:
        result = act("monitor", state_dir)
    finally:
        state_dir.chmod(0o700)
    assert result.rc == OCFRC.DEGRADED
    assert "could not record the new image" in result.stderr
