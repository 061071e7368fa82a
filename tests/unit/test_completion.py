"""Shell completion: click's bash script, driven in a real bash, and the CIB-reading callbacks.

bash runs the script that ``_PCMKIMG_COMPLETE=bash_source pcmkimg`` prints (what the RPM ships
as /usr/share/bash-completion/completions/pcmkimg) with COMP_WORDS/COMP_CWORD set, as bash
does on TAB. ``pcmkimg`` on its PATH is this checkout; ``cibadmin`` is a stand-in first on the
PATH: one that fails as with no cluster, one that hangs, one that prints a fixture CIB.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pcmkimg import completion
from pcmkimg.core import cib, naming
from tests import fixtures

REPO = Path(__file__).resolve().parents[2]
BASH = shutil.which("bash") or "/bin/bash"

# A bundle on a real image name: a BUNDLE (migrate takes it), not a SERVICE.
LEGACY = (
    '<bundle id="nova-bundle"><podman image="192.0.2.1:8787/rhosp/nova:17.1" replicas="1"/>'
    "</bundle>"
)


def fixture_cib(name: str = "base.xml") -> str:
    text = fixtures.text(name)
    return text.replace("</resources>", LEGACY + "</resources>", 1)


# --------------------------------------------------------------------------- the pure part


def test_services_are_the_floating_bundles_services():
    config = cib.parse_cib(fixture_cib())
    got = completion.services(config, naming.DEFAULT_SCHEME)
    assert got == ["cinder-volume", "haproxy", "mariadb", "rabbitmq", "redis"]


def test_bundles_include_those_not_yet_migrated():
    config = cib.parse_cib(fixture_cib())
    got = completion.bundle_ids(config, naming.DEFAULT_SCHEME)
    assert "nova-bundle" in got and "galera-bundle" in got
    assert got == sorted(got)


def test_nodes_are_members_only():
    config = cib.parse_cib(fixture_cib("remote-nodes.xml"))
    assert {n.kind for n in cib.nodes(config)} > {"member"}, "the fixture should have remotes"
    got = completion.member_nodes(config, naming.DEFAULT_SCHEME)
    assert got == ["controller-0", "controller-1", "controller-2"]


def test_candidates_filter_on_what_is_typed():
    config = cib.parse_cib(fixture_cib())
    got = completion.candidates(config, naming.DEFAULT_SCHEME, completion.services, "r")
    assert got == ["rabbitmq", "redis"]


# --------------------------------------------------------------------------- in bash


@pytest.fixture(scope="module")
def script(tmp_path_factory) -> str:
    """The completion script, as the RPM generates it."""
    proc = subprocess.run(
        [sys.executable, "-m", "pcmkimg"],
        env={**os.environ, "_PCMKIMG_COMPLETE": "bash_source", "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "complete -o nosort -F _pcmkimg_completion pcmkimg" in proc.stdout
    path = tmp_path_factory.mktemp("completion") / "pcmkimg"
    path.write_text(proc.stdout)
    return str(path)


def fake_bin(tmp_path: Path, cibadmin: str) -> Path:
    """A bin/ with ``pcmkimg`` (this checkout) and a stand-in ``cibadmin`` (a sh body)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    pcmkimg = bin_dir / "pcmkimg"
    pcmkimg.write_text(
        f'#!/bin/sh\nPYTHONPATH={REPO} exec {sys.executable} -m pcmkimg "$@"\n', encoding="utf-8"
    )
    tool = bin_dir / "cibadmin"
    tool.write_text(f"#!/bin/sh\n{cibadmin}\n", encoding="utf-8")
    for f in (pcmkimg, tool):
        f.chmod(0o755)
    return bin_dir


def complete(script: str, bin_dir: Path, *words: str) -> tuple[list[str], str, float]:
    """What bash offers for the last of ``words`` (COMPREPLY), stderr, and the seconds taken."""
    code = (
        f"source {script}\n"
        'COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))\n'
        "_pcmkimg_completion pcmkimg\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    env = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "HOME": str(bin_dir),
        "LC_ALL": "C.UTF-8",
        "PCMKIMG_CONF": str(bin_dir / "absent.conf"),
    }
    start = time.monotonic()
    proc = subprocess.run(
        [BASH, "--norc", "-c", code, "bash", "pcmkimg", *words],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return [w for w in proc.stdout.splitlines() if w], proc.stderr, time.monotonic() - start


def test_commands_and_options_complete(script, tmp_path):
    bin_dir = fake_bin(tmp_path, "exit 102")
    assert complete(script, bin_dir, "up")[0] == ["update"]
    assert complete(script, bin_dir, "guard", "")[0] == ["add", "remove", "show"]
    assert complete(script, bin_dir, "update", "--no")[0] == ["--node", "--no-restart"]


@pytest.mark.parametrize(
    "words",
    [("update", ""), ("update", "galera", "--node", ""), ("guard", "add", ""), ("status", "")],
)
def test_no_cluster_offers_nothing_fast_and_silently(script, tmp_path, words):
    # What cibadmin does with no cluster: "Could not connect to the CIB", exit 102.
    bin_dir = fake_bin(tmp_path, "echo 'Could not connect to the CIB' >&2; exit 102")
    offered, stderr, seconds = complete(script, bin_dir, *words)
    assert (offered, stderr) == ([], "")
    assert seconds < 5, f"took {seconds:.1f}s"


def test_a_hanging_cib_is_given_up_on(script, tmp_path):
    bin_dir = fake_bin(tmp_path, "exec sleep 30")
    offered, stderr, seconds = complete(script, bin_dir, "update", "")
    assert (offered, stderr) == ([], "")
    assert seconds < completion.TIMEOUT + 5, f"took {seconds:.1f}s"


def test_the_cluster_names_are_offered(script, tmp_path):
    cib_file = tmp_path / "cib.xml"
    cib_file.write_text(fixture_cib())
    bin_dir = fake_bin(tmp_path, f"cat {cib_file}")
    assert complete(script, bin_dir, "update", "r")[0] == ["rabbitmq", "redis"]
    assert complete(script, bin_dir, "rollback", "redis", "--node", "controller-")[0] == [
        "controller-0",
        "controller-1",
        "controller-2",
    ]
    assert complete(script, bin_dir, "migrate", "nova")[0] == ["nova-bundle"]
    assert "mariadb" in complete(script, bin_dir, "status", "redis", "")[0]


def test_click_7_gets_its_own_keyword() -> None:
    """RHEL 9's python3-click is 7.1: no shell_complete=, autocompletion=(ctx, args, incomplete)
    called by keyword. (The CLI must still import there; the spec generates click 7's script.)"""
    seen = []

    def callback(ctx, param, incomplete):  # type: ignore[no-untyped-def]
        seen.append((ctx, param, incomplete))
        return ["redis"]

    (kwargs,) = [completion.completes(callback, click_8=False)]
    assert list(kwargs) == ["autocompletion"]
    assert kwargs["autocompletion"](ctx="CTX", args=["update"], incomplete="r") == ["redis"]
    assert seen == [("CTX", None, "r")]
    assert completion.completes(callback, click_8=True) == {"shell_complete": callback}
