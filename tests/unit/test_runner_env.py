"""The tools' environment (no CIB_* variable reaches them), the offline mode's rules, the
snapshot read (the configuration alone, crm_mon, one version), and the early read of status."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from lxml import etree

from pcmkimg import wiring
from pcmkimg.adapters import pacemaker as pm
from pcmkimg.adapters.errors import CibEnvironmentError
from pcmkimg.adapters.runner import read_early, runner_for
from pcmkimg.core import cib, lease
from tests import fixtures
from tests.unit.test_pacemaker import Recorded

ALL_CIB_VARS = {
    "CIB_file": "/leaked.xml",
    "CIB_shadow": "experiment",
    "CIB_shadow_dir": "/tmp/shadows",
    "CIB_server": "10.0.0.9",
    "CIB_port": "1234",
    "CIB_user": "hacluster",
    "CIB_passwd": "s3cret",
    "CIB_encrypted": "false",
}


def test_no_cib_variable_reaches_the_tools(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in ALL_CIB_VARS.items():
        monkeypatch.setenv(name, value)
    env = pm.Runner().env()
    assert not [k for k in env if k.startswith("CIB_")]
    assert env["LC_ALL"] == "C"
    offline = pm.Runner(cib_file="/tmp/saved.xml").env()
    assert [k for k in offline if k.startswith("CIB_")] == ["CIB_file"]
    assert offline["CIB_file"] == "/tmp/saved.xml"


@pytest.mark.parametrize("read_only", [True, False])
@pytest.mark.parametrize("name", sorted(set(ALL_CIB_VARS) - {"CIB_file"}))
def test_a_shadow_or_remote_cib_is_refused_naming_the_variable(name: str, read_only: bool) -> None:
    with pytest.raises(CibEnvironmentError) as err:
        runner_for(None, read_only=read_only, environ={name: ALL_CIB_VARS[name]})
    text = err.value.one_line()
    assert name in text and "unset" in text
    assert ALL_CIB_VARS[name] not in text.replace(name, "")  # the value (a password) unprinted


def test_cib_file_is_the_offline_mode_of_read_only_commands(tmp_path: Path) -> None:
    saved = tmp_path / "cib.xml"
    saved.write_text(fixtures.text("base.xml"))
    other = tmp_path / "other.xml"
    other.write_text(fixtures.text("base.xml"))
    assert runner_for(None, read_only=True, environ={}) == pm.Runner()
    assert runner_for(None, read_only=True, environ={"CIB_file": str(saved)}).cib_file == str(saved)
    # --cib-file wins over CIB_file; an empty CIB_file is no CIB_file
    given = runner_for(str(other), read_only=True, environ={"CIB_file": str(saved)})
    assert given.cib_file == str(other) and given.offline
    assert not runner_for(None, read_only=True, environ={"CIB_file": ""}).offline
    for path, env in ((str(saved), {}), (None, {"CIB_file": str(saved)})):
        with pytest.raises(CibEnvironmentError, match="only status and check") as err:
            runner_for(path, read_only=False, environ=env)
        assert err.value.family is not None and err.value.family.__name__ == "BadInput"
    with pytest.raises(CibEnvironmentError, match="no such file"):
        runner_for(str(tmp_path / "absent.xml"), read_only=True, environ={})


def _head(epoch: int) -> str:
    return f'<cib admin_epoch="0" epoch="{epoch}" num_updates="7" validate-with="pacemaker-3.9"/>'


def _section() -> str:
    whole = cib.parse_cib(fixtures.text("status-ok.xml"))
    return etree.tostring(whole.find("configuration"), encoding="unicode")


LEASE_QUERY = (
    "cibadmin",
    "--query",
    "--xpath",
    "/cib/status/tickets/ticket_state[@id='pcmkimg-lease']",
)
NO_SUCH = (105, "", "Call cib_query failed: No such device or address")


def _snapshot_runner(heads: list[int], ticket: tuple[int, str, str] = NO_SUCH) -> pm.Runner:
    answers = {
        ("cibadmin", "--query", "--no-children"): [(0, _head(e), "") for e in heads],
        ("cibadmin", "--query", "--scope", "configuration"): [(0, _section(), "")],
        ("crm_mon",): [(0, fixtures.text("mon-ok.xml"), "")],
        LEASE_QUERY: [ticket],
    }
    return pm.Runner(backend=Recorded(answers))  # type: ignore[arg-type]


HELD = lease.Lease("controller-1", 42, "t0k", 30.0, 2, 1_800_000_000.0)


def test_read_cluster_shows_the_lease_of_the_status_section_and_nothing_else_of_it() -> None:
    state = f'<ticket_state id="pcmkimg-lease" lease="{HELD.encode()}"/>'
    cluster = pm.read_cluster(_snapshot_runner([24, 24], (0, state, "")))
    assert lease.read(cluster.config) == HELD
    assert [el.tag for el in cluster.config.find("status").iter()] == [
        "status",
        "tickets",
        "ticket_state",
    ]
    with pytest.raises(pm.ClusterUnreachableError):
        pm.read_cluster(_snapshot_runner([24, 24], (102, "", "Could not connect")))


def test_read_cluster_reads_the_configuration_alone_under_its_version() -> None:
    r = _snapshot_runner([24, 24])
    cluster = pm.read_cluster(r)
    calls = r.backend.argvs()  # type: ignore[attr-defined]
    version = ("cibadmin", "--query", "--no-children")
    assert calls[0] == calls[4] == version  # the configuration and crm_mon (at once) between
    assert set(calls[1:4]) == {
        ("cibadmin", "--query", "--scope", "configuration"),
        ("crm_mon", "-1", "--output-as=xml"),
        LEASE_QUERY,  # the update lease's ticket state alone; none here (rc 105)
    }
    assert len(calls) == 5
    assert ("cibadmin", "--query") not in calls  # never the whole CIB with its status
    assert cib.cib_version(cluster.config) == cib.CibVersion(0, 24, 7)
    assert cluster.config.find("status") is None
    assert [b.id for b in cib.bundles(cluster.config)]  # the model reads it as a CIB
    assert cluster.status.dc == "controller-0"


def test_read_cluster_reads_again_when_the_configuration_changed_meanwhile() -> None:
    r = _snapshot_runner([24, 25, 25, 25])
    cluster = pm.read_cluster(r)
    assert cib.cib_version(cluster.config).epoch == 25
    assert r.backend.argvs().count(("crm_mon", "-1", "--output-as=xml")) == 2  # type: ignore[attr-defined]


def test_offline_the_saved_cib_is_read_once_and_its_status_dropped() -> None:
    answers = {
        ("cibadmin", "--query"): [(0, fixtures.text("status-ok.xml"), "")],
        ("crm_mon",): [(0, fixtures.text("mon-ok.xml"), "")],
    }
    r = pm.Runner(cib_file="/tmp/saved.xml", backend=Recorded(answers))  # type: ignore[arg-type]
    cluster = pm.read_cluster(r)
    assert r.backend.argvs() == [  # type: ignore[attr-defined]
        ("cibadmin", "--query"),
        ("crm_mon", "-1", "--output-as=xml"),
    ]
    assert (
        cluster.config.find("status") is None and cluster.config.find("configuration") is not None
    )
    saved = lease.write(cib.parse_cib(fixtures.text("status-ok.xml")), HELD).cib_xml().decode()
    answers[("cibadmin", "--query")] = [(0, saved, "")]
    cluster = pm.read_cluster(pm.Runner(cib_file="/tmp/saved.xml", backend=Recorded(answers)))  # type: ignore[arg-type]
    assert lease.read(cluster.config) == HELD  # the lease's ticket state, alone of the status
    assert cluster.config.find("status/node_state") is None


# ------------------------------------------------------------------------ the early read


def test_an_early_read_is_the_ports_first_read_and_only_its_first() -> None:
    """``status`` starts its snapshot read before it imports the model (pcmkimg.cli): the
    port's first read_cluster judges those answers and runs no tool of its own; a later read
    is a fresh one."""
    r = _snapshot_runner([24, 24])
    port = pm.Pacemaker(r, early=read_early(r))
    first = port.read_cluster()
    assert len(r.backend.argvs()) == 5  # type: ignore[attr-defined]  # the lease's ticket too
    assert cib.cib_version(first.config) == cib.CibVersion(0, 24, 7)
    assert first.status.dc == "controller-0"
    port.read_cluster()
    assert len(r.backend.argvs()) == 10  # type: ignore[attr-defined]


def test_an_early_read_that_saw_the_configuration_change_is_read_again() -> None:
    r = _snapshot_runner([24, 25, 25, 25])
    cluster = pm.Pacemaker(r, early=read_early(r)).read_cluster()
    assert cib.cib_version(cluster.config).epoch == 25
    assert r.backend.argvs().count(("crm_mon", "-1", "--output-as=xml")) == 2  # type: ignore[attr-defined]


def test_an_early_reads_failure_is_the_reads_failure() -> None:
    stderr = "Could not connect to the CIB: Transport endpoint is not connected"
    r = pm.Runner(backend=Recorded({("cibadmin",): [(102, "", stderr)]}))  # type: ignore[arg-type]
    port = pm.Pacemaker(r, early=read_early(r))
    with pytest.raises(pm.ClusterUnreachableError, match="Transport endpoint"):
        port.read_cluster()
    assert r.backend.argvs() == [("cibadmin", "--query", "--no-children")]  # type: ignore[attr-defined]


def loaded(modules: str, prefixes: tuple[str, ...]) -> list[str]:
    """The modules named by ``prefixes`` that importing ``modules`` (comma-separated) loads,
    in a fresh interpreter."""
    code = (
        f"import sys, {modules}\n"
        f"print(sorted(m for m in sys.modules if m.startswith({prefixes!r})))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return list(ast.literal_eval(out.stdout.strip()))


def test_the_cli_starts_its_read_before_it_imports_the_model() -> None:
    """What ``pcmkimg`` imports before ``status`` starts its read (the CLI, the runner) holds
    neither lxml nor the CIB model nor the configuration's reader: those load while the tools
    run (docs/benchmarks.md, budget 5)."""
    heavy = ("lxml", "pcmkimg.core.cib", "pcmkimg.core.lease", "pcmkimg.core.plan")
    heavy += ("pcmkimg.adapters.pacemaker", "pcmkimg.adapters.config", "pcmkimg.workflows")
    assert loaded("pcmkimg.cli, pcmkimg.adapters.runner", heavy) == []


def test_status_loads_neither_dataclasses_nor_the_ocf_toolkit() -> None:
    """``status``'s modules make their record classes with the light stand-in
    (:mod:`pcmkimg.records`): the standard decorator compiled each class's methods at import
    (about 0.6 ms a class, some 60 on this path); and the stand-in loads nothing else of the
    OCF toolkit (docs/benchmarks.md, budget 5)."""
    status = "pcmkimg.cli, pcmkimg.workflows.status, pcmkimg.workflows.check, "
    status += "pcmkimg.adapters.pacemaker, "
    status += "pcmkimg.adapters.config, pcmkimg.adapters.storeview, pcmkimg.core.lease"
    assert loaded(status, ("dataclasses", "ocf")) == ["ocf", "ocf._light"]


def test_only_a_live_context_reads_early(monkeypatch: pytest.MonkeyPatch) -> None:
    """A runner that can't be made (a CIB_shadow) starts nothing and raises where it did (when
    the context is made); the tests' fake contexts never start a read of their own."""
    monkeypatch.setenv("CIB_shadow", "experiment")
    env = wiring.Env(False, None, "/var/lib/pcmkimg", command="status")
    env.read_early()
    assert env.early is None
    with pytest.raises(CibEnvironmentError):
        env.runner  # noqa: B018
    monkeypatch.delenv("CIB_shadow")
    faked = wiring.Env(
        False,
        None,
        "/var/lib/pcmkimg",
        command="status",
        contexts=lambda e, p: None,  # type: ignore[arg-type,return-value]
    )
    faked.read_early()
    assert faked.early is None


def test_the_runners_lease_ticket_is_the_leases() -> None:
    """The runner's read asks for the lease's ticket state, without loading the lease module."""
    from pcmkimg.adapters import runner

    assert runner.TICKET_ARGV[-1].endswith(f"ticket_state[@id='{lease.TICKET}']")
