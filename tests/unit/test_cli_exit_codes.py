"""The CLI's one mapping of failure kinds to exit codes, and its offline refusals."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import click
import pytest

from pcmkimg import agent, cli, wiring  # noqa: F401 - agent: its error types are in the tree below
from pcmkimg.adapters import journal, signals
from pcmkimg.adapters.errors import (
    BanNotRemovedError,
    CibChangedError,
    ClusterUnreachableError,
    ConfigError,
    HostKeyRejected,
    NodeNotConfigured,
    NoQuorumError,
    NotFoundError,
    OfflineError,
    PacemakerError,
    PacemakerTimeoutError,
    RestartFailedError,
    ToolError,
    ToolMissingError,
    TunnelFailed,
    UnsafeStateDir,
)
from pcmkimg.core import cib, lease
from pcmkimg.core.errors import (
    AuthError,
    BundleNotFoundError,
    CibParseError,
    CibStructureError,
    DigestMismatch,
    GuardConflictError,
    ImageNotFound,
    InvalidReference,
    InvalidScheme,
    NodeNotReady,
    NodesUnreachable,
    NodeUnreachable,
    NotFloatingName,
    PreflightFailed,
    PullFailed,
    RegistryUnreachable,
    RestartRefusedError,
    TLSError,
    UnknownNode,
    UnknownService,
)
from pcmkimg.errors import (
    FAMILIES,
    BadInput,
    PcmkimgError,
    Refused,
    Unreachable,
    UsageError,
)
from pcmkimg.workflows import (
    migrate,
    status,  # noqa: F401 - its error types are in the tree below
)
from pcmkimg.workflows.context import Context
from pcmkimg.workflows.errors import DigestRefused, PullsFailed, RollbackFailed, UpdateFailed
from tests import fakes

NODE = {"node": "n1"}
DIGEST_A = "sha256:" + "a" * 64
DIGEST_B = "sha256:" + "b" * 64

EXPECTED: list[tuple[BaseException, int]] = [
    # 1: a bug
    (RuntimeError("boom"), cli.INTERNAL),
    (PcmkimgError("unexpected"), cli.INTERNAL),
    # 2: bad input
    (UsageError("x"), cli.BAD_INPUT),
    (click.UsageError("x"), cli.BAD_INPUT),
    (InvalidReference("x", "why"), cli.BAD_INPUT),
    (InvalidScheme("x"), cli.BAD_INPUT),
    (NotFloatingName("x"), cli.BAD_INPUT),
    (ConfigError("x"), cli.BAD_INPUT),
    (NodeNotConfigured("x"), cli.BAD_INPUT),
    (BundleNotFoundError("x"), cli.BAD_INPUT),
    (GuardConflictError("x"), cli.BAD_INPUT),
    (UnknownService("x"), cli.BAD_INPUT),
    (UnknownNode("x"), cli.BAD_INPUT),
    # 3: problems, preconditions
    (cli.CheckFailed("x"), cli.PROBLEMS),
    (PreflightFailed("x"), cli.PROBLEMS),
    (NodeNotReady("x"), cli.PROBLEMS),
    (NoQuorumError("x"), cli.PROBLEMS),
    (RestartRefusedError("x"), cli.PROBLEMS),
    (OfflineError("x"), cli.PROBLEMS),
    (UnsafeStateDir("x"), cli.PROBLEMS),
    # 4: the lease
    (lease.LeaseHeld(lease.Lease("h", 1, "t")), cli.LEASE_HELD),
    (lease.LeaseLostError("x"), cli.LEASE_HELD),
    (lease.LeaseUnreadableError("x", "why"), cli.LEASE_HELD),
    # 2: the image under the tag has another digest than the one asked for
    (DigestMismatch("x", **NODE), cli.BAD_INPUT),
    (DigestRefused("x"), cli.BAD_INPUT),
    # 5: unreachable, pulls
    (PullsFailed("x"), cli.UNREACHABLE),
    (NodesUnreachable("x"), cli.UNREACHABLE),
    (NodeUnreachable("x", **NODE), cli.UNREACHABLE),
    (HostKeyRejected("x", **NODE), cli.UNREACHABLE),
    (RegistryUnreachable("x", **NODE), cli.UNREACHABLE),
    (ImageNotFound("x", **NODE), cli.UNREACHABLE),
    (AuthError("x", **NODE), cli.UNREACHABLE),
    (TLSError("x", **NODE), cli.UNREACHABLE),
    (PullFailed("x", **NODE), cli.UNREACHABLE),
    (TunnelFailed("x"), cli.UNREACHABLE),
    (ClusterUnreachableError("x"), cli.UNREACHABLE),
    (ToolMissingError("x"), cli.UNREACHABLE),
    (PacemakerTimeoutError("x"), cli.UNREACHABLE),
    # 6, 7: the update failed on a node
    (UpdateFailed("x"), cli.UPDATE_FAILED),
    (RestartFailedError("x"), cli.UPDATE_FAILED),
    (RollbackFailed("x"), cli.ROLLBACK_FAILED),
    # signals
    (KeyboardInterrupt(), cli.INTERRUPTED),
    (signals.Terminated(signal.SIGTERM), cli.TERMINATED),
]


@pytest.mark.parametrize(
    ("exc", "code"), EXPECTED, ids=[f"{type(e).__name__}-{c}" for e, c in EXPECTED]
)
def test_exit_code_of_each_kind(exc: BaseException, code: int) -> None:
    assert cli.exit_code(exc) == code


def test_the_codes_are_the_documented_ones() -> None:
    assert (cli.OK, cli.INTERNAL, cli.BAD_INPUT, cli.PROBLEMS, cli.LEASE_HELD) == (0, 1, 2, 3, 4)
    assert (cli.UNREACHABLE, cli.UPDATE_FAILED, cli.ROLLBACK_FAILED) == (5, 6, 7)
    assert (cli.INTERRUPTED, cli.TERMINATED) == (130, 128 + signal.SIGTERM)
    assert (cli.HANGUP, cli.QUIT) == (128 + signal.SIGHUP, 128 + signal.SIGQUIT) == (129, 131)
    assert cli.exit_code(signals.Terminated(signal.SIGHUP)) == cli.HANGUP
    assert cli.exit_code(signals.Terminated(signal.SIGQUIT)) == cli.QUIT


def _kinds(base: type) -> set[type]:
    found = set()
    for sub in base.__subclasses__():
        found |= {sub} | _kinds(sub)
    return found


# Caught inside the CLI, never an exit status: migrate of a bundle already on its floating name.
UNCLASSIFIED: set[type] = {migrate.NothingToMigrate}


def test_cluster_tool_failures_are_exit_5_and_a_left_ban_exit_7() -> None:
    for kind in (
        PacemakerError,
        ToolError,
        NotFoundError,
        CibChangedError,
        CibParseError,
        CibStructureError,
    ):
        assert cli.exit_code(kind.__new__(kind)) == cli.UNREACHABLE, kind
    ban = BanNotRemovedError.__new__(BanNotRemovedError)
    assert cli.exit_code(ban) == cli.ROLLBACK_FAILED


def test_every_error_kind_has_a_code_or_is_knowingly_unclassified() -> None:
    tested = {type(e) for e, _ in EXPECTED}
    for kind in _kinds(PcmkimgError):
        if kind.__module__.startswith("pcmkimg.") and kind not in UNCLASSIFIED:
            exc = kind.__new__(kind)
            assert kind in tested or cli.exit_code(exc) != cli.INTERNAL, kind


def test_every_error_kind_is_in_exactly_one_family() -> None:
    # Its exit code is its family's, and nothing else: not the order of a table, nor of its bases.
    assert set(cli.FAMILY_CODES) == set(FAMILIES)
    assert len(set(cli.FAMILY_CODES.values())) == len(FAMILIES)
    for kind in _kinds(PcmkimgError) - set(FAMILIES) - UNCLASSIFIED:
        if not kind.__module__.startswith("pcmkimg."):
            continue
        named = [base for base in kind.__bases__ if base in FAMILIES]
        assert len(named) <= 1, kind
        assert kind.family in FAMILIES and issubclass(kind, kind.family), kind
        inherited = {base.family for base in kind.__bases__ if issubclass(base, PcmkimgError)}
        assert named == [kind.family] or inherited == {kind.family}, kind
        assert cli.exit_code(kind.__new__(kind)) == cli.FAMILY_CODES[kind.family], kind
    for kind in UNCLASSIFIED | {PcmkimgError}:
        assert kind.family is None and cli.exit_code(kind.__new__(kind)) == cli.INTERNAL


def test_a_kind_names_its_family_or_has_its_bases_one() -> None:
    class Base(Unreachable):
        pass

    class Refusing(Base, Refused):  # the family it names wins, first or last
        pass

    class Bad(BadInput, Base):
        pass

    class Plain(Base):
        pass

    assert (Refusing.family, Bad.family, Plain.family) == (Refused, BadInput, Unreachable)
    with pytest.raises(TypeError, match="two exit families"):

        class Two(BadInput, Refused):
            pass

    with pytest.raises(TypeError, match="name one"):

        class Unsure(Refusing, Plain):
            pass


def test_the_report_is_an_attribute_of_every_error() -> None:
    assert PcmkimgError("x").report is None
    assert PcmkimgError("x", "fix", {"done": 1}).report == {"done": 1}
    assert NodeUnreachable("x", **NODE).report is None


# --------------------------------------------------------------------------- main(), offline


def run_main(capsys, *argv: str, context=None) -> tuple[int, str, str]:  # type: ignore[no-untyped-def]
    """``pcmkimg ARGV`` through cli.main; ``context``: the factory of the commands' context
    (tests.fakes.cli_context), by default the live one."""
    with pytest.raises(SystemExit) as info:
        cli.main(list(argv), context=context)
    out, err = capsys.readouterr()
    return int(info.value.code or 0), out, err


def fake_cluster() -> fakes.FakeCluster:
    """The base cluster, each controller running its galera replica; reads are events."""
    image = "1" * 64
    stores = {
        node: fakes.FakeStore(node, {fakes.FLOATING: image}, {fakes.container_of(node): image})
        for node in fakes.NODES
    }
    cluster = fakes.FakeCluster(stores)
    cluster.record_reads = True
    return cluster


@pytest.fixture
def conf(tmp_path: Path) -> str:
    path = tmp_path / "pcmkimg.conf"
    path.write_text("[nodes]\nn1 = unix:///nonexistent.sock\n")
    return str(path)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--image", "reg.example.com/NS/Svc:1", "--all"), "reg.example.com/NS/Svc:1"),
        (("--image", "reg.example.com/ns/svc:1", "--node", "n1", "--all"), "--node"),
        (("--image", "reg.example.com/ns/svc:1"), "--all"),
        (("--image", "reg.example.com/ns/svc:1", "--all", "--digest", "sha256:zz"), "digest"),
        (("--image", f"reg.example.com/ns/svc@{DIGEST_A}", "--all", "--digest", DIGEST_B), "asks"),
    ],
    ids=["malformed-image", "node-and-all", "neither", "malformed-digest", "two-digests"],
)
def test_update_refuses_bad_input_before_touching_the_cluster(
    capsys, conf: str, args: tuple[str, ...], says: str
) -> None:
    cluster = fake_cluster()
    code, out, err = run_main(
        capsys, "--conf", conf, "update", "svc", *args, context=fakes.cli_context(cluster)
    )
    assert code == cli.BAD_INPUT, err
    assert cluster.events == []
    assert out == ""
    (line,) = err.splitlines()
    assert line.startswith("pcmkimg: error: ") and says in line
    assert "; fix: " in line


def test_the_same_digest_in_the_image_and_in_digest_is_fine(capsys, conf: str) -> None:
    cluster = fake_cluster()
    image = f"reg.example.com/ns/mariadb:1@{DIGEST_A}"
    code, out, err = run_main(
        capsys,
        "--conf",
        conf,
        "update",
        "mariadb",
        "--image",
        image,
        "--all",
        "--digest",
        DIGEST_A,
        "--dry-run",
        context=fakes.cli_context(cluster),
    )
    assert code == cli.OK, err
    assert cluster.events == [("read",)]  # planned on the cluster; --dry-run: nothing else
    assert DIGEST_A in out


def test_json_error_document(capsys, conf: str) -> None:
    code, out, err = run_main(
        capsys,
        "--json",
        "--conf",
        conf,
        "update",
        "svc",
        "--image",
        "bad ref",
        "--all",
        context=fakes.cli_context(fake_cluster()),
    )
    assert code == cli.BAD_INPUT
    doc = json.loads(out)
    assert doc["exit_code"] == cli.BAD_INPUT
    assert doc["error"] == err.strip().removeprefix("pcmkimg: error: ")


def test_a_bad_configuration_is_exit_2(capsys, tmp_path: Path) -> None:
    bad = tmp_path / "bad.conf"
    bad.write_text("[nodes\n")
    code, _, err = run_main(
        capsys, "--conf", str(bad), "update", "svc", "--image", "reg.example.com/ns/svc:1", "--all"
    )
    assert code == cli.BAD_INPUT
    assert "malformed configuration file" in err
    # Commands that need no configuration, and --help, still work with a broken one.
    code, _, _ = run_main(capsys, "--conf", str(bad), "status", "--help")
    assert code == cli.OK
    code, out, _ = run_main(
        capsys,
        "--json",
        "--conf",
        str(bad),
        "update",
        "svc",
        "--image",
        "reg.example.com/ns/svc:1",
        "--all",
    )
    assert code == cli.BAD_INPUT and json.loads(out)["exit_code"] == cli.BAD_INPUT


def test_click_usage_errors_are_exit_2(capsys, conf: str) -> None:
    code, _, err = run_main(capsys, "--conf", conf, "update", "svc", "--all")
    assert code == cli.BAD_INPUT and "--image" in err
    code, _, _ = run_main(capsys, "--conf", conf, "no-such-command")
    assert code == cli.BAD_INPUT


def test_history_reads_the_journal(capsys, conf: str, tmp_path: Path) -> None:
    d = tmp_path / "state"
    jr = journal.open_journal(d, run="r1")
    jr.record("start", service="svc", target="reg/ns/svc:1")
    jr.record("pull", node="n1", ok=True)
    jr.record("done", service="svc", summary="1 node(s) updated")
    journal.open_journal(d, run="r2").record("start", service="other")
    code, out, _ = run_main(capsys, "--conf", conf, "--journal-dir", str(d), "history", "svc")
    assert code == 0
    lines = out.splitlines()
    assert [line.split()[1:3] for line in lines] == [
        ["r1", "start"],
        ["r1", "pull"],
        ["r1", "done"],
    ]
    assert "target=reg/ns/svc:1" in lines[0]
    code, out, _ = run_main(
        capsys, "--json", "--conf", conf, "--journal-dir", str(d), "history", "--limit", "1"
    )
    assert [e["run"] for e in json.loads(out)] == ["r2"]
    code, out, _ = run_main(
        capsys, "--conf", conf, "--journal-dir", str(tmp_path / "none"), "history"
    )
    assert (code, out.strip()) == (0, "the journal is empty")


@pytest.mark.parametrize(
    ("exc", "text"),
    [
        (KeyboardInterrupt(), "interrupted; bans and the update lease were cleaned up"),
        (signals.Terminated(), "terminated; bans and the update lease were cleaned up"),
        (
            signals.Terminated(signal.SIGHUP),
            "terminated by SIGHUP; bans and the update lease were cleaned up",
        ),
        (ValueError("x"), "internal error: ValueError: x (please report this)"),
        (UsageError("bad\n  thing", "do\nthis"), "bad thing; fix: do this"),
    ],
)
def test_fail_prints_one_line(capsys, exc: BaseException, text: str) -> None:
    with pytest.raises(SystemExit) as info:
        cli._fail(None, exc)
    assert info.value.code == cli.exit_code(exc)
    assert capsys.readouterr().err == f"pcmkimg: error: {text}\n"


@pytest.mark.parametrize("key", ["tag", "rollback_tag"])
def test_the_hold_tag_in_the_scheme_is_exit_2_on_one_line(capsys, tmp_path: Path, key: str) -> None:
    from pcmkimg.core.tagplan import HOLD_TAG

    path = tmp_path / "hold.conf"
    path.write_text(f"[scheme]\n{key} = {HOLD_TAG}\n")
    code, out, err = run_main(
        capsys, "--conf", str(path), "update", "svc", "--image", "reg.example.com/ns/svc:1", "--all"
    )
    assert code == cli.BAD_INPUT and out == ""
    (line,) = err.splitlines()
    assert HOLD_TAG in line and str(path) in line and "; fix: " in line


@pytest.mark.parametrize("via", ["option", "environment"])
@pytest.mark.parametrize("command", [("status",), ("history",), ("prune", "svc", "--all")])
def test_a_missing_conf_file_is_exit_2_naming_it_before_anything_runs(
    capsys, tmp_path: Path, monkeypatch, via: str, command: tuple[str, ...]
) -> None:
    absent = tmp_path / "no-such.conf"
    ran: list[object] = []  # a context made: the cluster, the stores or the journal reachable
    make = fakes.cli_context(fake_cluster())

    def context(env: wiring.Env, progress: object) -> Context:
        ran.append(env.command)
        return make(env, progress)

    if via == "environment":
        monkeypatch.setenv("PCMKIMG_CONF", str(absent))
        argv: tuple[str, ...] = command
    else:
        argv = ("--conf", str(absent), *command)
    code, out, err = run_main(capsys, "--journal-dir", str(tmp_path / "j"), *argv, context=context)
    assert (code, out, ran) == (cli.BAD_INPUT, "", [])
    (line,) = err.splitlines()
    assert str(absent) in line and "/etc/pcmkimg" not in line and "; fix: " in line


def test_history_escapes_control_characters_and_survives_bad_bytes(
    capsys, conf: str, tmp_path: Path
) -> None:
    d = tmp_path / "state"
    journal.open_journal(d, run="r1").record("failed", service="svc", error="\x1b[2Jgone\r\n")
    with open(d / journal.FILE, "ab") as f:
        f.write(b"\xff\xfe\n")
    code, out, err = run_main(capsys, "--conf", conf, "--journal-dir", str(d), "history")
    assert code == 0, err
    (line,) = out.splitlines()
    assert "\x1b" not in out and "\r" not in out
    assert "error=\\x1b[2Jgone\\r\\n" in line
    # --json keeps the stored text exactly (JSON escapes it itself).
    code, out, _ = run_main(capsys, "--json", "--conf", conf, "--journal-dir", str(d), "history")
    assert json.loads(out)[0]["error"] == "\x1b[2Jgone\r\n" and "\x1b" not in out


def test_status_escapes_control_characters(capsys, conf: str) -> None:
    """Text from the cluster (here a failure's exit reason, the agent's own words) reaches
    the terminal escaped."""
    cluster = fake_cluster()
    node = "controller-1"
    container = fakes.container_of(node)
    cluster.extra_failures.append(
        cib.Failure(
            f"{container}_start_0", container, "start", 0, node, 1, "error", "x\x1b]0;owned\x07"
        )
    )
    code, out, err = run_main(
        capsys, "--conf", conf, "status", "mariadb", context=fakes.cli_context(cluster)
    )
    assert code == 0, err
    (row,) = [line for line in out.splitlines() if line.lstrip().startswith(node)]
    assert row.endswith(f"failed start of {container}: x\\x1b]0;owned\\x07")
    assert "\x1b" not in out and "\x07" not in out


def test_only_main_and_the_failure_path_exit() -> None:
    """A command's body returns its finding (``outdated``: an update available, a registry not
    asked) and main() maps it with :data:`cli.FINDING_CODES`; it never calls sys.exit itself."""
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(cli))
    exiting = set()
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef):
            for call in ast.walk(fn):
                if isinstance(call, ast.Call) and ast.unparse(call.func) == "sys.exit":
                    exiting.add(fn.name)
    assert exiting == {"main", "_fail"}
    assert set(cli.FINDING_CODES.values()) == {cli.OUTDATED, cli.REGISTRY_UNASKED}
