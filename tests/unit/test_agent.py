"""The guard agent's logic (pcmkimg.agent) with plain data: no podman, no cluster.

The agent reaches the node through its ports (:class:`pcmkimg.agent.Ports`: the image store and
the node attributes); the tests give it a fake of them (:class:`World`), or the real store over
a stand-in API socket with the attributes kept in memory (:class:`Attributes`). Nothing of
pcmkimg is patched; the agent runs through the OCF toolkit's dispatcher exactly as the script
does.
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
from pcmkimg.adapters import apisocket
from pcmkimg.core.errors import PodmanCommandFailed, StoreError
from pcmkimg.core.images import ImageInfo, Resolved
from pcmkimg.records import replace
from tests.sandbox.cluster import write_site
from tests.sandbox.require import need

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "agents" / "floating-image"
FLOATING = "cluster.common.tag/svc:pcmklatest"
PREFIX = "ocf-exit-reason:"
ID_A = "a" * 64
ID_B = "b" * 64
ID_C = "c" * 64
DIGEST = "sha256:" + "d" * 64


def image(image_id: str, *names: str, digest: str | None = DIGEST) -> ImageInfo:
    return ImageInfo(id=image_id, digest=digest, repo_digests=(), names=names)


def resolved(image_id: str = ID_A, *names: str, digest: str | None = DIGEST) -> Resolved:
    return Resolved("n1", FLOATING, image(image_id, FLOATING, *names, digest=digest))


class Attributes(agent.Ports):
    """The real ports (the store over ``podman_url``) but for the node attributes, kept here."""

    def __init__(self) -> None:
        self.attributes: dict[str, str] = {}

    def set_attribute(self, node: str, name: str, value: str | None) -> None:
        if value is None:
            self.attributes.pop(name, None)
        else:
            self.attributes[name] = value


@dataclass
class World(agent.Ports):
    """A fake of the agent's ports: this node's store and the node attributes it set. The store
    has no API socket (the agent falls back to the podman command's reading: no API answer to
    record)."""

    store: Resolved | None | Exception = None
    """What the floating name resolves to."""
    attributes: dict[str, str] = field(default_factory=dict)
    resolves: int = 0
    """How many times the agent read the floating name."""
    images: dict[str, ImageInfo] = field(default_factory=dict)
    """The store's images by ID (what a heal looks for), besides ``store``."""
    running: tuple[str, ...] = ()
    """The IDs of the images that running containers created from the floating name run."""
    tag_error: Exception | None = None
    tagged: list[tuple[str, str]] = field(default_factory=list)
    find_error: Exception | None = None
    """What looking for an image in the store raises (a store that cannot be read)."""

    def inspect(self, url: str, name: str) -> tuple[int, str, bytes]:
        raise apisocket.NoAnswer("no API socket here")

    def resolve_with_cli(self, name: str, node: str) -> Resolved | None:
        self.resolves += 1
        if isinstance(self.store, Exception):
            raise self.store
        return self.store

    def find(self, url: str, name: str, node: str) -> Resolved | None:
        if self.find_error is not None:
            raise self.find_error
        found = self.images.get(name)
        return None if found is None else Resolved("n1", name, found)

    def running_images(self, url: str, name: str, node: str) -> tuple[str, ...]:
        return self.running

    def tag(self, url: str, image_id: str, name: str, node: str) -> None:
        if self.tag_error is not None:
            raise self.tag_error
        self.tagged.append((image_id, name))
        info = self.images[image_id]
        self.store = Resolved("n1", name, replace(info, names=(name, *info.names)))

    def set_attribute(self, node: str, name: str, value: str | None) -> None:
        if value is None:
            self.attributes.pop(name, None)
        else:
            self.attributes[name] = value


def unreadable() -> StoreError:
    """What a store that cannot be read raises."""
    return StoreError("boom", node="controller-1")


@pytest.fixture
def world() -> World:
    return World()


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


def act(ports: agent.Ports, action: str, state_dir: Path, **params: str) -> Result:
    """Run ``action`` of the agent whose actions reach the node through ``ports``."""
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
        env[key if key.startswith(("OCF_", "HA_")) else f"OCF_RESKEY_{key}"] = value
    out, err = io.StringIO(), io.StringIO()
    rc = run(agent.guard(ports), [action], env, stdout=out, stderr=err)
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
    result = act(world, "validate-all", state_dir)
    assert result.rc == OCFRC.SUCCESS
    assert world.resolves == 0


def test_validate_refuses_a_malformed_image_with_a_short_reason(
    world: World, state_dir: Path
) -> None:
    result = act(world, "validate-all", state_dir, image="Bad:://" + "x" * 300)
    assert result.rc == OCFRC.ERR_CONFIGURED
    assert len(result.reasons) == 1
    assert result.reasons[0].startswith("image: ")
    assert len(result.reasons[0]) <= agent.REASON_MAX


def test_validate_requires_the_image(world: World, state_dir: Path) -> None:
    result = act(world, "validate-all", state_dir, image="")
    assert result.rc == OCFRC.ERR_CONFIGURED
    assert "image" in result.reasons[0]


@pytest.mark.parametrize("url", ["tcp://127.0.0.1:8080", "ssh://root@h/run/podman/podman.sock"])
def test_validate_refuses_a_remote_podman_url(world: World, state_dir: Path, url: str) -> None:
    result = act(world, "validate-all", state_dir, podman_url=url)
    assert result.rc == OCFRC.ERR_CONFIGURED
    assert "unix://" in result.reasons[0]
    assert len(result.reasons[0]) <= agent.REASON_MAX


def test_validate_level_10_needs_the_name_here(world: World, state_dir: Path) -> None:
    world.store = None
    assert act(world, "validate-all", state_dir, OCF_CHECK_LEVEL="10").rc == OCFRC.ERR_INSTALLED
    world.store = resolved()
    assert act(world, "validate-all", state_dir, OCF_CHECK_LEVEL="10").rc == OCFRC.SUCCESS


# --------------------------------------------------------------------------- start / stop


def test_start_refuses_a_missing_name_with_rc_5_and_the_fix(world: World, state_dir: Path) -> None:
    result = act(world, "start", state_dir)
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
    start = act(world, "start", state_dir, image=image, CRM_meta_on_node=node)
    assert start.rc == OCFRC.ERR_INSTALLED
    assert len(start.reasons) == 1 and len(start.reasons[0]) <= agent.REASON_MAX
    assert "missing" in start.reasons[0]

    world.store = resolved()
    assert act(world, "start", state_dir, image=image, CRM_meta_on_node=node).rc == OCFRC.SUCCESS
    world.store = None
    degraded = act(world, "monitor", state_dir, image=image, CRM_meta_on_node=node)
    assert degraded.rc == OCFRC.DEGRADED
    assert len(degraded.reasons) == 1 and len(degraded.reasons[0]) <= agent.REASON_MAX
    assert "vanished" in degraded.reasons[0]


def test_start_records_state_and_publishes_the_real_image(world: World, state_dir: Path) -> None:
    world.store = resolved(ID_A, "reg.example.com/ns1/svc:1.0")
    result = act(world, "start", state_dir)
    assert result.rc == OCFRC.SUCCESS, result.stderr
    assert world.attributes == {"pcmkimg-svc": f"reg.example.com/ns1/svc:1.0@{DIGEST}"}
    state = state_dir / "svc-guard.state"
    assert stat.S_IMODE(state.stat().st_mode) == 0o600
    assert stat.S_IMODE(state_dir.stat().st_mode) == 0o700
    assert act(world, "start", state_dir).rc == OCFRC.SUCCESS  # a started resource starts again


def test_start_refuses_a_state_dir_others_can_write(world: World, state_dir: Path) -> None:
    world.store = resolved(ID_A, "reg.example.com/ns1/svc:1.0")
    state_dir.mkdir(mode=0o777)
    state_dir.chmod(0o777)
    result = act(world, "start", state_dir)
    assert result.rc == OCFRC.ERR_PERM
    assert "not writable by others" in result.stderr
    assert not (state_dir / "svc-guard.state").exists()


def test_start_never_writes_through_a_planted_symlink(world: World, state_dir: Path) -> None:
    world.store = resolved(ID_A, "reg.example.com/ns1/svc:1.0")
    state_dir.mkdir(mode=0o700)
    victim = state_dir.parent / "victim"
    victim.write_text("keep")
    (state_dir / "svc-guard.tmp").symlink_to(victim)
    assert act(world, "start", state_dir).rc == OCFRC.SUCCESS
    assert victim.read_text() == "keep"
    assert not (state_dir / "svc-guard.state").is_symlink()


def test_attribute_parameter_overrides_the_name(world: World, state_dir: Path) -> None:
    world.store = resolved(ID_A, "reg.example.com/ns1/svc:1.0")
    assert act(world, "start", state_dir, attribute="galera-image").rc == OCFRC.SUCCESS
    assert set(world.attributes) == {"galera-image"}
    assert act(world, "stop", state_dir, attribute="galera-image").rc == OCFRC.SUCCESS
    assert world.attributes == {}


def test_stop_clears_state_and_attribute_and_is_idempotent(world: World, state_dir: Path) -> None:
    world.store = resolved(ID_A, "reg.example.com/ns1/svc:1.0")
    act(world, "start", state_dir)
    assert act(world, "stop", state_dir).rc == OCFRC.SUCCESS
    assert world.attributes == {}
    assert not (state_dir / "svc-guard.state").exists()
    assert act(world, "stop", state_dir).rc == OCFRC.SUCCESS


def test_stop_succeeds_even_when_misconfigured(world: World, state_dir: Path) -> None:
    assert act(world, "stop", state_dir, image="").rc == OCFRC.SUCCESS
    assert act(world, "stop", state_dir, image="Bad:://x").rc == OCFRC.SUCCESS


def test_the_attribute_never_fails_the_guard_even_when_its_adapter_cannot_load(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Setting or clearing the node attribute is informative: when the pacemaker adapter (lxml)
    cannot even be imported, stop and start go on with a warning. A stop that fails makes
    Pacemaker fence the node."""
    monkeypatch.setitem(sys.modules, "pcmkimg.adapters.pacemaker", None)  # import raises

    class Log:
        said: list[str] = []

        def warning(self, text: str) -> None:
            self.said.append(text)

    class Ctx:
        node = "controller-1"
        log = Log()

    for value in (None, "reg.example.com/ns1/svc:1.0@sha256:" + "a" * 64):
        agent._set_attribute(Ctx(), agent.Ports(), "pcmkimg-svc", value)  # type: ignore[arg-type]
    assert len(Log.said) == 2
    assert all(t.startswith("could not update node attribute pcmkimg-svc: ") for t in Log.said)


# --------------------------------------------------------------------------- monitor


@pytest.fixture
def started(world: World, state_dir: Path) -> Iterator[World]:
    world.store = resolved(ID_A, "reg.example.com/ns1/svc:1.0")
    assert act(world, "start", state_dir).rc == OCFRC.SUCCESS
    yield world


def test_monitor_of_a_stopped_guard_is_7_without_touching_the_store(
    world: World, state_dir: Path
) -> None:
    assert act(world, "monitor", state_dir).rc == OCFRC.NOT_RUNNING
    assert act(world, "monitor", state_dir, interval="0").rc == OCFRC.NOT_RUNNING  # probe
    assert act(world, "monitor", state_dir, interval="0", image="").rc == OCFRC.NOT_RUNNING
    assert world.resolves == 0


def test_monitor_running_is_0(started: World, state_dir: Path) -> None:
    assert act(started, "monitor", state_dir).rc == OCFRC.SUCCESS
    assert act(started, "monitor", state_dir, interval="0").rc == OCFRC.SUCCESS


def test_monitor_is_degraded_when_the_name_vanished_and_no_image_is_left(
    started: World, state_dir: Path
) -> None:
    started.store = None  # the name is gone, and so is the image recorded at start
    result = act(started, "monitor", state_dir)
    assert result.rc == OCFRC.DEGRADED
    assert result.reasons == [
        f"{FLOATING} vanished; fix: pcmkimg update --node controller-1 svc --image REF"
    ]
    assert started.tagged == []
    # The attribute keeps the last image known to run here.
    assert started.attributes["pcmkimg-svc"].startswith("reg.example.com/ns1/svc:1.0@")


def test_monitor_heals_a_vanished_name_with_the_recorded_image(
    started: World, state_dir: Path, tmp_path: Path
) -> None:
    """Another tool untagged the name under the running replica: the guard tags it back, so
    that the next start of the replica finds it instead of pulling it."""
    recorded = (state_dir / "svc-guard.state").read_text()
    shown = dict(started.attributes)
    started.store = None
    started.images[ID_A] = image(ID_A, "reg.example.com/ns1/svc:1.0")
    started.running = (ID_B,)  # the recorded image comes first
    log = tmp_path / "agent.log"
    result = act(started, "monitor", state_dir, HA_LOGFILE=str(log))
    assert result.rc == OCFRC.SUCCESS, result.stderr
    assert result.reasons == []
    assert started.tagged == [(ID_A, FLOATING)]
    warnings = [ln for ln in log.read_text().splitlines() if "WARNING" in ln]
    assert len(warnings) == 1
    assert FLOATING in warnings[0] and ID_A[:12] in warnings[0]
    assert "vanished" in warnings[0] and "again" in warnings[0]
    # The state and the attribute still name the image that the name is on again.
    assert (state_dir / "svc-guard.state").read_text() == recorded
    assert started.attributes == shown
    # The next monitor finds the name: nothing more to do.
    assert act(started, "monitor", state_dir).rc == OCFRC.SUCCESS
    assert started.tagged == [(ID_A, FLOATING)]


def test_monitor_heals_with_the_image_the_replica_runs_when_the_recorded_one_is_gone(
    started: World, state_dir: Path
) -> None:
    started.store = None
    started.images[ID_B] = image(ID_B, "reg.example.com/ns2/svc:1.1")
    started.running = (ID_B,)
    result = act(started, "monitor", state_dir)
    assert result.rc == OCFRC.SUCCESS, result.stderr
    assert started.tagged == [(ID_B, FLOATING)]
    # The name is on another image now: the state and the attribute follow it.
    assert agent.parse_state((state_dir / "svc-guard.state").read_bytes()).image_id == ID_B
    assert started.attributes["pcmkimg-svc"] == f"reg.example.com/ns2/svc:1.1@{DIGEST}"


def test_monitor_does_not_guess_between_images_that_replicas_run(
    started: World, state_dir: Path
) -> None:
    started.store = None
    started.images[ID_B] = image(ID_B, "reg.example.com/ns2/svc:1.1")
    started.images[ID_C] = image(ID_C, "reg.example.com/ns2/svc:1.2")
    started.running = (ID_B, ID_C)
    result = act(started, "monitor", state_dir)
    assert result.rc == OCFRC.DEGRADED
    assert "vanished" in result.reasons[0]
    assert started.tagged == []


@pytest.mark.parametrize(
    "refusal",
    [
        StoreError(
            "podman refused the tag: HTTP 500: database is locked",
            "check the podman service log on the node",
            node="controller-1",
            ref=FLOATING,
        ),
        PodmanCommandFailed(
            "'podman tag' exited 125: Error: database is locked",
            "run the same podman command on the node to see the cause",
            node="controller-1",
            ref=FLOATING,
        ),
    ],
)
def test_monitor_whose_heal_is_refused_is_degraded_with_the_reason(
    started: World, state_dir: Path, refusal: Exception
) -> None:
    """Never a failure: a failed monitor would restart the healthy replica."""
    recorded = (state_dir / "svc-guard.state").read_text()
    started.store = None
    started.images[ID_A] = image(ID_A, "reg.example.com/ns1/svc:1.0")
    started.tag_error = refusal
    result = act(started, "monitor", state_dir)
    assert result.rc == OCFRC.DEGRADED
    assert len(result.reasons) == 1 and len(result.reasons[0]) <= agent.REASON_MAX
    assert result.reasons[0].startswith(f"{FLOATING} vanished; re-tag failed: ")
    assert result.reasons[0].endswith("database is locked")
    assert "node controller-1" not in result.reasons[0]  # said once is enough: it is this node
    assert (state_dir / "svc-guard.state").read_text() == recorded


def test_monitor_is_degraded_when_the_store_cannot_be_read_during_a_heal(
    started: World, state_dir: Path
) -> None:
    started.store = None
    started.find_error = unreadable()
    result = act(started, "monitor", state_dir)
    assert result.rc == OCFRC.DEGRADED
    assert result.reasons == ["running; image store unreadable: node controller-1: boom"]
    assert started.tagged == []


def test_monitor_is_degraded_when_the_store_cannot_be_read(started: World, state_dir: Path) -> None:
    started.store = unreadable()
    result = act(started, "monitor", state_dir)
    assert result.rc == OCFRC.DEGRADED
    assert "image store unreadable" in result.reasons[0]


def test_start_fails_generic_when_the_store_cannot_be_read(world: World, state_dir: Path) -> None:
    world.store = unreadable()
    assert act(world, "start", state_dir).rc == OCFRC.ERR_GENERIC


def test_monitor_republishes_when_the_tag_moved(started: World, state_dir: Path) -> None:
    started.store = resolved(ID_B, "reg.example.com/ns2/svc:1.1")
    assert act(started, "monitor", state_dir).rc == OCFRC.SUCCESS
    assert started.attributes["pcmkimg-svc"] == f"reg.example.com/ns2/svc:1.1@{DIGEST}"
    assert ID_B in (state_dir / "svc-guard.state").read_text()


def test_resolve_maps_a_store_error_to_a_short_generic_failure(state_dir: Path) -> None:
    class Broken(Attributes):
        """The podman command fails (the socket is not there: the real ports' fallback)."""

        def resolve_with_cli(self, name: str, node: str) -> Resolved | None:
            raise StoreError("podman said: " + "z" * 300, "look at it", node=node)

    url = f"unix://{state_dir}/no-such.sock"
    result = act(Broken(), "start", state_dir, podman_url=url)
    assert result.rc == OCFRC.ERR_GENERIC
    assert result.reasons[0].startswith("image store unreadable: ")
    assert len(result.reasons[0]) <= agent.REASON_MAX


# --------------------------------------------------------------------------- the script


def test_script_runs_under_the_system_python_and_is_world_executable() -> None:
    mode = SCRIPT.stat().st_mode
    assert mode & stat.S_IXOTH and mode & stat.S_IROTH
    assert SCRIPT.read_text().startswith("#!/usr/bin/python3 -S\n")  # no site at start


def executed(
    script: Path, action: str, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """Run ``script action`` as the executor does: by its shebang (/usr/bin/python3 -S), in an
    environment of ``env`` only (no PYTHONPATH). The process and the modules it imported
    (``-X importtime``, as PYTHONPROFILEIMPORTTIME, which -S does not turn off)."""
    need(Path("/usr/bin/python3").exists(), "needs /usr/bin/python3, the agent's interpreter")
    base = {"PATH": "/usr/bin:/bin", "OCF_ROOT": "/usr/lib/ocf", "PYTHONPROFILEIMPORTTIME": "1"}
    proc = subprocess.run(
        [str(script), action],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**base, **(env or {})},
    )
    names = {
        line.rsplit("|", 1)[1].strip()
        for line in proc.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    return proc, names


def packages_dir(where: Path) -> Path:
    """A directory that holds our packages (links to the checkout's) and nothing else."""
    where.mkdir(parents=True)
    for name in ("ocf", "pcmkimg"):
        (where / name).symlink_to(REPO / name, target_is_directory=True)
    return where


def lone_copy(where: Path, site: Path | None = None) -> Path:
    """The script copied alone into ``where``, outside any checkout; with ``site``, written as
    the RPM's %install writes it (the spec's own sed, its python3_sitelib replaced)."""
    where.mkdir(parents=True)
    copy = where / "floating-image"
    copy.write_bytes(SCRIPT.read_bytes())
    copy.chmod(0o755)
    if site is not None:
        write_site(copy, site)
    return copy


def user_site(base: Path) -> Path:
    """/usr/bin/python3's user site directory under PYTHONUSERBASE ``base``, made."""
    version = subprocess.run(
        ["/usr/bin/python3", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.strip()
    path = base / "lib" / f"python{version}" / "site-packages"
    path.mkdir(parents=True)
    return path


def meta_data_ok(proc: subprocess.CompletedProcess[str]) -> None:
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith('<?xml version="1.0"')
    assert '<resource-agent name="floating-image"' in proc.stdout


def test_meta_data_from_the_checkout_runs_without_site() -> None:
    """From a checkout: the checkout's packages, and Python's site module is never imported."""
    proc, modules = executed(SCRIPT, "meta-data")
    meta_data_ok(proc)
    assert {"ocf", "pcmkimg.agent"} <= modules
    assert "site" not in modules


def test_meta_data_of_the_installed_layout_runs_without_site(tmp_path: Path) -> None:
    """As the RPM installs it: the script alone in the OCF directory, our packages in the
    site-packages directory that %install writes into it."""
    site = packages_dir(tmp_path / "site-packages")
    proc, modules = executed(lone_copy(tmp_path / "resource.d", site), "meta-data")
    meta_data_ok(proc)
    assert {"ocf", "pcmkimg.agent"} <= modules
    assert "site" not in modules


def test_without_a_written_path_the_agent_finds_its_packages_through_site(tmp_path: Path) -> None:
    """Neither a checkout nor a written path (another install): the packages are reachable only
    through the normal site (here a .pth in the user site, which -S leaves out); the script runs
    site.main() and imports them."""
    pkgs = packages_dir(tmp_path / "elsewhere")
    base = tmp_path / "userbase"
    (user_site(base) / "pcmkimg-test.pth").write_text(f"{pkgs}\n")
    copy = lone_copy(tmp_path / "resource.d")
    proc, modules = executed(copy, "meta-data", {"PYTHONUSERBASE": str(base)})
    meta_data_ok(proc)
    assert "site" in modules
    # The control: without the user site nothing else finds them.
    env = {"PYTHONUSERBASE": str(base), "PYTHONNOUSERSITE": "1"}
    proc, _ = executed(copy, "meta-data", env)
    assert proc.returncode != 0 and "ModuleNotFoundError" in proc.stderr


def test_an_action_that_needs_lxml_gets_site_when_it_imports_it(tmp_path: Path) -> None:
    """stop clears the node attribute with the pacemaker adapter, which imports lxml (not one
    of ours): in the installed layout site is set up at that import, and stop succeeds (here
    without crm_attribute, with a warning)."""
    import lxml

    base = tmp_path / "userbase"
    # lxml as this test sees it (the system's or the test environment's), through site only.
    (user_site(base) / "lxml-test.pth").write_text(f"{Path(lxml.__file__).parents[1]}\n")
    site = packages_dir(tmp_path / "site-packages")
    state = tmp_path / "state"
    env = {
        "PATH": str(tmp_path),  # no crm_attribute
        "PYTHONUSERBASE": str(base),
        "OCF_RESOURCE_INSTANCE": "svc-guard",
        "OCF_RESKEY_image": FLOATING,
        "OCF_RESKEY_state_dir": str(state),
        "HA_LOGFILE": "/dev/null",
    }
    proc, modules = executed(lone_copy(tmp_path / "resource.d", site), "stop", env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert {"site", "lxml.etree", "pcmkimg.adapters.pacemaker"} <= modules


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


def http(status: str, body: object = None) -> bytes:
    """An HTTP/1.0 answer of the podman API, with ``body`` as JSON."""
    data = b"" if body is None else json.dumps(body).encode()
    return f"HTTP/1.0 {status}\r\nContent-Type: application/json\r\n\r\n".encode() + data


@dataclass
class StandIn:
    """A stand-in podman API socket: answers every request with ``answer``, keeps them all."""

    path: Path
    answer: bytes = b""
    requests: list[bytes] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"unix://{self.path}"


@pytest.fixture
def stand_in(tmp_path: Path) -> Iterator[StandIn]:
    api = StandIn(tmp_path / "api.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(api.path))
    server.listen()

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:  # closed: the test is over
                return
            with conn:
                api.requests.append(conn.recv(65536))
                conn.sendall(api.answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield api
    server.shutdown(socket.SHUT_RDWR)  # wakes up the accept()
    server.close()
    thread.join(timeout=5)


@pytest.fixture
def api_socket(stand_in: StandIn) -> Path:
    """A stand-in podman API socket that answers every request with the image of FLOATING."""
    image = {
        "Id": ID_A,
        "Digest": DIGEST,
        "RepoTags": [FLOATING, "reg.example.com/ns1/svc:1.0"],
        "Created": "2024-05-01T10:00:00.123456789Z",
    }
    stand_in.answer = http("200 OK", image)
    return stand_in.path


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
    assert "pcmkimg.adapters.apisocket" in loaded  # the store was read
    assert not loaded & {
        "pcmkimg.adapters.podman",
        "pcmkimg.adapters.config",
        "pcmkimg.adapters.pacemaker",
    }
    assert not any(m.split(".")[0] in ("podman", "lxml") for m in loaded)


def test_the_local_store_quotes_and_defaults_as_the_library_does() -> None:
    from urllib.parse import quote

    from pcmkimg.adapters import apisocket, config, localstore

    assert localstore.LOCAL_URL == config.LOCAL_URL == agent.DEFAULT_URL
    for name in (FLOATING, "[::1]:5000/ns/img:1.0", f"reg.example.com/a_b/c-d@{DIGEST}", "é %/?#"):
        assert apisocket.quote(name) == quote(name, safe="/:@")  # the one quoting, every reader


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
    (state_dir / "svc-guard.tmp").mkdir()  # the new state can no longer be written
    result = act(started, "monitor", state_dir)
    assert result.rc == OCFRC.DEGRADED
    assert "could not record the new image" in result.stderr


# --------------------------------------------------------------------------- the heal's store calls


def fake_podman(tmp_path: Path, rc: int = 0, stdout: str = "", stderr: str = "") -> Path:
    """A podman command that writes its environment's LC_ALL and its arguments, one a line,
    to ``podman.args`` beside it, prints ``stdout`` and ``stderr`` and exits ``rc``."""
    (tmp_path / "podman.out").write_text(stdout)
    (tmp_path / "podman.err").write_text(stderr)
    script = tmp_path / "podman"
    script.write_text(
        "#!/bin/sh\n"
        f'printf "%s\\n" "LC_ALL=$LC_ALL" "$@" > "{tmp_path}/podman.args"\n'
        f'cat "{tmp_path}/podman.out"; cat "{tmp_path}/podman.err" >&2\n'
        f"exit {rc}\n"
    )
    script.chmod(0o755)
    return script


def podman_args(tmp_path: Path) -> list[str]:
    return (tmp_path / "podman.args").read_text().splitlines()


def test_tag_local_posts_the_tag_to_the_api_socket(stand_in: StandIn, tmp_path: Path) -> None:
    from pcmkimg.adapters import localstore

    stand_in.answer = http("201 Created")
    never = fake_podman(tmp_path, rc=1)
    localstore.tag_local(ID_A, FLOATING, stand_in.url, node="n1", podman_command=[str(never)])
    assert len(stand_in.requests) == 1
    head = stand_in.requests[0].decode().split("\r\n")
    assert head[0] == (
        f"POST /v4.0.0/libpod/images/{ID_A}/tag?repo=cluster.common.tag/svc&tag=pcmklatest HTTP/1.0"
    )
    assert "Content-Length: 0" in head
    assert not (tmp_path / "podman.args").exists()  # no fallback when the socket answers


def test_tag_local_refused_by_the_api_says_why(stand_in: StandIn) -> None:
    from pcmkimg.adapters import localstore

    stand_in.answer = http(
        "500 Internal Server Error",
        {"cause": "locked", "message": "database is locked", "response": 500},
    )
    with pytest.raises(StoreError) as refused:
        localstore.tag_local(ID_A, FLOATING, stand_in.url, node="n1")
    assert refused.value.detail == "podman refused the tag: HTTP 500: database is locked"
    assert refused.value.node == "n1" and refused.value.ref == FLOATING


def test_tag_local_falls_back_to_the_podman_command(tmp_path: Path) -> None:
    from pcmkimg.adapters import localstore

    down = f"unix://{tmp_path}/no-such.sock"
    podman = fake_podman(tmp_path)
    localstore.tag_local(ID_A, FLOATING, down, node="n1", podman_command=[str(podman)])
    assert podman_args(tmp_path) == ["LC_ALL=C", "tag", ID_A, FLOATING]

    podman = fake_podman(tmp_path, rc=125, stderr=f"Error: {ID_B}: image not known\n")
    with pytest.raises(PodmanCommandFailed) as failed:
        localstore.tag_local(ID_B, FLOATING, down, node="n1", podman_command=[str(podman)])
    assert failed.value.detail == f"'podman tag' exited 125: Error: {ID_B}: image not known"


def test_tag_local_refuses_a_name_without_a_tag(stand_in: StandIn) -> None:
    from pcmkimg.adapters import localstore

    for name in ("cluster.common.tag/svc", "reg:5000/ns/svc", f"reg/ns/svc@{DIGEST}"):
        with pytest.raises(StoreError):
            localstore.tag_local(ID_A, name, stand_in.url, node="n1")
    assert stand_in.requests == []


CONTAINERS = [
    {"Names": ["svc-bundle-podman-1"], "Image": FLOATING, "ImageID": ID_A, "State": "running"},
    {"Names": ["other"], "Image": "reg.example.com/ns1/other:1.0", "ImageID": ID_B},
    {"Names": ["svc-bundle-podman-2"], "Image": FLOATING, "ImageID": f"sha256:{ID_A}"},
]


def test_running_images_of_a_name_over_the_api_socket(stand_in: StandIn) -> None:
    from pcmkimg.adapters import localstore

    stand_in.answer = http("200 OK", CONTAINERS)
    assert localstore.running_images(FLOATING, stand_in.url, node="n1") == (ID_A,)
    assert stand_in.requests[0].startswith(b"GET /v4.0.0/libpod/containers/json HTTP/1.0\r\n")
    stand_in.answer = http("200 OK", [])
    assert localstore.running_images(FLOATING, stand_in.url, node="n1") == ()


def test_running_images_of_a_name_with_the_podman_command(tmp_path: Path) -> None:
    from pcmkimg.adapters import localstore

    down = f"unix://{tmp_path}/no-such.sock"
    podman = fake_podman(tmp_path, stdout=json.dumps(CONTAINERS))
    found = localstore.running_images(FLOATING, down, node="n1", podman_command=[str(podman)])
    assert found == (ID_A,)
    assert podman_args(tmp_path) == ["LC_ALL=C", "ps", "--format", "json"]


@pytest.mark.parametrize(
    "image, node",
    [
        (FLOATING, "controller-1"),
        (f"registry.example.com:8787/{'a' * 60}/{'b' * 60}:pcmklatest", "controller-1"),
        (FLOATING, "n" * 120),
        (f"cluster.common.tag/{'s' * 100}:pcmklatest", "overcloud-controller-0.example.com"),
    ],
)
def test_every_fix_in_an_exit_reason_is_a_command_that_parses(
    world: World, state_dir: Path, image: str, node: str
) -> None:
    """The fix that a reason names runs as it reads: our own CLI parses it (click's own
    parsing of the command line, its callback not run)."""
    import shlex

    import click

    from pcmkimg import cli

    parsed: list[dict[str, object]] = []
    refused = act(world, "start", state_dir, image=image, CRM_meta_on_node=node)
    world.store = resolved()
    assert act(world, "start", state_dir, image=image, CRM_meta_on_node=node).rc == OCFRC.SUCCESS
    world.store = None
    degraded = act(world, "monitor", state_dir, image=image, CRM_meta_on_node=node)
    reasons = refused.reasons + degraded.reasons
    assert len(reasons) == 2
    for reason in reasons:
        command = shlex.split(reason.split("; fix: ", 1)[1])
        assert command[:2] == ["pcmkimg", "update"], reason
        top = click.Context(cli.cli, info_name="pcmkimg")
        name, update, args = cli.cli.resolve_command(top, command[1:])
        assert update is cli.update, reason
        with update.make_context(name, args, parent=top) as parsing:  # UsageError if it fails
            parsed.append(parsing.params)
    assert [p["image"] for p in parsed] == ["REF", "REF"]
    assert all(p["nodes"] in ((node,), ("NODE",)) for p in parsed)


# --------------------------------------------------------------------------- a state not to trust


def write_legacy_state(state_dir: Path, **extra: str) -> Path:
    """A state file as agents before the line format wrote it (JSON), plus ``extra`` keys."""
    state_dir.mkdir(mode=0o700, exist_ok=True)
    recorded = {
        "image": FLOATING,
        "image_id": ID_A,
        "value": f"reg.example.com/ns1/svc:1.0@{DIGEST}",
        "attribute": "pcmkimg-svc",
        **extra,
    }
    path = state_dir / "svc-guard.json"
    path.write_text(json.dumps(recorded))
    path.chmod(0o600)
    return path


def test_a_probe_answers_7_when_the_name_does_not_resolve(started: World, state_dir: Path) -> None:
    """Issue 12.10: a leftover state file must not make a probe say "running" (190) where the
    name is gone: the replica could then start here and pull the name."""
    started.store = None
    started.images[ID_A] = image(ID_A, "reg.example.com/ns1/svc:1.0")  # recorded, still here
    result = act(started, "monitor", state_dir, interval="0")
    assert result.rc == OCFRC.NOT_RUNNING, result.stderr
    assert started.tagged == []  # a probe never gives the name back from its records


def test_a_probe_gives_the_name_back_to_the_image_a_running_replica_runs(
    started: World, state_dir: Path
) -> None:
    """A probe (after a cleanup) while the replica runs here: giving the name back to the image
    the replica runs keeps it running; 7 would make Pacemaker restart it."""
    started.store = None
    started.images[ID_A] = image(ID_A, "reg.example.com/ns1/svc:1.0")
    started.images[ID_B] = image(ID_B, "reg.example.com/ns1/svc:1.1")
    started.running = (ID_B,)
    result = act(started, "monitor", state_dir, interval="0")
    assert result.rc == OCFRC.SUCCESS, result.stderr
    assert started.tagged == [(ID_B, FLOATING)]


@pytest.mark.parametrize("interval", ["30000", "0"])
def test_unknown_keys_in_the_state_are_ignored(
    world: World, state_dir: Path, interval: str
) -> None:
    """A state written by a newer agent (a downgrade) must not stop the guard: 7 from a
    recurring monitor makes Pacemaker restart the replica."""
    world.store = resolved(ID_A, "reg.example.com/ns1/svc:1.0")
    write_legacy_state(state_dir, written_by="pcmkimg 9.9", answer_digest="x")
    assert act(world, "monitor", state_dir, interval=interval).rc == OCFRC.SUCCESS
    # The same in the agent's own format.
    assert act(world, "start", state_dir).rc == OCFRC.SUCCESS
    for path in state_dir.iterdir():
        if path.suffix == ".state":
            path.write_bytes(path.read_bytes().replace(b"\n", b"\nfuture_key=1\n", 1))
    assert act(world, "monitor", state_dir, interval=interval).rc == OCFRC.SUCCESS


def test_a_state_dir_others_can_write_is_trusted_by_no_action(
    world: World, state_dir: Path, tmp_path: Path
) -> None:
    """Refused at start, and no more trusted by probe, monitor or stop: whoever can write
    there could make stop delete any node attribute, or a probe say "running"."""
    world.store = resolved(ID_A, "reg.example.com/ns1/svc:1.0")
    write_legacy_state(state_dir, attribute="victim")
    world.attributes["victim"] = "keep"
    world.attributes["pcmkimg-svc"] = "stale"
    state_dir.chmod(0o777)
    log = tmp_path / "agent.log"
    assert (
        act(world, "monitor", state_dir, interval="0", HA_LOGFILE=str(log)).rc == OCFRC.NOT_RUNNING
    )
    assert "writable by others" in log.read_text()
    assert act(world, "monitor", state_dir).rc == OCFRC.NOT_RUNNING
    assert act(world, "stop", state_dir).rc == OCFRC.SUCCESS
    assert world.attributes == {"victim": "keep"}  # the guard's own attribute only


def test_a_symlinked_state_file_is_not_trusted(
    world: World, state_dir: Path, tmp_path: Path
) -> None:
    world.store = resolved(ID_A, "reg.example.com/ns1/svc:1.0")
    elsewhere = write_legacy_state(tmp_path / "elsewhere")
    state_dir.mkdir(mode=0o700)
    (state_dir / "svc-guard.json").symlink_to(elsewhere)
    assert act(world, "monitor", state_dir, interval="0").rc == OCFRC.NOT_RUNNING
    assert act(world, "monitor", state_dir).rc == OCFRC.NOT_RUNNING


def test_a_state_file_of_another_owner_or_writable_by_others_is_not_trusted(
    world: World, state_dir: Path
) -> None:
    import os

    world.store = resolved(ID_A, "reg.example.com/ns1/svc:1.0")
    path = write_legacy_state(state_dir)
    path.chmod(0o666)
    assert act(world, "monitor", state_dir, interval="0").rc == OCFRC.NOT_RUNNING
    path.chmod(0o600)
    assert act(world, "monitor", state_dir, interval="0").rc == OCFRC.SUCCESS
    if os.geteuid() == 0:
        os.chown(path, 65534, 65534)
        assert act(world, "monitor", state_dir, interval="0").rc == OCFRC.NOT_RUNNING


# --------------------------------------------------------------------------- the monitor's cost

#: What the monitor that finds the name as recorded may import beyond an empty interpreter
#: (issue 14: about 98 modules before, dataclasses pulling in inspect, ast and dis).
MONITOR_MODULES = {
    "__future__",
    "ocf",
    "ocf._light",
    "ocf.agent",
    "ocf.dispatch",
    "ocf.env",
    "ocf.log",
    "ocf.rc",
    "pcmkimg",
    "pcmkimg.agent",
    "pcmkimg.adapters",
    "pcmkimg.adapters.apisocket",
    "_socket",
}
NEVER_ON_MONITOR = {"dataclasses", "inspect", "enum", "re", "json", "socket", "typing", "lxml"}


def imported(*argv: str, env: dict[str, str] | None = None) -> tuple[int, set[str]]:
    """Run ``argv`` under the system python with ``-X importtime``: its exit code and the
    modules it imported (every import, nested ones too; deterministic, unlike a timing)."""
    python = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
    proc = subprocess.run(
        [python, "-X", "importtime", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )
    names = {
        line.rsplit("|", 1)[1].strip()
        for line in proc.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    return proc.returncode, names - {"module"}  # the header line names its column "module"


def test_monitor_that_finds_the_name_stays_within_its_module_budget(
    api_socket: Path, state_dir: Path
) -> None:
    """The monitor runs every 30 s on every node: the standard library's cheapest modules
    only, no dataclasses, enum, re or json (what it compares is in the state, as recorded)."""
    url = f"unix://{api_socket}"
    assert act(Attributes(), "start", state_dir, podman_url=url).rc == OCFRC.SUCCESS
    env = {
        "PATH": "/usr/bin:/bin",
        "OCF_ROOT": "/usr/lib/ocf",
        "OCF_RESOURCE_INSTANCE": "svc-guard",
        "OCF_RESKEY_image": FLOATING,
        "OCF_RESKEY_podman_url": url,
        "OCF_RESKEY_state_dir": str(state_dir),
        "OCF_RESKEY_CRM_meta_interval": "30000",
        "HA_LOGFILE": "/dev/null",
    }
    rc, monitor = imported(str(SCRIPT), "monitor", env=env)
    assert rc == OCFRC.SUCCESS
    _, empty = imported("-c", "pass", env=env)
    extra = monitor - empty
    assert not extra & NEVER_ON_MONITOR, sorted(extra & NEVER_ON_MONITOR)
    assert not any(m.split(".")[0] in ("podman", "lxml") for m in extra)
    assert extra <= MONITOR_MODULES, sorted(extra - MONITOR_MODULES)
    # Started by its shebang, as the executor starts it: not even the site module.
    proc, direct = executed(SCRIPT, "monitor", env)
    assert proc.returncode == OCFRC.SUCCESS, proc.stderr[-3000:]
    assert "site" not in direct and "apisocket" in " ".join(direct)


def test_the_state_format_round_trips_and_keeps_the_answer_exactly() -> None:
    state = agent.Published(FLOATING, ID_A, "odd\\value\nwith\rbreaks", "pcmkimg-svc", b"\n\n{x}")
    back = agent.parse_state(agent.dump_state(state))
    assert back is not None
    assert (back.image, back.image_id, back.value, back.attribute, back.answer) == (
        FLOATING,
        ID_A,
        "odd\\value\nwith\rbreaks",
        "pcmkimg-svc",
        b"\n\n{x}",
    )
    cut = agent.dump_state(state)[:-1]  # a truncated answer is no answer: parsed again
    again = agent.parse_state(cut)
    assert again is not None and again.answer is None and again.image_id == ID_A
    assert agent.parse_state(b"pcmkimg-guard-state 2\nimage=x\n\n") is None  # keys missing
    assert agent.parse_state(b"something else\n\n") is None
    assert agent.parse_state(b"{not json") is None


def served_state(stand_in: StandIn, state_dir: Path, ports: Attributes) -> str:
    """A guard started against the stand-in socket; its podman_url."""
    url = stand_in.url
    assert act(ports, "start", state_dir, podman_url=url).rc == OCFRC.SUCCESS
    return url


def inspect_answer(image_id: str, *tags: str) -> bytes:
    return http(
        "200 OK",
        {"Id": image_id, "Digest": DIGEST, "RepoTags": [FLOATING, *tags], "Created": None},
    )


def test_a_changed_answer_for_the_same_image_is_recorded_without_a_republish(
    stand_in: StandIn, state_dir: Path
) -> None:
    stand_in.answer = inspect_answer(ID_A, "reg.example.com/ns1/svc:1.0")
    ports = Attributes()
    url = served_state(stand_in, state_dir, ports)
    published: list[object] = []

    class Recorded(Attributes):
        def set_attribute(self, node: str, name: str, value: str | None) -> None:
            published.append(value)

    ports = Recorded()
    # Another name on the same image (the rollback name, say): same image, same attribute.
    stand_in.answer = inspect_answer(
        ID_A, "reg.example.com/ns1/svc:1.0", "cluster.common.tag/svc:pcmkprevious"
    )
    assert act(ports, "monitor", state_dir, podman_url=url).rc == OCFRC.SUCCESS
    assert published == []
    state = agent.parse_state((state_dir / "svc-guard.state").read_bytes())
    assert state is not None and state.answer == stand_in.answer.partition(b"\r\n\r\n")[2]
    # The name moved to another image: published again.
    stand_in.answer = inspect_answer(ID_B, "reg.example.com/ns1/svc:1.1")
    assert act(ports, "monitor", state_dir, podman_url=url).rc == OCFRC.SUCCESS
    assert published == [f"reg.example.com/ns1/svc:1.1@{DIGEST}"]
    state = agent.parse_state((state_dir / "svc-guard.state").read_bytes())
    assert state is not None and state.image_id == ID_B


def test_an_unexpected_api_answer_is_a_short_generic_failure(
    stand_in: StandIn, state_dir: Path
) -> None:
    stand_in.answer = http("500 Internal Server Error", {"message": "x" * 300})
    result = act(Attributes(), "start", state_dir, podman_url=stand_in.url)
    assert result.rc == OCFRC.ERR_GENERIC
    assert result.reasons == ["image store unreadable: HTTP/1.0 500 Internal Server Error"]


def test_the_api_request_has_one_deadline_and_a_size_limit(tmp_path: Path) -> None:
    """A socket that trickles bytes, or never stops, cannot hold the monitor."""
    import time

    from pcmkimg.adapters import apisocket

    path = tmp_path / "slow.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen()
    stop = threading.Event()

    def trickle() -> None:
        conn, _ = server.accept()
        with conn:
            conn.recv(65536)
            while not stop.is_set():
                try:
                    conn.sendall(b"x" * 4096)
                except OSError:
                    return
                time.sleep(0.05)

    for limit in (1 << 30, 8192):  # too slow, then too large
        thread = threading.Thread(target=trickle, daemon=True)
        thread.start()
        start = time.monotonic()
        with pytest.raises(apisocket.NoAnswer) as failed:
            apisocket.request(str(path), "GET", "/_ping", timeout=0.5, limit=limit)
        assert time.monotonic() - start < 2
        assert ("within" if limit > 8192 else "exceeds") in str(failed.value)
        stop.set()
        thread.join(timeout=5)
        stop.clear()
    server.close()
    with pytest.raises(apisocket.NoAnswer):
        apisocket.request(str(tmp_path / "none.sock"), "GET", "/_ping")
