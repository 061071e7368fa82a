"""Pure logic of the Pacemaker adapter, with a recorded backend instead of the tools."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Union

import pytest
from lxml import etree

from pcmkimg.adapters import errors as adapter_errors
from pcmkimg.adapters import pacemaker as pm
from pcmkimg.adapters import signals
from pcmkimg.adapters.errors import (
    BanNotRemovedError,
    CibChangedError,
    OfflineError,
    PacemakerTimeoutError,
    RestartFailedError,
    ToolMissingError,
)
from pcmkimg.adapters.runner import DEFAULT_TIMEOUT, ToolResult
from pcmkimg.core import cib, restart
from pcmkimg.core.errors import RestartRefusedError
from tests import fixtures

Answer = Union[tuple[int, str, str], BaseException]


fixture = fixtures.text


@dataclass
class Recorded:
    """A backend answering by argv prefix; answers are consumed in order, the last repeats."""

    answers: dict[tuple[str, ...], list[Answer]]
    calls: list[tuple[tuple[str, ...], dict[str, str], float, str | None]] = field(
        default_factory=list
    )

    def __call__(
        self, argv: Sequence[str], env: Mapping[str, str], timeout: float, stdin: str | None
    ) -> tuple[int, str, str]:
        self.calls.append((tuple(argv), dict(env), timeout, stdin))
        for key in sorted(self.answers, key=len, reverse=True):
            if tuple(argv[: len(key)]) == key:
                queue = self.answers[key]
                answer = queue.pop(0) if len(queue) > 1 else queue[0]
                if isinstance(answer, BaseException):
                    raise answer
                return answer
        raise AssertionError(f"unexpected call {argv}")

    def argvs(self) -> list[tuple[str, ...]]:
        return [c[0] for c in self.calls]


def runner(answers: Mapping[tuple[str, ...], list[Answer]], **kwargs: object) -> pm.Runner:
    return pm.Runner(backend=Recorded(dict(answers)), **kwargs)  # type: ignore[arg-type]


def backend(r: pm.Runner) -> Recorded:
    assert isinstance(r.backend, Recorded)
    return r.backend


OK = (0, "", "")


# --------------------------------------------------------------------------- runner


def test_prefix_env_and_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CIB_file", "/leaked.xml")
    monkeypatch.setenv("LC_ALL", "de_DE.UTF-8")
    r = runner({("nsenter",): [(0, "controller-0\n", "")]}, prefix=("nsenter", "-t", "1", "--"))
    assert pm.local_node(r) == "controller-0"
    argv, env, timeout, stdin = backend(r).calls[0]
    assert argv == ("nsenter", "-t", "1", "--", "crm_node", "-n")
    assert env["LC_ALL"] == "C" and "CIB_file" not in env
    assert timeout == DEFAULT_TIMEOUT and stdin is None


def test_cib_file_is_passed_and_live_only_operations_refuse() -> None:
    r = runner({("cibadmin",): [(0, fixture("base.xml"), "")]}, cib_file="/tmp/saved.xml")
    assert pm.query_cib(r).tag == "cib"
    assert backend(r).calls[0][1]["CIB_file"] == "/tmp/saved.xml"
    for call in (
        lambda: pm.local_node(r),
        lambda: pm.cleanup(r, "x"),
        lambda: pm.wait(r, 5),
        lambda: pm.restart_replica(r, "galera-bundle", "controller-1"),
    ):
        with pytest.raises(OfflineError, match="needs a live cluster"):
            call()
    assert len(backend(r).calls) == 1


@pytest.mark.parametrize(
    ("rc", "stderr", "kind"),
    [
        (
            103,
            "Call cib_apply_diff failed: Update was older than existing configuration",
            "CibChanged",
        ),
        (1, "Call cib_apply_diff failed: Application of update diff failed", "CibChanged"),
        (105, "crm_resource: Resource 'nosuch' not found", "NotFound"),
        (106, "Error performing operation: No quorum", "NoQuorum"),
        (124, "crm_resource: Timed out waiting", "PacemakerTimeout"),
        (
            102,
            "Could not connect to the CIB: Transport endpoint is not connected",
            "ClusterUnreachable",
        ),
        (1, "something else went wrong", "Tool"),
    ],
)
def test_error_mapping(rc: int, stderr: str, kind: str) -> None:
    r = runner({("cibadmin",): [(rc, "", stderr)]})
    with pytest.raises(getattr(adapter_errors, f"{kind}Error")) as info:
        pm.query_cib(r)
    err = info.value
    assert type(err).__name__ == f"{kind}Error"
    assert err.rc == rc and err.argv == ("cibadmin", "--query") and err.stderr == stderr
    assert stderr.split(":")[-1].strip() in err.one_line() and "fix:" in err.one_line()


def test_missing_tool_and_hung_tool() -> None:
    r = runner({("crm_mon",): [FileNotFoundError("crm_mon")]})
    with pytest.raises(ToolMissingError, match="crm_mon is not installed"):
        pm.status(r)
    r = runner({("crm_mon",): [subprocess.TimeoutExpired("crm_mon", 60)]})
    with pytest.raises(PacemakerTimeoutError, match="did not finish within 60s"):
        pm.status(r)


def test_check_false_returns_the_result() -> None:
    r = runner({("crm_node",): [(7, "out", "err")]})
    assert r.run(["crm_node", "-q"], check=False) == ToolResult(("crm_node", "-q"), 7, "out", "err")


# --------------------------------------------------------------------------- CIB writes


def test_push_sends_the_patch_on_stdin_and_skips_empty_changes() -> None:
    base = cib.parse_cib(fixture("base.xml"))
    r = runner({("cibadmin", "--patch"): [OK]})
    pm.push(r, cib.set_cluster_property(base, "pcmkimg-x", "1"))
    argv, _, _, stdin = backend(r).calls[0]
    assert argv == ("cibadmin", "--patch", "--xml-pipe")
    assert stdin is not None and 'name="pcmkimg-x"' in stdin and "<source" in stdin
    pm.push(r, cib.make_change(base, base, "nothing"))
    assert len(backend(r).calls) == 1


def test_update_cib_retries_when_the_cib_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pm.time, "sleep", lambda _s: None)
    stale = (103, "", "Update was older than existing configuration")
    r = runner({("cibadmin", "--query"): [(0, fixture("base.xml"), "")]})
    backend(r).answers[("cibadmin", "--patch")] = [stale, stale, OK]
    change = pm.update_cib(r, lambda c: cib.set_cluster_property(c, "pcmkimg-x", "1"))
    assert "pcmkimg-x" in change.description
    assert [a[1] for a in backend(r).argvs()].count("--patch") == 3
    backend(r).answers[("cibadmin", "--patch")] = [stale]
    with pytest.raises(CibChangedError):
        pm.update_cib(r, lambda c: cib.set_cluster_property(c, "pcmkimg-x", "2"), attempts=2)


def test_commands() -> None:
    r = runner({("crm_resource",): [OK], ("crm_attribute",): [OK]})
    pm.cleanup(r, "b", "n1")
    pm.refresh(r, "b")
    pm.wait(r, 30)
    pm.set_node_attribute(r, "n1", "pcmkimg-image", "reg/ns/x:1")
    pm.delete_node_attribute(r, "n1", "pcmkimg-image")
    attr = ("crm_attribute", "--lifetime", "reboot", "--node", "n1", "--name", "pcmkimg-image")
    assert backend(r).argvs() == [
        ("crm_resource", "--cleanup", "--resource", "b", "--node", "n1"),
        ("crm_resource", "--refresh", "--resource", "b"),
        ("crm_resource", "--wait", "--timeout=30s"),
        (*attr, "--update", "reg/ns/x:1"),
        (*attr, "--delete"),
    ]
    assert backend(r).calls[2][2] == 30 + pm.CALL_SLACK


# --------------------------------------------------------------------------- restart


def _mon_down(*containers: str) -> str:
    """mon-ok.xml with the replicas of ``containers`` stopped."""
    mon = etree.fromstring(fixture("mon-ok.xml").encode())
    for container in containers:
        el = mon.find(f".//resource[@id='{container}']")
        assert el is not None
        for res in el.getparent().findall("resource"):
            res.set("active", "false")
            res.set("role", "Stopped")
            for child in list(res):
                res.remove(child)
    return etree.tostring(mon, encoding="unicode")


IDLE = (
    0,
    '<pacemaker-result><crmd node_name="controller-0" state="S_IDLE"/></pacemaker-result>',
    "",
)
BUSY = (
    0,
    '<pacemaker-result><crmd node_name="controller-0" state="S_POLICY_ENGINE"/></pacemaker-result>',
    "",
)


def restart_runner(*looks: str, place: Answer = OK) -> pm.Runner:
    """crm_mon answers: mon-ok.xml (before), then ``looks`` (file names or XML text)."""
    mons = [fixture(x) if x.endswith(".xml") else x for x in looks]
    return runner(
        {
            ("cibadmin", "--query"): [(0, fixture("base.xml"), "")],
            ("crm_mon",): [(0, fixture("mon-ok.xml"), "")] + [(0, m, "") for m in mons],
            ("cibadmin", "--modify"): [place],
            ("crmadmin",): [BUSY, IDLE, IDLE],
            ("cibadmin", "--delete"): [OK],
            ("cibadmin", "--delete-all"): [OK],
        }
    )


BAN_DELETE = (
    "cibadmin",
    "--delete",
    "--scope",
    "constraints",
    "--xml-text",
    '<rsc_location id="cli-ban-galera-bundle-on-controller-1"/>',
)
PIN_DELETE = (
    "cibadmin",
    "--delete",
    "--scope",
    "resources",
    "--xml-text",
    '<meta_attributes id="galera-bundle-pcmkimg-pin"/>',
)
DEFAULTS_PIN_DELETE = (
    "cibadmin",
    "--delete",
    "--scope",
    "rsc_defaults",
    "--xml-text",
    '<meta_attributes id="pcmkimg-pin"/>',
)
UNPINNED = [
    (
        "cibadmin",
        "--delete-all",
        "--force",
        "--xpath",
        "//meta_attributes[@id='galera-bundle-pcmkimg-pin']|//meta_attributes[@id='pcmkimg-pin']",
    )
]
"""The pins go in one CIB change (one call), both by id."""
ALL_REMOVED = (
    "cibadmin",
    "--delete-all",
    "--force",
    "--xpath",
    "//rsc_location[@id='cli-ban-galera-bundle-on-controller-1']"
    "|//meta_attributes[@id='galera-bundle-pcmkimg-pin']|//meta_attributes[@id='pcmkimg-pin']",
)
"""The ban and the pins, in one CIB change: a restart that failed or was interrupted."""


def test_restart_places_the_ban_watches_and_removes_it_once_stopped() -> None:
    down = _mon_down("galera-bundle-podman-1")
    r = restart_runner("mon-ok.xml", down, "mon-ok.xml")
    # recheck: no look for bans written back (the exact sequence of calls below)
    report = pm.restart_replica(
        r, "galera-bundle", "controller-1", timeout=90, poll=0, recheck=3600
    )
    assert (report.node, report.replica, report.container) == (
        "controller-1",
        1,
        "galera-bundle-podman-1",
    )
    argvs = backend(r).argvs()
    # Read, then the ban first of all writes: nothing else goes to the CIB before the stop.
    assert [a[:2] for a in argvs[:3]] == [
        ("cibadmin", "--query"),
        ("crm_mon", "-1"),
        ("cibadmin", "--modify"),
    ]
    # One write: the ban and the bundle's pin (every other replica stays where it is).
    assert argvs[2][:4] == ("cibadmin", "--modify", "--scope", "configuration")
    placed = etree.fromstring(argvs[2][-1].encode())
    bans = placed.find("constraints")
    assert [b.get("id") for b in bans] == ["cli-ban-galera-bundle-on-controller-1"]
    assert bans.find(".//date_expression").get("operation") == "lt"
    defaults = placed.find("rsc_defaults/meta_attributes")
    assert defaults.get("id") == "pcmkimg-pin" and defaults.get("score") == "INFINITY"
    assert defaults.find("rule/date_expression").get("operation") == "lt"
    pin = placed.find("resources/bundle[@id='galera-bundle']/meta_attributes")
    assert pin.get("id") == "galera-bundle-pcmkimg-pin" and pin.get("score") == "INFINITY"
    assert pin.find("nvpair").get("name") == "resource-stickiness"
    assert pin.find("nvpair").get("value") == "INFINITY"
    end = bans.find(".//date_expression").get("end")
    assert pin.find("rule/date_expression").get("end") == end
    # The ban goes right after the look that saw the replica stopped, once; the pin once
    # the replica is active on its node again.
    assert argvs.index(BAN_DELETE) == 5 and argvs.count(BAN_DELETE) == 1
    assert argvs[4][0] == "crm_mon"
    assert argvs[7:8] == UNPINNED and argvs.count(UNPINNED[0]) == 1
    assert PIN_DELETE not in argvs and DEFAULTS_PIN_DELETE not in argvs
    # Done after the DC was idle at two looks in a row.
    assert [a[0] for a in argvs[8:]] == ["crm_mon", "crmadmin"] * 3
    assert argvs[-1] == ("crmadmin", "--status=controller-0", "--output-as=xml")
    assert not any(a[:2] == ("crm_resource", "--restart") for a in argvs)
    assert not any(a[:2] == ("crm_resource", "--wait") for a in argvs)


def test_replicas_of_two_bundles_restart_together_bans_placed_and_lifted_at_once() -> None:
    """A release's node turn: the replicas of two bundles on one node, their bans and pins
    placed in one CIB write, the bans on the node lifted in one change once BOTH are stopped
    (not when the first is), the rest in one change once both are active again."""
    galera, rabbit = "galera-bundle-podman-1", "rabbitmq-bundle-podman-1"
    looks = [
        _mon_down(rabbit),  # the dependent one stops first: nothing lifted yet
        _mon_down(rabbit, galera),  # both stopped: both bans go, in one change
        _mon_down(rabbit),  # galera back, rabbitmq not yet: the rest stays
        "mon-ok.xml",  # both active: the rest goes, in one change
        "mon-ok.xml",
        "mon-ok.xml",
    ]
    r = restart_runner(*looks)
    reports = pm.restart_replicas(
        r, ["galera-bundle", "rabbitmq-bundle"], "controller-1", timeout=90, poll=0
    )
    assert [(x.bundle, x.container) for x in reports] == [
        ("galera-bundle", galera),
        ("rabbitmq-bundle", rabbit),
    ]
    argvs = backend(r).argvs()
    writes = [(i, a) for i, a in enumerate(argvs) if a[0] == "cibadmin" and a[1] != "--query"]
    assert [a[1] for _, a in writes] == ["--modify", "--delete-all", "--delete-all"]
    placed = etree.fromstring(writes[0][1][-1].encode())
    assert [b.get("id") for b in placed.find("constraints")] == [
        "cli-ban-galera-bundle-on-controller-1",
        "cli-ban-rabbitmq-bundle-on-controller-1",
    ]
    assert [p.get("id") for p in placed.iterfind("resources/bundle/meta_attributes")] == [
        "galera-bundle-pcmkimg-pin",
        "rabbitmq-bundle-pcmkimg-pin",
    ]
    assert placed.find("rsc_defaults/meta_attributes").get("id") == "pcmkimg-pin"
    # The bans go after the look that saw both stopped (the third crm_mon), not before.
    mons = [i for i, a in enumerate(argvs) if a[0] == "crm_mon"]
    assert mons[2] < writes[1][0] < mons[3]
    assert writes[1][1][-1] == (
        "//rsc_location[@id='cli-ban-galera-bundle-on-controller-1']"
        "|//rsc_location[@id='cli-ban-rabbitmq-bundle-on-controller-1']"
    )
    assert mons[4] < writes[2][0] < mons[5]
    assert writes[2][1][-1] == (
        "//meta_attributes[@id='galera-bundle-pcmkimg-pin']"
        "|//meta_attributes[@id='rabbitmq-bundle-pcmkimg-pin']"
        "|//meta_attributes[@id='pcmkimg-pin']"
    )


def test_a_failure_of_one_replica_of_a_group_names_its_bundle_and_lifts_every_ban() -> None:
    r = restart_runner(
        _mon_down("rabbitmq-bundle-podman-1", "galera-bundle-podman-1"), "mon-failed-start.xml"
    )
    with pm.holding(r, "galera-bundle", 90) as holds:
        with pytest.raises(RestartFailedError, match="restart of galera-bundle on") as info:
            pm.restart_replicas(
                r, ["galera-bundle", "rabbitmq-bundle"], "controller-1", poll=0, holds=holds
            )
        assert "--resource galera-bundle" in info.value.fix
        # The bans on the node are gone; the pins (and holds) stay for the rollback.
        assert holds.bans == {"galera-bundle": [], "rabbitmq-bundle": []}
        assert holds.pins == ["galera-bundle", "rabbitmq-bundle"]
        during = len(backend(r).argvs())
    assert [a[1] for a in backend(r).argvs()[during:]] == ["--delete-all"]
    assert not holds.placed


def test_restart_with_failed_start_is_a_failure() -> None:
    r = restart_runner(_mon_down("galera-bundle-podman-1"), "mon-failed-start.xml")
    with pytest.raises(RestartFailedError) as info:
        pm.restart_replica(r, "galera-bundle", "controller-1", poll=0)
    err = info.value
    assert [f.op_key for f in err.failures] == ["galera-bundle-podman-1_start_0"]
    assert "User-injected result" in err.message and "--cleanup" in err.fix


def test_failed_stop_fails_and_removes_the_ban() -> None:
    r = restart_runner("mon-failed-start.xml")
    with pytest.raises(RestartFailedError):
        pm.restart_replica(r, "galera-bundle", "controller-1", poll=0)
    assert backend(r).argvs()[-1] == ALL_REMOVED


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt(), signals.Terminated(signal.SIGTERM)])
def test_interrupted_restart_removes_the_ban(interrupt: BaseException) -> None:
    r = restart_runner("mon-ok.xml", place=interrupt)
    with pytest.raises(type(interrupt)):
        pm.restart_replica(r, "galera-bundle", "controller-1", poll=0)
    assert backend(r).argvs()[-1] == ALL_REMOVED


def test_a_replica_that_never_stops_times_out_and_the_ban_goes() -> None:
    r = restart_runner("mon-ok.xml")
    with pytest.raises(PacemakerTimeoutError, match="still stopping"):
        pm.restart_replica(r, "galera-bundle", "controller-1", timeout=0.05, poll=0.01)
    assert backend(r).argvs()[-1] == ALL_REMOVED


def test_every_constraint_left_is_named() -> None:
    """A cleanup that fails names every constraint left (the ban, whose removal failed
    first, and both pins, removed together), each with the command that removes it."""
    r = restart_runner("mon-ok.xml")
    backend(r).answers[("cibadmin", "--delete")] = [(102, "", "Could not connect")] * 3
    backend(r).answers[("cibadmin", "--delete-all")] = [(102, "", "Could not connect")] * 3
    with pytest.raises(BanNotRemovedError, match="crm_resource --clear") as info:
        pm.restart_replica(r, "galera-bundle", "controller-1", timeout=0.05, poll=0.01)
    assert backend(r).argvs()[-1] == ALL_REMOVED
    message = info.value.message
    assert "cli-ban-galera-bundle-on-controller-1" in message and "in force until" in message
    assert "galera-bundle-pcmkimg-pin" in message and "pcmkimg-pin" in message
    assert "galera-bundle-pcmkimg-pin" in info.value.fix
    assert "//meta_attributes[@id='\"'\"'pcmkimg-pin" in info.value.fix


def test_a_failed_restart_in_a_holding_scope_keeps_the_holds_until_its_end() -> None:
    """The restart of an update's node step: on failure only the ban on the node goes; the
    pin stays (and the holds on free nodes) until the scope ends, after the rollback."""
    r = restart_runner("mon-failed-start.xml")
    with pm.holding(r, "galera-bundle", 90) as holds:
        with pytest.raises(RestartFailedError):
            pm.restart_replica(r, "galera-bundle", "controller-1", poll=0, holds=holds)
        assert backend(r).argvs()[-1] == BAN_DELETE
        assert holds.pinned and holds.banned == []
        during = len(backend(r).argvs())
    assert backend(r).argvs()[during:] == UNPINNED
    assert not holds.placed


def test_an_existing_ban_refuses_before_any_write() -> None:
    config = etree.fromstring(fixture("base.xml").encode())
    constraints = config.find("configuration/constraints")
    constraints.append(etree.Element("rsc_location", id="cli-ban-galera-bundle-on-controller-1"))
    r = restart_runner("mon-ok.xml")
    backend(r).answers[("cibadmin", "--query")] = [
        (0, etree.tostring(config, encoding="unicode"), "")
    ]
    with pytest.raises(RestartRefusedError, match="exists already"):
        pm.restart_replica(r, "galera-bundle", "controller-1", poll=0)
    assert not any(a[1] in ("--modify", "--delete") for a in backend(r).argvs())


def test_settle_waits_for_two_idle_looks() -> None:
    r = runner(
        {("crm_mon",): [(0, fixture("mon-ok.xml"), "")], ("crmadmin",): [IDLE, BUSY, IDLE, IDLE]}
    )
    pm.settle(r, 10, poll=0)
    assert [a[0] for a in backend(r).argvs()].count("crmadmin") == 4


# --------------------------------------------------------------------------- signals


def test_sigterm_raises_only_inside_and_restores() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(signals.Terminated):
        with signals.sigterm_raises():
            signal.raise_signal(signal.SIGTERM)
    assert signal.getsignal(signal.SIGTERM) == before


def test_signals_held_delivers_after_the_block() -> None:
    done = []
    with pytest.raises(signals.Terminated):
        with signals.sigterm_raises():
            with signals.signals_held():
                signal.raise_signal(signal.SIGTERM)
                done.append("cleanup ran")
    assert done == ["cleanup ran"]


def test_a_ban_another_writer_put_back_is_removed_again_while_the_replica_is_down() -> None:
    """Issue 22 item 5, seen live: ``pcs resource update`` (or ``pcs cluster cib-push``)
    replaces the configuration as it read it before the watch removed the ban, which puts the
    ban back (and an earlier restart's ban on another node); the replica would stay stopped
    until the ban's end, or another one would stop and move. The watch looks again."""
    down = _mon_down("galera-bundle-podman-1")
    r = restart_runner("mon-ok.xml", down, down, down, "mon-ok.xml")
    back = restart.bans_xml(
        "galera-bundle", ["controller-1", "controller-0"], "2030-01-01 00:00:00Z"
    )
    scope = ("cibadmin", "--query", "--scope", "constraints")
    none = (0, "<constraints/>", "")
    # A look while stopping (the ban in force is ours: left alone), then the written-back ones.
    ours = restart.bans_xml("galera-bundle", ["controller-1"], "2030-01-01 00:00:00Z")
    backend(r).answers[scope] = [(0, ours, ""), (0, back, ""), none]
    pm.restart_replica(r, "galera-bundle", "controller-1", timeout=90, poll=0, recheck=0)
    argvs = backend(r).argvs()
    assert argvs.count(BAN_DELETE) == 2  # once stopped, and once more when it came back
    earlier = BAN_DELETE[:-1] + ('<rsc_location id="cli-ban-galera-bundle-on-controller-0"/>',)
    assert argvs.count(earlier) == 1
    first_delete = argvs.index(BAN_DELETE)
    assert scope in argvs[:first_delete]  # looked while stopping, removed nothing then
    assert argvs.count(UNPINNED[0]) == 1
