"""Every command pcmkimg prints for an operator goes through the real tool's parser.

Pacemaker's tools run on a copy of a CIB fixture (``CIB_file``, never a live cluster): a usage
error is rc 64, an unknown resource or node rc 105, and where the tool works offline the test
also checks the command's effect on the file. pcs runs with ``-f FILE``, which the pcs commands
that pcmkimg prints all support (``pcs resource cleanup`` does not, which is one reason it is
not printed). pcmkimg's own commands go through its click parser; podman and skopeo through
their flag parsing (``--help`` after the argv: cobra still rejects an unknown flag).
The Pacemaker tools, pcs, podman and skopeo must be installed: under ``CI=true`` their absence
fails the test (tests/sandbox/require.py).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import click
import pytest
from lxml import etree

from pcmkimg import cli as pcmkimg_cli
from pcmkimg.core import cib
from pcmkimg.core import commands as C
from tests import fixtures
from tests.sandbox.require import need_tools

AGENT = Path("/usr/lib/ocf/resource.d/pcmkimg/floating-image")
PACEMAKER_TOOLS = ("crm_resource", "crm_attribute", "cibadmin", "crm_mon", "crm_ticket")
RC_USAGE, RC_NOSUCH = 64, 105


class Rejected(AssertionError):
    """The tool refused the command."""


def _env(cib_file: Path | None) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("CIB_", "PCMK_", "OCF_", "HA_")) and k != "CONTAINER_HOST"
    }
    env["LC_ALL"] = "C"
    if cib_file is not None:
        env["CIB_file"] = str(cib_file)
    return env


def _run(argv: Sequence[str], cib_file: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(argv), env=_env(cib_file), capture_output=True, text=True, timeout=60, check=False
    )


def copy(tmp_path: Path, fixture: str = "base.xml") -> Path:
    dest = tmp_path / fixture
    shutil.copyfile(fixtures.path(fixture), dest)
    return dest


def run_pacemaker(argv: Sequence[str], cib_file: Path) -> subprocess.CompletedProcess[str]:
    """Run a Pacemaker tool's argv on ``cib_file``; :class:`Rejected` unless it was accepted."""
    assert argv[0] in PACEMAKER_TOOLS, argv
    need_tools(argv[0])
    proc = _run(argv, cib_file)
    said = f"{C.shown(argv)} -> rc {proc.returncode}: {proc.stderr.strip()}"
    if proc.returncode in (RC_USAGE, RC_NOSUCH):
        raise Rejected(said)
    if proc.returncode == 0:
        return proc
    # Pacemaker 2.1.5 crashes (SIGSEGV) on --cleanup/--refresh with CIB_file: with --node,
    # after it parsed the options, found the resource and node and skipped the clean-up ("Dry
    # run"); without --node before it says anything, so only the option parsing is checked
    # (glib rejects an unknown option before it reaches a final --help).
    crashed = proc.returncode in (139, -11)
    if crashed and argv[:2] in (["crm_resource", "--cleanup"], ["crm_resource", "--refresh"]):
        if "Dry run: skipping clean-up" in proc.stdout + proc.stderr:
            return proc
        if "--node" not in argv and _run([*argv, "--help"], cib_file).returncode == 0:
            return proc
    raise Rejected(said)


def run_pcs(argv: Sequence[str], cib_file: Path) -> subprocess.CompletedProcess[str]:
    """``pcs -f cib_file ARGS``; :class:`Rejected` unless pcs accepted it."""
    assert argv[0] == "pcs", argv
    need_tools("pcs")
    proc = _run(["pcs", "-f", str(cib_file), *argv[1:]])
    if proc.returncode != 0:
        raise Rejected(f"{C.shown(argv)} -> rc {proc.returncode}: {proc.stderr.strip()}")
    return proc


def parse_pcmkimg(argv: Sequence[str]) -> list[str]:
    """Parse ``pcmkimg ARGS`` with pcmkimg's click commands, running nothing; the command path.
    :class:`Rejected` on a usage error."""
    assert argv[0] == "pcmkimg", argv
    command: click.Command = pcmkimg_cli.cli
    args = list(argv[1:])
    ctx: click.Context | None = None
    path = []
    try:
        while True:
            ctx = command.make_context(command.name or "pcmkimg", args, parent=ctx)
            if not isinstance(command, click.Group):
                return path
            # click 8.2 keeps the subcommand's name in _protected_args, click 8.1 in
            # protected_args (8.2 still has it, deprecated)
            protected = vars(ctx).get("_protected_args")
            if protected is None:
                protected = ctx.protected_args
            rest = [*protected, *ctx.args]
            name, sub, args = command.resolve_command(ctx, rest)
            assert sub is not None and name is not None
            path.append(name)
            command = sub
    except click.UsageError as exc:
        raise Rejected(f"{C.shown(argv)}: {exc.format_message()}") from exc


def check_flags(argv: Sequence[str]) -> None:
    """podman/skopeo: the subcommand exists and its flags parse (cobra with --help)."""
    need_tools(argv[0])
    proc = _run([*argv, "--help"])
    usage = f"\n{argv[0]} {argv[1]} "  # podman indents its usage line, skopeo does not
    if proc.returncode != 0 or usage not in proc.stdout.replace("\n  ", "\n"):
        raise Rejected(f"{C.shown(argv)} -> rc {proc.returncode}: {proc.stderr.strip()}")


def check_systemctl(argv: Sequence[str]) -> None:
    """systemctl parses its options before --help (an unknown one is refused); nothing runs."""
    need_tools("systemctl")
    proc = _run([*argv, "--help"])
    if proc.returncode != 0:
        raise Rejected(f"{C.shown(argv)} -> rc {proc.returncode}: {proc.stderr.strip()}")


def check_keyscan(argv: Sequence[str]) -> None:
    """ssh-keyscan prints its usage on a malformed command line. The hosts in the tests are
    loopback only (nothing listens on port 1: the scan itself finds nothing)."""
    need_tools("ssh-keyscan")
    assert argv[-1] == "127.0.0.1", argv
    proc = _run([argv[0], "-T", "2", *argv[1:]])
    if "usage:" in proc.stderr:
        raise Rejected(f"{C.shown(argv)}: {proc.stderr.strip()}")


def check(argv: Sequence[str], cib_file: Path) -> None:
    """Whichever checker fits the tool."""
    if argv[0] in PACEMAKER_TOOLS:
        run_pacemaker(argv, cib_file)
    elif argv[0] == "pcs":
        run_pcs(argv, cib_file)
    elif argv[0] == "pcmkimg":
        parse_pcmkimg(argv)
    elif argv[0] == "ssh-keyscan":
        check_keyscan(argv)
    elif argv[0] == "systemctl":
        check_systemctl(argv)
    else:
        check_flags(argv)


def load(cib_file: Path) -> cib.Element:
    return cib.parse_cib(cib_file.read_bytes())


def nvpairs(cib_file: Path, xpath: str) -> list[str]:
    tree = etree.parse(str(cib_file))
    return [f"{nv.get('name')}={nv.get('value')}" for nv in tree.xpath(xpath)]


# --------------------------------------------------------------------------- every command


EVERY = [
    C.cleanup("galera-bundle", "controller-1"),
    C.cleanup("galera-bundle-podman-1", "controller-1"),
    C.cleanup("galera-bundle"),
    C.refresh("galera-bundle", "controller-1"),
    C.refresh("galera-bundle"),
    C.clear_ban("galera-bundle", "controller-1"),
    C.wait(),
    # Pacemaker 3.0 refuses to delete a meta-attribute that is not set (rc 105); these fixes
    # are printed only when it is set (is-managed=false, target-role=Stopped).
    C.manage("cinder-volume-bundle"),
    C.enable("cinder-volume-bundle"),
    C.leave_resource_maintenance("cinder-volume-bundle"),
    C.set_interleave("galera-bundle"),
    C.list_resources(),
    C.leave_maintenance_mode(),
    C.delete_property("pcmkimg-lease"),
    C.delete_ticket("pcmkimg-lease"),
    C.node_unstandby("controller-1"),
    C.node_unmaintenance("controller-1"),
    C.delete_constraint("cli-ban-galera-bundle-on-controller-1"),
    C.delete_meta_set("cinder-volume-bundle-meta_attributes"),
    C.cluster_state(),
    C.status_xml(),
    C.query_cib(),
    C.delete_resource("galera-bundle"),
    C.stickiness_infinity(),
    C.update("controller-1", "mariadb"),
    C.update("controller-1", "mariadb", "reg.example.com:8787/ns/mariadb:17.1.2"),
    C.guard_add("galera-bundle"),
    C.guard_remove("galera-bundle"),
    C.migrate("galera-bundle"),
    C.status(),
    C.status("mariadb", "redis"),
    C.podman_login(),
    C.enable_podman_socket(),
    C.podman_pull("reg.example.com:8787/ns/mariadb:17.1.2"),
    C.tag("reg.example.com:8787/ns/mariadb:17.1.2", "cluster.common.tag/mariadb:pcmklatest"),
    C.skopeo_list_tags(),
    C.ssh_keyscan("127.0.0.1", 1),
    C.ssh_keyscan("127.0.0.1"),
]


@pytest.mark.parametrize("argv", EVERY, ids=C.shown)
def test_the_tool_accepts_it(argv: list[str], tmp_path: Path) -> None:
    f = copy(tmp_path, "bans.xml")
    if argv[0] == "crm_ticket":  # a ticket's state to delete (crm_ticket: rc 105 without)
        from pcmkimg.core import lease

        f.write_bytes(lease.write(load(f), lease.Lease("c-0", 4, "t", 30.0)).cib_xml())
    check(argv, f)


def test_every_command_function_is_checked() -> None:
    functions = {
        name
        for name, value in vars(C).items()
        if callable(value)
        and getattr(value, "__module__", "") == C.__name__
        and not name.startswith("_")
        and name not in ("shown", "quoted")
    }
    assert set(_ARGS) == functions, "add the new command function to EVERY and _ARGS"
    for name, calls in _ARGS.items():
        for args in calls:
            assert getattr(C, name)(*args) in EVERY, name


_ARGS: dict[str, list[tuple[str, ...]]] = {
    "cleanup": [("galera-bundle", "controller-1")],
    "refresh": [("galera-bundle", "controller-1")],
    "clear_ban": [("galera-bundle", "controller-1")],
    "wait": [()],
    "enable_podman_socket": [()],
    "manage": [("cinder-volume-bundle",)],
    "enable": [("cinder-volume-bundle",)],
    "leave_resource_maintenance": [("cinder-volume-bundle",)],
    "set_interleave": [("galera-bundle",)],
    "list_resources": [()],
    "leave_maintenance_mode": [()],
    "delete_property": [("pcmkimg-lease",)],
    "delete_ticket": [("pcmkimg-lease",)],
    "node_unstandby": [("controller-1",)],
    "node_unmaintenance": [("controller-1",)],
    "delete_constraint": [("cli-ban-galera-bundle-on-controller-1",)],
    "delete_meta_set": [("cinder-volume-bundle-meta_attributes",)],
    "cluster_state": [()],
    "status_xml": [()],
    "query_cib": [()],
    "delete_resource": [("galera-bundle",)],
    "stickiness_infinity": [()],
    "update": [("controller-1", "mariadb")],
    "guard_add": [("galera-bundle",)],
    "guard_remove": [("galera-bundle",)],
    "migrate": [("galera-bundle",)],
    "status": [()],
    "podman_login": [()],
    "podman_pull": [("reg.example.com:8787/ns/mariadb:17.1.2",)],
    "tag": [("reg.example.com:8787/ns/mariadb:17.1.2", "cluster.common.tag/mariadb:pcmklatest")],
    "skopeo_list_tags": [()],
    "ssh_keyscan": [("127.0.0.1", 1)],
}


def test_shown_quotes_for_a_shell() -> None:
    argv = C.delete_constraint("x")
    assert C.shown(argv) == "cibadmin --delete --xpath '//constraints/*[@id='\"'\"'x'\"'\"']'"
    assert C.quoted(C.wait()) == "`crm_resource --wait`"


# --------------------------------------------------------------------------- what they do


def test_clear_ban_and_delete_constraint_remove_the_leftovers(tmp_path: Path) -> None:
    f = copy(tmp_path, "bans.xml")
    before = {c.id for c in cib.cli_constraints(load(f))}
    assert "cli-ban-galera-bundle-on-controller-1" in before
    run_pacemaker(C.clear_ban("galera-bundle", "controller-1"), f)
    run_pacemaker(C.delete_constraint("cli-ban-redis-bundle-on-controller-2"), f)
    after = {c.id for c in cib.cli_constraints(load(f))}
    assert before - after == {
        "cli-ban-galera-bundle-on-controller-1",
        "cli-ban-redis-bundle-on-controller-2",
    }


def test_delete_constraint_removes_any_kind(tmp_path: Path) -> None:
    f = copy(tmp_path, "guard.xml")
    run_pacemaker(C.delete_constraint("galera-bundle-guard-order"), f)
    run_pacemaker(C.delete_constraint("galera-bundle-guard-colocation"), f)
    assert not cib.bundle(load(f), "galera-bundle").guard_wired
    assert cib.bundle(load(f), "galera-bundle").guard is not None  # the clone stays


def test_meta_commands_change_the_bundle(tmp_path: Path) -> None:
    f = copy(tmp_path)
    meta = "//bundle[@id='{}']/meta_attributes/nvpair"
    run_pacemaker(C.set_interleave("redis-bundle"), f)
    assert "interleave=true" in nvpairs(f, meta.format("redis-bundle"))
    assert "is-managed=true" in nvpairs(f, meta.format("cinder-volume-bundle"))
    run_pacemaker(C.manage("cinder-volume-bundle"), f)
    run_pacemaker(C.enable("cinder-volume-bundle"), f)
    run_pacemaker(C.leave_resource_maintenance("cinder-volume-bundle"), f)
    assert nvpairs(f, meta.format("cinder-volume-bundle")) == []
    cinder = cib.bundle(load(f), "cinder-volume-bundle")
    assert cinder.is_managed and cinder.target_role is None


def test_crm_attribute_commands(tmp_path: Path) -> None:
    f = copy(tmp_path)
    for argv in (
        ["crm_attribute", "--type", "crm_config", "--name", "maintenance-mode", "--update", "true"],
        ["crm_attribute", "--type", "crm_config", "--name", "pcmkimg-lease", "--update", "x"],
        ["crm_attribute", "--node", "controller-1", "--name", "standby", "--update", "on"],
        ["crm_attribute", "--node", "controller-2", "--name", "maintenance", "--update", "on"],
    ):
        run_pacemaker(argv, f)
    run_pacemaker(C.leave_maintenance_mode(), f)
    run_pacemaker(C.delete_property("pcmkimg-lease"), f)
    run_pacemaker(C.node_unstandby("controller-1"), f)
    run_pacemaker(C.node_unmaintenance("controller-2"), f)
    props = cib.cluster_properties(load(f))
    assert props["maintenance-mode"] == "false" and "pcmkimg-lease" not in props
    assert nvpairs(f, "//nodes/node/instance_attributes/nvpair") == []


def test_the_lease_fix_deletes_the_ticket_state_pcmkimg_writes(tmp_path: Path) -> None:
    from pcmkimg.core import lease

    f = copy(tmp_path)
    held = lease.Lease("controller-0", 42, "t0k", 30.0, 3, 1_800_000_000.0)
    f.write_bytes(lease.write(load(f), held).cib_xml())
    shown = run_pacemaker(["crm_ticket", "--ticket", lease.TICKET, "--query-xml"], f)
    assert f'{lease.ATTRIBUTE}="{held.encode()}"' in shown.stdout  # what an operator sees
    assert lease.read(load(f)) == held
    run_pacemaker(C.delete_ticket(lease.TICKET), f)
    assert lease.read(load(f)) is None


def test_stickiness_and_delete_resource(tmp_path: Path) -> None:
    f = copy(tmp_path)
    tree = etree.parse(str(f))
    for nv in tree.xpath("//rsc_defaults//nvpair[@name='resource-stickiness']"):
        nv.set("value", "0")
    tree.write(str(f))
    run_pcs(C.stickiness_infinity(), f)
    assert cib.rsc_defaults(load(f))["resource-stickiness"] == "INFINITY"
    g = copy(tmp_path, "guard.xml")
    run_pcs(C.delete_resource("galera-bundle-guard-clone"), g)
    assert cib.bundle(load(g), "galera-bundle").guard is None
    assert "guard" not in etree.tostring(load(g).find("configuration/constraints")).decode()


def test_the_guard_dry_run_commands_wire_the_guard(tmp_path: Path) -> None:
    f = copy(tmp_path)
    cmds = cib.guard_pcs_commands(load(f), "galera-bundle", "cluster.common.tag/mariadb:pcmklatest")
    for argv in cmds:
        if argv[:3] == ["pcs", "resource", "create"] and not AGENT.exists():
            argv = [*argv, "--force"]  # only pcs's look at the agent's meta-data is skipped
        run_pcs(argv, f)
    bundle = cib.bundle(load(f), "galera-bundle")
    assert bundle.guard_wired and bundle.interleave


# --------------------------------------------------------------------------- malformed


@pytest.mark.parametrize(
    "argv",
    [
        ["pcs", "resource", "cleanup", "galera-bundle", "--node", "controller-1"],
        ["pcs", "resource", "manage", "no-such-bundle"],
        ["pcs", "property", "set", "maintenance-mode=false", "--bogus"],
        ["crm_resource", "--cleanup", "--resource", "galera-bundle", "--nod", "controller-1"],
        ["crm_resource", "--cleanup", "galera-bundle", "--node", "controller-1"],
        ["crm_resource", "--clear", "--resource", "no-such-bundle", "--node", "controller-1"],
        ["crm_attribute", "--type", "crm_config", "--name", "maintenance-mode", "--updat", "no"],
        ["cibadmin", "--delete", "--xpat", "//constraints"],
        ["pcmkimg", "update", "controller-1", "mariadb"],
        ["pcmkimg", "pull", "mariadb"],
        ["pcmkimg", "guard", "add"],
        ["podman", "pull", "--bogus", "x"],
        ["skopeo", "list-tag", "docker://x/y"],
        ["ssh-keyscan", "-P", "1", "127.0.0.1"],
        ["systemctl", "enable", "--nowx", "podman.socket"],
    ],
    ids=C.shown,
)
def test_a_malformed_command_is_rejected(argv: list[str], tmp_path: Path) -> None:
    with pytest.raises(Rejected):
        check(argv, copy(tmp_path, "bans.xml"))


def test_tools_are_there() -> None:
    need_tools(*PACEMAKER_TOOLS, "pcs", "podman", "skopeo", "ssh-keyscan")
    assert _run(["crm_resource", "--version"]).returncode == 0
