"""``status`` and ``check`` on a saved CIB (``--cib-file F`` or ``CIB_file=F``), against a real
podman store; every command that changes something refuses the offline mode, and a
``CIB_shadow`` is refused by every command (issue 14, issue 12 item 9)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import fixtures
from tests.sandbox.require import need_tools

FLOATING = "cluster.common.tag/mariadb:pcmklatest"
REAL = "reg.example:5000/ns/mariadb:17.1"
ROOT = Path(__file__).resolve().parents[2]


def _podman(store: Path, *args: str) -> str:
    base = ["podman", "--storage-driver", "vfs", "--root", f"{store}/storage"]
    base += ["--runroot", f"{store}/run"]
    proc = subprocess.run(
        [*base, "--tmpdir", f"{store}/tmp", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env=_clean_env(),
    )
    return proc.stdout.strip()


def _clean_env() -> dict[str, str]:
    drop = ("CIB_", "CONTAINER_HOST", "PCMKIMG_")
    return {k: v for k, v in os.environ.items() if not k.startswith(drop)}


@pytest.fixture(scope="module")
def node_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """controller-0's store: a podman API service on a private store holding the floating
    name and a real name of one image. Yields (socket URL, image id)."""
    need_tools("podman", "crm_mon", "cibadmin")
    store = tmp_path_factory.mktemp("store")
    rootfs = store / "rootfs" / "bin"
    rootfs.mkdir(parents=True)
    shutil.copy("/bin/busybox", rootfs / "busybox")
    subprocess.run(
        ["tar", "-C", str(store / "rootfs"), "-cf", str(store / "r.tar"), "."], check=True
    )
    image_id = _podman(store, "import", "-q", str(store / "r.tar"), REAL)
    _podman(store, "tag", REAL, FLOATING)
    sock = store / "podman.sock"
    base = ["podman", "--storage-driver", "vfs", "--root", f"{store}/storage"]
    base += ["--runroot", f"{store}/run"]
    service = subprocess.Popen(
        [*base, "--tmpdir", f"{store}/tmp", "system", "service", "--time=0", f"unix://{sock}"],
        env=_clean_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while not sock.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sock.exists(), "the podman API service did not start"
        yield f"unix://{sock}", image_id.removeprefix("sha256:")
    finally:
        service.terminate()
        service.wait(timeout=20)


@pytest.fixture
def setup(tmp_path: Path, node_store: tuple[str, str]) -> tuple[Path, Path, str]:
    url, image_id = node_store
    conf = tmp_path / "pcmkimg.conf"
    conf.write_text(
        "[nodes]\n"
        f"controller-0 = {url}\n"
        f"controller-1 = unix://{tmp_path}/absent-1.sock\n"
        f"controller-2 = unix://{tmp_path}/absent-2.sock\n"
    )
    saved = tmp_path / "cib.xml"
    saved.write_bytes(fixtures.path("status-ok.xml").read_bytes())
    return conf, saved, image_id


def pcmkimg(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    full = {**_clean_env(), "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "pcmkimg", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=full,
        cwd=ROOT,
    )


def _rows(doc: dict, service: str) -> dict[str, dict]:  # type: ignore[type-arg]
    found = next(s for s in doc["services"] if s["service"] == service)
    return {n["node"]: n for n in found["nodes"]}


def test_status_reads_a_saved_cib_given_either_way(setup: tuple[Path, Path, str]) -> None:
    conf, saved, image_id = setup
    by_option = pcmkimg("--conf", str(conf), "--json", "status", "--cib-file", str(saved))
    by_env = pcmkimg("--conf", str(conf), "--json", "status", env={"CIB_file": str(saved)})
    for proc in (by_option, by_env):
        assert proc.returncode == 0, proc.stderr
    doc = json.loads(by_option.stdout)
    assert doc == json.loads(by_env.stdout)
    assert doc["cluster"] == {"quorum": True, "dc": "controller-0"}
    rows = _rows(doc, "mariadb")
    assert sorted(rows) == ["controller-0", "controller-1", "controller-2"]  # hosts only
    assert rows["controller-0"]["floating"]["image_id"] == image_id
    assert rows["controller-0"]["floating"]["names"] == [REAL]
    assert rows["controller-0"]["role"] == "Promoted"
    assert (
        not rows["controller-1"]["reachable"] and "absent-1.sock" in rows["controller-1"]["error"]
    )


def test_check_reads_a_saved_cib(setup: tuple[Path, Path, str]) -> None:
    conf, saved, _ = setup
    proc = pcmkimg("--conf", str(conf), "--json", "check", "--cib-file", str(saved))
    assert proc.returncode == 3, proc.stderr
    problems = json.loads(proc.stdout)["report"]["problems"]
    kinds = {p["kind"] for p in problems}
    assert "no-guard" in kinds and kinds & {"unreachable", "podman-socket"}  # controller-1, -2
    # the one reachable store has mariadb's floating name: no such problem names it there
    assert not [p for p in problems if p["kind"] == "unresolved" and "mariadb" in p["message"]]


@pytest.mark.parametrize(
    "argv",
    [
        ["update", "mariadb", "--image", REAL, "--all"],
        ["rollback", "mariadb", "--node", "controller-0"],
        ["guard", "add", "galera-bundle"],
        ["guard", "remove", "galera-bundle"],
        ["migrate", "galera-bundle"],
        ["prune", "mariadb", "--all"],
    ],
)
def test_commands_that_change_anything_refuse_the_offline_mode(
    setup: tuple[Path, Path, str], argv: list[str]
) -> None:
    conf, saved, _ = setup
    before = saved.read_bytes()
    for proc in (
        pcmkimg("--conf", str(conf), "--cib-file", str(saved), *argv),
        pcmkimg("--conf", str(conf), *argv, env={"CIB_file": str(saved)}),
    ):
        assert proc.returncode == 2, (argv, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "only status and check work on a saved CIB" in lines[0]
    assert saved.read_bytes() == before


def test_a_shadow_cib_is_refused_naming_it(setup: tuple[Path, Path, str]) -> None:
    conf, _, _ = setup
    for argv in (["status"], ["update", "mariadb", "--image", REAL, "--all"]):
        proc = pcmkimg("--conf", str(conf), *argv, env={"CIB_shadow": "experiment"})
        assert proc.returncode == 2, proc.stderr
        line = proc.stderr.strip()
        assert "\n" not in line and "CIB_shadow is set" in line and "unset CIB_shadow" in line
