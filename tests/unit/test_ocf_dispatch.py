"""ocf toolkit: dispatch rules, exit reasons and handler failures."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

from ocf import OCFRC, Action, Agent, Context, OCFError, Parameter, ParamType, run

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "tests" / "unit" / "ocf_example_agent" / "dummy"
PREFIX = "ocf-exit-reason:"

Calls = list[tuple[str, Context]]


def _agent(calls: Calls, **handlers) -> Agent:
    def record(name: str):
        def handler(ctx: Context) -> int:
            calls.append((name, ctx))
            return OCFRC.NOT_RUNNING if name == "monitor" else OCFRC.SUCCESS

        return handler

    merged = {name: record(name) for name in ("start", "stop", "monitor")}
    merged.update(handlers)
    return Agent(
        name="t",
        shortdesc="test",
        parameters=[
            Parameter("state", "state", required=True),
            Parameter("count", "count", type=ParamType.INTEGER, default=1),
        ],
        actions=[Action(n, timeout=20) for n in ("start", "stop", "monitor")],
        handlers=merged,
    )


def _run(agent: Agent, argv: list[str], environ: Mapping[str, str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = run(agent, argv, environ, stdout=out, stderr=err)
    return rc, out.getvalue(), err.getvalue()


def _reasons(stderr: str) -> list[str]:
    return [line[len(PREFIX) :] for line in stderr.splitlines() if line.startswith(PREFIX)]


GOOD = {"OCF_RESKEY_state": "/tmp/x", "OCF_RESOURCE_INSTANCE": "r1"}


def test_meta_data_touches_nothing(tmp_path) -> None:
    calls: Calls = []

    class Exploding(dict):
        def __getitem__(self, key):
            raise AssertionError("meta-data read the environment")

        get = items = __getitem__

    rc, out, err = _run(_agent(calls), ["meta-data"], Exploding())
    assert rc == 0 and out.startswith("<?xml") and err == "" and calls == []


@pytest.mark.parametrize("action", ["usage", "help", "--help", "-h"])
def test_usage(action: str) -> None:
    rc, out, err = _run(_agent([]), [action], {})
    assert rc == 0 and out == "usage: t {start|stop|monitor|validate-all|meta-data|usage}\n"
    assert err == ""


@pytest.mark.parametrize("argv", [[], ["start", "extra"]])
def test_wrong_argument_count(argv: list[str]) -> None:
    rc, out, err = _run(_agent([]), argv, GOOD)
    assert rc == OCFRC.ERR_ARGS and out == "" and err.startswith("usage: t ")


@pytest.mark.parametrize("action", ["notify", "promote", "reload", "bogus", "status"])
def test_unknown_action_is_unimplemented(action: str) -> None:
    calls: Calls = []
    rc, out, err = _run(_agent(calls), [action], GOOD)
    assert rc == OCFRC.ERR_UNIMPLEMENTED == 3 and out == "" and "usage: t {" in err
    assert calls == []


def test_handler_gets_context() -> None:
    calls: Calls = []
    environ = {**GOOD, "OCF_RESKEY_CRM_meta_on_node": "n1", "OCF_CHECK_LEVEL": "10"}
    rc, _, err = _run(_agent(calls), ["start"], environ)
    assert rc == 0 and err == ""
    ((name, ctx),) = calls
    assert name == "start" and ctx.action == "start" and not ctx.is_probe
    assert ctx.param("state") == "/tmp/x" and ctx.int_param("count") == 1
    assert (ctx.instance, ctx.node, ctx.check_level) == ("r1", "n1", 10)
    assert ctx.config_errors == ()


@pytest.mark.parametrize("action", ["start", "validate-all"])
def test_missing_required_is_not_configured(action: str) -> None:
    calls: Calls = []
    rc, out, err = _run(_agent(calls), [action], {"OCF_RESKEY_state": ""})
    assert rc == OCFRC.ERR_CONFIGURED == 6 and calls == []
    assert _reasons(err) == ["required parameter state is not set"]


def test_monitor_missing_required_is_not_configured() -> None:
    environ = {"OCF_RESKEY_CRM_meta_interval": "10000"}
    rc, _, err = _run(_agent([]), ["monitor"], environ)
    assert rc == OCFRC.ERR_CONFIGURED and len(_reasons(err)) == 1


def test_bad_integer_is_not_configured() -> None:
    rc, _, err = _run(_agent([]), ["start"], {**GOOD, "OCF_RESKEY_count": "many"})
    assert rc == OCFRC.ERR_CONFIGURED
    assert _reasons(err) == ["parameter count: 'many' is not an integer"]


@pytest.mark.parametrize(
    ("action", "interval"), [("stop", "0"), ("monitor", "0"), ("monitor", None)]
)
def test_stop_and_probe_are_lenient(action: str, interval: str | None) -> None:
    calls: Calls = []
    environ = {} if interval is None else {"OCF_RESKEY_CRM_meta_interval": interval}
    rc, _, err = _run(_agent(calls), [action], environ)
    ((name, ctx),) = calls
    assert name == action and ctx.config_errors == ("required parameter state is not set",)
    assert rc == (OCFRC.NOT_RUNNING if action == "monitor" else OCFRC.SUCCESS)
    assert _reasons(err) == [] and "WARNING:" in err  # logged to stderr: nothing else set


def test_validate_all_without_handler_checks_parameters() -> None:
    assert _run(_agent([]), ["validate-all"], GOOD)[0] == 0


def test_validate_all_handler() -> None:
    def validate(ctx: Context) -> int:
        raise OCFError(OCFRC.ERR_CONFIGURED, "state must be absolute")

    rc, _, err = _run(_agent([], **{"validate-all": validate}), ["validate-all"], GOOD)
    assert rc == 6 and _reasons(err) == ["state must be absolute"]


def test_ocf_error_gives_code_and_one_line_reason() -> None:
    def start(ctx: Context) -> int:
        raise OCFError(OCFRC.ERR_INSTALLED, "image\nmissing\r\x1b[31m here ")

    rc, _, err = _run(_agent([], start=start), ["start"], GOOD)
    assert rc == OCFRC.ERR_INSTALLED
    assert _reasons(err) == ["image missing [31m here"]


def test_ocf_error_without_reason() -> None:
    def start(ctx: Context) -> int:
        raise OCFError(OCFRC.ERR_PERM)

    rc, _, err = _run(_agent([], start=start), ["start"], GOOD)
    assert rc == OCFRC.ERR_PERM and _reasons(err) == []


def test_only_the_first_exit_reason_is_printed(tmp_path) -> None:
    def start(ctx: Context) -> int:
        ctx.exit_reason("first")
        raise OCFError(OCFRC.ERR_GENERIC, "second")

    logfile = tmp_path / "log"
    rc, _, err = _run(_agent([], start=start), ["start"], {**GOOD, "HA_LOGFILE": str(logfile)})
    assert rc == 1 and _reasons(err) == ["first"] and err.count("\n") == 1
    log = logfile.read_text()
    assert "ERROR: first" in log and "ERROR: second" in log


def test_exception_becomes_generic_error_with_reason(tmp_path) -> None:
    def start(ctx: Context) -> int:
        raise RuntimeError("socket\ngone")

    logfile = tmp_path / "log"
    rc, _, err = _run(_agent([], start=start), ["start"], {**GOOD, "HA_LOGFILE": str(logfile)})
    assert rc == OCFRC.ERR_GENERIC
    assert _reasons(err) == ["start failed: RuntimeError: socket gone"]
    assert "Traceback" not in err and "Traceback (most recent call last):" in logfile.read_text()


@pytest.mark.parametrize("value", [None, True, "0", 300, -1])
def test_handler_returning_no_code_is_generic_error(value: object) -> None:
    rc, _, err = _run(_agent([], monitor=lambda ctx: value), ["monitor"], GOOD)
    assert rc == OCFRC.ERR_GENERIC and len(_reasons(err)) == 1


def test_bad_typed_param_in_handler_is_not_configured() -> None:
    agent = Agent(
        "t",
        "t",
        parameters=[Parameter("on", "b", type=ParamType.BOOLEAN)],
        actions=[Action("start", timeout=5)],
        handlers={"start": lambda ctx: int(ctx.bool_param("other"))},
    )
    rc, _, err = _run(agent, ["start"], {"OCF_RESKEY_other": "maybe"})
    assert rc == 6
    assert [r.split(" (")[0] for r in _reasons(err)] == [
        "parameter other: 'maybe' is not a boolean"
    ]


def test_exit_reason_prefix_override() -> None:
    def start(ctx: Context) -> int:
        raise OCFError(1, "x")

    _, _, err = _run(_agent([], start=start), ["start"], {**GOOD, "OCF_EXIT_REASON_PREFIX": "R:"})
    assert err == "R:x\n"


def _script(args: list[str], environ: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(EXAMPLE), *args],
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **environ},
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_main_in_a_script(tmp_path) -> None:
    state = tmp_path / "state"
    environ = {"OCF_RESKEY_state": str(state), "OCF_RESKEY_CRM_meta_interval": "10000"}
    assert _script(["monitor"], environ).returncode == 7
    assert _script(["start"], environ).returncode == 0 and state.exists()
    assert _script(["monitor"], {**environ, "OCF_RESKEY_degraded": "yes"}).returncode == 190
    failed = _script(["monitor"], {**environ, "OCF_RESKEY_fail_monitor": "1"})
    assert failed.returncode == 1
    assert failed.stderr.splitlines() == [f"{PREFIX}monitor told to fail by fail_monitor"]
    assert _script(["stop"], {}).returncode == 0  # stop without parameters: nothing to stop
    assert _script(["bogus"], environ).returncode == 3
    assert _script([], environ).returncode == 2


def test_unreadable_environment_is_generic_error() -> None:
    class Broken(dict):
        def items(self):
            raise OSError("environment\nbroken")

    rc, _, err = _run(_agent([]), ["start"], Broken())
    assert rc == OCFRC.ERR_GENERIC
    assert _reasons(err) == ["start failed: OSError: environment broken"]
