"""The RPM: built offline by packaging/build-rpm.sh, checked with rpm and run from its payload.

The package is built once per module from the working tree (``--worktree``; in a clean CI
clone that is HEAD). Its payload is unpacked with rpm2cpio | cpio, and the agent is run from
there under /usr/bin/python3, with only PYTHONPATH pointing at the unpacked site-packages,
as it would run from /usr/lib/ocf/resource.d/pcmkimg/ on a node.
"""

from __future__ import annotations

import os
import re
import subprocess
import sysconfig
from pathlib import Path

import pytest
from lxml import etree

from tests.sandbox.require import need, need_tools

REPO = Path(__file__).resolve().parents[2]
AGENT = "/usr/lib/ocf/resource.d/pcmkimg/floating-image"
CLI = "/usr/bin/pcmkimg"
STATE_DIR = "/var/lib/pcmkimg"
CONF = "/etc/pcmkimg/pcmkimg.conf"
PYTHON = "/usr/bin/python3"


def xml_parser() -> etree.XMLParser:
    """No entities, no network, no DTD: the agent's output is parsed as untrusted."""
    return etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False)


def run(argv: list[str], **kw) -> subprocess.CompletedProcess[str]:
    kw.setdefault("timeout", 60)
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, **kw)
    assert proc.returncode == 0, f"{argv} failed ({proc.returncode}):\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def rpm_file(tmp_path_factory) -> str:
    need_tools("git", "rpmbuild", "rpm2cpio", "cpio")
    out = tmp_path_factory.mktemp("rpm")
    proc = run(
        ["sh", str(REPO / "packaging" / "build-rpm.sh"), "--worktree", "--outdir", str(out)],
        cwd=REPO,
        timeout=120,
    )
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1, f"build-rpm.sh should print only the .rpm path, got {lines!r}"
    path = Path(lines[0])
    assert path.parent == out and path.is_file()
    assert re.fullmatch(r"pcmkimg-[0-9][^-]*-[^-]+\.noarch\.rpm", path.name)
    return str(path)


def query(rpm: str, *args: str) -> list[str]:
    return run(["rpm", "-qp", *args, rpm]).stdout.splitlines()


@pytest.fixture(scope="module")
def files(rpm_file) -> dict[str, tuple[str, str, str, str]]:
    """Packaged path -> (permissions, owner, group, file flags)."""
    fmt = (
        "[%{FILEMODES:perms} %{FILEUSERNAME} %{FILEGROUPNAME} %{FILEFLAGS:fflags}, %{FILENAMES}\n]"
    )
    found = {}
    for line in query(rpm_file, "--qf", fmt):
        head, _, name = line.partition(", ")
        perms, user, group, *flags = head.split(" ")
        found[name] = (perms, user, group, "".join(flags))
    return found


@pytest.fixture(scope="module")
def sitelib(files) -> str:
    """The packaged site-packages directory, e.g. /usr/lib/python3.11/site-packages."""
    inits = [p for p in files if p.endswith("/pcmkimg/__init__.py")]
    assert len(inits) == 1, inits
    return str(Path(inits[0]).parent.parent)


@pytest.fixture(scope="module")
def payload(rpm_file, tmp_path_factory) -> Path:
    """The RPM's payload unpacked into a directory (the RPM's / is this directory)."""
    root = tmp_path_factory.mktemp("payload")
    with subprocess.Popen(["rpm2cpio", rpm_file], stdout=subprocess.PIPE) as rpm2cpio:
        cpio = subprocess.run(
            ["cpio", "-idm", "--no-absolute-filenames", "--quiet"],
            stdin=rpm2cpio.stdout,
            cwd=root,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        rpm2cpio.stdout.close()
    assert rpm2cpio.returncode == 0, "rpm2cpio failed"
    assert cpio.returncode == 0, cpio.stderr
    return root


def python_env(payload: Path, sitelib: str) -> dict[str, str]:
    """/usr/bin/python3 with the unpacked site-packages first on its path.

    The test environment's site-packages comes second: it stands in for the RPM's Requires
    (Debian has no python3-podman). Its own copy of pcmkimg, if any, is shadowed.
    """
    need(os.access(PYTHON, os.X_OK), f"needs {PYTHON}")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYTHON", "OCF_")) and k != "VIRTUAL_ENV"
    }
    path = [str(payload / sitelib.lstrip("/")), sysconfig.get_paths()["purelib"]]
    env.update(PYTHONPATH=os.pathsep.join(path), PYTHONDONTWRITEBYTECODE="1", LC_ALL="C.UTF-8")
    return env


def need_requires(env: dict[str, str], *modules: str) -> None:
    """Skip (fail under CI) unless /usr/bin/python3 imports the RPM's Python Requires."""
    proc = subprocess.run(
        [PYTHON, "-c", f"import {', '.join(modules)}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    need(
        proc.returncode == 0,
        f"{PYTHON} cannot import {', '.join(modules)} from the test environment "
        f"(is it the same Python version?): {proc.stderr.strip()[-300:]}",
    )


def test_agent_is_installed_executable(files):
    assert files[AGENT][:3] == ("-rwxr-xr-x", "root", "root")
    assert files[str(Path(AGENT).parent)][0].startswith("d")


def test_state_dir_is_root_only(files):
    assert files[STATE_DIR][:3] == ("drwx------", "root", "root")


def test_config_is_noreplace(rpm_file, files):
    assert CONF in query(rpm_file, "--configfiles")
    perms, user, group, flags = files[CONF]
    assert (perms, user, group) == ("-rw-r--r--", "root", "root")
    assert "c" in flags and "n" in flags, f"{CONF} should be %config(noreplace), flags {flags!r}"


def test_cli_wrapper(files, payload):
    assert files[CLI][:3] == ("-rwxr-xr-x", "root", "root")
    text = (payload / CLI.lstrip("/")).read_text()
    assert text.startswith(f"#!{PYTHON}\n")
    assert "from pcmkimg.cli import main" in text


def test_python_packages(files, sitelib):
    assert re.fullmatch(r"/usr/lib/python3\.\d+/site-packages", sitelib), sitelib
    for module in ("pcmkimg/__init__.py", "pcmkimg/agent.py", "ocf/__init__.py", "ocf/dispatch.py"):
        assert f"{sitelib}/{module}" in files
    metadata = rf"{re.escape(sitelib)}/pcmkimg-[^/]+\.dist-info/METADATA"
    assert [p for p in files if re.fullmatch(metadata, p)]
    # Only the two packages and their metadata: no tests, no build leftovers.
    top = {p[len(sitelib) + 1 :].split("/")[0] for p in files if p.startswith(f"{sitelib}/")}
    assert {t for t in top if not t.endswith(".dist-info")} == {"pcmkimg", "ocf"}
    assert not [p for p in files if p.endswith((".egg-info", ".orig", ".rej"))]


def test_modules_are_precompiled_with_checked_hashes(files, sitelib, payload):
    sources = [p for p in files if p.startswith(f"{sitelib}/") and p.endswith(".py")]
    assert sources
    for src in sources:
        folder, name = src.rsplit("/", 1)
        pycs = [p for p in files if p.startswith(f"{folder}/__pycache__/{name[:-3]}.cpython-")]
        assert pycs, f"no .pyc for {src}"
        for pyc in pycs:
            flags = int.from_bytes((payload / pyc.lstrip("/")).read_bytes()[4:8], "little")
            assert flags == 0b11, f"{pyc}: not a checked-hash .pyc (flags {flags:#b})"


def test_requires(rpm_file):
    requires = {line.split()[0] for line in query(rpm_file, "--requires")}
    wanted = {"python3-lxml", "python3-click", "python3-podman", "pacemaker", "podman", "skopeo"}
    assert wanted <= requires, wanted - requires
    # The supported versions (README): Pacemaker 2.1 and 3.0, podman 4 and 5, Python 3.9+.
    bounds = {"pacemaker >= 2.1", "podman >= 4.0", "python3 >= 3.9"}
    assert bounds <= set(query(rpm_file, "--requires")), query(rpm_file, "--requires")


def test_package_metadata(rpm_file):
    (line,) = query(rpm_file, "--qf", "%{NAME} %{ARCH} %{LICENSE}\n")
    assert line == "pcmkimg noarch GPL-2.0-or-later"


def test_imports_come_from_the_payload(payload, sitelib):
    env = python_env(payload, sitelib)
    need_requires(env, "click", "lxml", "podman")
    code = (
        "import importlib.metadata as md, ocf, pcmkimg, pcmkimg.agent, pcmkimg.cli\n"
        "print(pcmkimg.__file__, ocf.__file__, pcmkimg.agent.__file__, pcmkimg.cli.__file__,"
        " md.version('pcmkimg'))"
    )
    proc = run([PYTHON, "-c", code], env=env, cwd=payload)
    *paths, version = proc.stdout.split()
    for path in paths:
        assert Path(path).is_relative_to(payload / sitelib.lstrip("/")), path
    assert re.fullmatch(r"\d+\.\d+\.\d+\S*", version), version


def test_agent_meta_data_runs_from_the_payload(payload, sitelib):
    agent = payload / AGENT.lstrip("/")
    assert os.access(agent, os.X_OK)
    # -S (no site module at start) and the packaged site-packages written in by %install.
    text = agent.read_text()
    assert text.startswith("#!/usr/bin/python3 -S\n")
    assert f'\n_SITE = "{sitelib}"\n' in text and "_SITE = None" not in text
    env = python_env(payload, sitelib)
    need_requires(env, "lxml")
    proc = run([PYTHON, str(agent), "meta-data"], env=env, cwd=payload)
    assert '<resource-agent name="floating-image"' in proc.stdout
    root = etree.fromstring(proc.stdout.encode(), xml_parser())  # noqa: S320 - hardened
    assert root.tag == "resource-agent" and root.get("name") == "floating-image"
    actions = {a.get("name") for a in root.iterfind("actions/action")}
    assert {"start", "stop", "monitor", "meta-data"} <= actions, actions


def test_cli_runs_from_the_payload(files, payload, sitelib):
    assert f"{sitelib}/pcmkimg/cli.py" in files
    wrapper = payload / CLI.lstrip("/")
    assert os.access(wrapper, os.X_OK)
    env = python_env(payload, sitelib)
    need_requires(env, "click", "lxml", "podman")
    proc = run([PYTHON, str(wrapper), "--help"], env=env, cwd=payload)
    assert proc.stdout.startswith("Usage: pcmkimg ")
    for command in ("check", "update", "rollback", "status"):
        assert re.search(rf"^  {command}\b", proc.stdout, re.MULTILINE), proc.stdout
    proc = run([PYTHON, str(wrapper), "--version"], env=env, cwd=payload)
    assert re.fullmatch(r"pcmkimg, version \d+\.\d+\.\d+\S*\n", proc.stdout), proc.stdout


# --------------------------------------------------------------------------- issue 13

MAN8 = "/usr/share/man/man8"
COMPLETION = "/usr/share/bash-completion/completions/pcmkimg"


def test_versions_agree(rpm_file, payload, sitelib):
    """One version: pcmkimg/__init__.py, read by setup.cfg and passed to rpmbuild."""
    import configparser

    from pcmkimg import __version__

    setup = configparser.ConfigParser()
    setup.read(REPO / "setup.cfg")
    assert setup["metadata"]["version"] == "attr: pcmkimg.__version__"
    (line,) = query(rpm_file, "--qf", "%{VERSION}\n")
    assert line == __version__
    env = python_env(payload, sitelib)
    need_requires(env, "click", "lxml", "podman")
    proc = run([PYTHON, str(payload / CLI.lstrip("/")), "--version"], env=env, cwd=payload)
    assert proc.stdout == f"pcmkimg, version {__version__}\n"


def test_man_pages_completion_and_licence_are_packaged(files, payload):
    pages = {Path(p).name for p in files if p.startswith(f"{MAN8}/")}
    for page in (
        "pcmkimg.8",
        "pcmkimg-update.8",
        "pcmkimg-rollback.8",
        "pcmkimg-guard-add.8",
        "pcmkimg-outdated.8",
        "pcmkimg-metrics.8",
    ):
        assert any(p.startswith(page) for p in pages), (page, pages)
    assert [p for p in files if p.startswith("/usr/share/man/man7/ocf_pcmkimg_floating-image.7")]
    assert files[COMPLETION][:3] == ("-rw-r--r--", "root", "root")
    script = (payload / COMPLETION.lstrip("/")).read_text()
    assert "complete -o nosort -F _pcmkimg_completion pcmkimg" in script
    licences = [p for p, f in files.items() if "l" in f[3]]
    assert [p for p in licences if p.endswith("/LICENSE")], licences
    text = (payload / [p for p in licences if p.endswith("/LICENSE")][0].lstrip("/")).read_text()
    assert "GNU GENERAL PUBLIC LICENSE" in text and "Version 2, June 1991" in text


def test_post_enables_podman_socket_only_on_first_install_with_systemd(rpm_file, tmp_path):
    """The %post scriptlet as rpm runs it ($1: 1 on install, 2 on upgrade), with a stand-in
    systemctl, and its "is systemd running" check pointed at a directory of the test's."""
    script = "\n".join(query(rpm_file, "--qf", "%{POSTIN}"))
    assert script.count("/run/systemd/system") == 1, script
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    systemctl = bin_dir / "systemctl"
    systemctl.write_text(f'#!/bin/sh\necho "$*" >> {calls}\n')
    systemctl.chmod(0o755)
    booted = tmp_path / "run-systemd-system"

    def post(arg: str) -> list[str]:
        calls.write_text("")
        env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}
        text = script.replace("/run/systemd/system", str(booted))
        run(["sh", "-c", text, "post", arg], env=env)
        return calls.read_text().splitlines()

    assert post("1") == [], "no systemd: nothing is done"
    booted.mkdir()
    assert post("1") == ["enable --now podman.socket"]
    assert post("2") == [], "an upgrade leaves the operator's choice alone"


UNITS = "/usr/lib/systemd/system"


def test_the_outdated_timer_and_service_are_packaged_disabled(rpm_file, files, payload, tmp_path):
    """The units as in packaging/systemd/, 0644 root; nothing enables the timer (disabled by
    default); erasing the package disables it where systemd runs (%preun, $1 = 0)."""
    for name in ("pcmkimg-outdated.service", "pcmkimg-outdated.timer"):
        path = f"{UNITS}/{name}"
        assert files[path][:3] == ("-rw-r--r--", "root", "root"), files.get(path)
        shipped = (payload / path.lstrip("/")).read_text()
        assert shipped == (REPO / "packaging" / "systemd" / name).read_text()
    postin = "\n".join(query(rpm_file, "--qf", "%{POSTIN}"))
    assert "pcmkimg-outdated" not in postin  # never enabled by the package
    preun = "\n".join(query(rpm_file, "--qf", "%{PREUN}"))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    (bin_dir / "systemctl").write_text(f'#!/bin/sh\necho "$*" >> {calls}\n')
    (bin_dir / "systemctl").chmod(0o755)
    booted = tmp_path / "run-systemd-system"
    booted.mkdir()
    for arg, wanted in (("1", []), ("0", ["disable --now pcmkimg-outdated.timer"])):
        calls.write_text("")
        text = preun.replace("/run/systemd/system", str(booted))
        run(["sh", "-c", text, "preun", arg], env={"PATH": f"{bin_dir}:/usr/bin:/bin"})
        assert calls.read_text().splitlines() == wanted, arg


@pytest.fixture(scope="module")
def upgrade_rpm(tmp_path_factory) -> str:
    """The same tree built as release 2: an upgrade of rpm_file."""
    out = tmp_path_factory.mktemp("rpm2")
    proc = run(
        ["sh", str(REPO / "packaging" / "build-rpm.sh"), "--worktree", "--outdir", str(out)]
        + ["--release", "2"],
        cwd=REPO,
        timeout=120,
    )
    return proc.stdout.strip()


def rpm_root(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run(["rpm", "--root", str(root), "--nodeps", *args])


def test_install_upgrade_and_erase_in_a_scratch_root(rpm_file, upgrade_rpm, tmp_path):
    """rpm -i, -U and -e with a real RPM database; the scriptlets run (busybox sh, no systemd)."""
    need_tools("busybox")
    root = tmp_path / "root"
    (root / "bin").mkdir(parents=True)
    busybox = subprocess.run(
        ["sh", "-c", "command -v busybox"], capture_output=True, text=True, check=True
    ).stdout.strip()
    (root / "bin" / "busybox").write_bytes(Path(busybox).read_bytes())
    (root / "bin" / "busybox").chmod(0o755)
    (root / "bin" / "sh").symlink_to("busybox")
    run(["rpm", "--root", str(root), "--initdb"])

    proc = rpm_root(root, "-i", rpm_file)
    assert "scriptlet" not in proc.stderr, proc.stderr
    assert run(["rpm", "--root", str(root), "-q", "pcmkimg"]).stdout.strip().endswith("-1.noarch")
    agent = root / AGENT.lstrip("/")
    assert agent.is_file() and os.access(agent, os.X_OK), "pcs resource describe looks here"
    state = root / STATE_DIR.lstrip("/")
    assert stat_mode(state) == 0o700
    assert (root / COMPLETION.lstrip("/")).is_file()
    assert [p for p in (root / MAN8.lstrip("/")).iterdir() if p.name.startswith("pcmkimg.8")]
    # The operator edits the configuration and runs an update (a journal line).
    conf = root / CONF.lstrip("/")
    edited = conf.read_text() + "\n[scheme]\nprefix = cluster.common.tag\n"
    conf.write_text(edited)
    journal = state / "journal.jsonl"
    journal.write_text('{"event": "start"}\n')
    journal.chmod(0o600)

    proc = rpm_root(root, "-U", upgrade_rpm)
    assert "scriptlet" not in proc.stderr, proc.stderr
    assert run(["rpm", "--root", str(root), "-q", "pcmkimg"]).stdout.strip().endswith("-2.noarch")
    assert conf.read_text() == edited, "%config(noreplace) lost the local edits"
    assert stat_mode(state) == 0o700
    assert journal.read_text() == '{"event": "start"}\n'
    assert agent.is_file() and os.access(agent, os.X_OK)
    verify = subprocess.run(
        ["rpm", "--root", str(root), "-V", "--nodeps", "pcmkimg"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    # Only the edited configuration differs from the package (size, digest, mtime).
    changed = [line for line in verify.stdout.splitlines() if line.strip()]
    assert all(line.endswith(CONF) for line in changed), changed

    rpm_root(root, "-e", "pcmkimg")
    assert not agent.exists() and not (root / CLI.lstrip("/")).exists()
    assert (root / f"{CONF.lstrip('/')}.rpmsave").read_text() == edited
    assert journal.is_file(), "the journal is the operator's: rpm -e must keep it"


def stat_mode(path: Path) -> int:
    return path.stat().st_mode & 0o7777
