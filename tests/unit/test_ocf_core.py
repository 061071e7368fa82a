"""ocf toolkit: return codes, declarations, environment parsing and logging."""

from __future__ import annotations

import io
import os
import re

import pytest

import ocf
from ocf import OCFRC, Action, Agent, OCFError, Parameter, ParamType, parse_environment
from ocf.log import Logger, facility_code

AGENT = Agent(
    name="t",
    shortdesc="test",
    parameters=[
        Parameter("state", "state", required=True),
        Parameter("count", "count", type=ParamType.INTEGER, default=3),
        Parameter("flag", "flag", type=ParamType.BOOLEAN, default=True),
        Parameter("empty_default", "x", default=""),
    ],
)


def test_uses_this_checkout() -> None:
    assert os.path.dirname(ocf.__file__) == os.path.join(
        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "ocf"
    )


def test_return_codes() -> None:
    expected = {
        "SUCCESS": 0,
        "ERR_GENERIC": 1,
        "ERR_ARGS": 2,
        "ERR_UNIMPLEMENTED": 3,
        "ERR_PERM": 4,
        "ERR_INSTALLED": 5,
        "ERR_CONFIGURED": 6,
        "NOT_RUNNING": 7,
        "RUNNING_MASTER": 8,
        "FAILED_MASTER": 9,
        "DEGRADED": 190,
        "DEGRADED_MASTER": 191,
    }
    assert {rc.name: int(rc) for rc in OCFRC} == expected


def test_ocf_error() -> None:
    err = OCFError(5, "image missing")
    assert err.rc is OCFRC.ERR_INSTALLED and err.reason == "image missing"
    assert str(err) == "ERR_INSTALLED: image missing"
    assert OCFError(42).rc == 42
    for bad in (-1, 256, True, "1"):
        with pytest.raises(ValueError):
            OCFError(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "build",
    [
        lambda: Parameter("bad-name", "x"),
        lambda: Parameter("CRM_meta_x", "x"),
        lambda: Parameter("p", "x", required=True, default="a"),
        lambda: Parameter("p", "x", type=ParamType.INTEGER, default="ten"),
        lambda: Parameter("p", "x", type=ParamType.BOOLEAN, default="maybe"),
        lambda: Parameter("p", "x", type="select"),
        lambda: Action("reload-agent", timeout=10),
        lambda: Action("start", timeout="soon"),
        lambda: Action("start", timeout=-1),
        lambda: Action("start", timeout=10, role='Promoted"'),
        lambda: Agent("a", "x", actions=[Action("start", timeout=1)]),
        lambda: Agent("a", "x", handlers={"meta-data": lambda c: 0}),
        lambda: Agent("a", "x", parameters=[Parameter("p", "x"), Parameter("p", "y")]),
        lambda: Agent("a", "x", ocf_version="2.0"),
    ],
)
def test_invalid_declarations_are_refused(build) -> None:
    with pytest.raises(ValueError):
        build()


def test_parse_environment_params_and_defaults() -> None:
    env = parse_environment(
        AGENT,
        {
            "OCF_RESKEY_state": "/s",
            "OCF_RESKEY_extra": "e",
            "OCF_RESKEY_empty_default": "",
            "OCF_RESKEY_CRM_meta_timeout": "20000",
            "OCF_RESKEY_CRM_meta_on_node": "node1",
            "OCF_RESOURCE_INSTANCE": "r1",
            "PATH": "/bin",
        },
    )
    assert env.params == {
        "state": "/s",
        "extra": "e",
        "count": "3",
        "flag": "true",
        "empty_default": "",  # given empty: the default does not apply
    }
    assert env.meta == {"timeout": "20000", "on_node": "node1"}
    assert env.node == "node1"
    assert env.resource_instance == "r1"
    assert env.config_errors(AGENT) == []


def test_parse_environment_empty() -> None:
    env = parse_environment(AGENT, {})
    assert env.resource_instance is None and env.node is None
    assert env.check_level == 0 and env.interval_ms is None
    assert env.log_facility is None and env.log_file is None and env.debug is False
    assert env.missing_required(AGENT) == ["state"]


def test_config_errors() -> None:
    env = parse_environment(
        AGENT, {"OCF_RESKEY_state": "", "OCF_RESKEY_count": "x", "OCF_RESKEY_flag": "maybe"}
    )
    errors = env.config_errors(AGENT)
    assert len(errors) == 3
    assert "required parameter state is not set" in errors[0]


@pytest.mark.parametrize(
    ("environ", "level"),
    [
        ({}, 0),
        ({"OCF_CHECK_LEVEL": "10"}, 10),
        ({"OCF_CHECK_LEVEL": ""}, 0),
        ({"OCF_RESKEY_OCF_CHECK_LEVEL": "20"}, 20),
        ({"OCF_CHECK_LEVEL": "10", "OCF_RESKEY_OCF_CHECK_LEVEL": "20"}, 10),
        ({"OCF_CHECK_LEVEL": "deep"}, 0),
        ({"OCF_CHECK_LEVEL": "-5"}, 0),
    ],
)
def test_check_level(environ: dict[str, str], level: int) -> None:
    assert parse_environment(AGENT, environ).check_level == level


@pytest.mark.parametrize(
    ("interval", "action", "probe"),
    [
        (None, "monitor", True),
        ("", "monitor", True),
        ("0", "monitor", True),
        ("10000", "monitor", False),
        ("garbage", "monitor", False),
        (None, "start", False),
        ("0", "stop", False),
    ],
)
def test_probe_detection(interval: str | None, action: str, probe: bool) -> None:
    environ = {} if interval is None else {"OCF_RESKEY_CRM_meta_interval": interval}
    assert parse_environment(AGENT, environ).is_probe(action) is probe


def test_probe_detection_bare_crm_meta_interval() -> None:
    env = parse_environment(AGENT, {"CRM_meta_interval": "5000"})
    assert env.interval_ms == 5000 and not env.is_probe("monitor")


@pytest.mark.parametrize(
    ("environ", "facility", "logfile", "debug"),
    [
        ({"HA_LOGFACILITY": "daemon", "HA_LOGFILE": "/l", "HA_debug": "1"}, "daemon", "/l", True),
        ({"HA_LOGFACILITY": "none", "HA_debug": "0"}, None, None, False),
        ({"HA_LOGFACILITY": "", "HA_LOGFILE": "", "HA_debug": ""}, None, None, False),
    ],
)
def test_log_settings(environ, facility, logfile, debug) -> None:
    env = parse_environment(AGENT, environ)
    assert (env.log_facility, env.log_file, env.debug) == (facility, logfile, debug)


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def _logger(environ: dict[str, str], stderr: io.StringIO) -> Logger:
    env = parse_environment(AGENT, {"OCF_RESOURCE_INSTANCE": "r1", **environ})
    return Logger.from_env("t", env, stderr)


def test_log_to_file(tmp_path) -> None:
    logfile = tmp_path / "agent.log"
    err = io.StringIO()
    log = _logger({"HA_LOGFILE": str(logfile)}, err)
    log.info("hello")
    log.error("two\nlines")
    log.debug("hidden without HA_debug")
    lines = logfile.read_text().splitlines()
    tag = rf"t\(r1\)\[{os.getpid()}\]"
    assert re.fullmatch(rf"\w{{3}} \d\d \d\d:\d\d:\d\d {tag}:    INFO: hello", lines[0])
    assert lines[1].endswith("ERROR: two") and lines[2].endswith(":    lines")
    assert len(lines) == 3
    assert err.getvalue() == ""  # a file is configured and stderr is no terminal


def test_log_debug_when_enabled(tmp_path) -> None:
    logfile = tmp_path / "agent.log"
    _logger({"HA_LOGFILE": str(logfile), "HA_debug": "1"}, io.StringIO()).debug("shown")
    assert "DEBUG: shown" in logfile.read_text()


def test_log_unwritable_file_is_skipped(tmp_path) -> None:
    _logger({"HA_LOGFILE": str(tmp_path / "no" / "such" / "dir")}, io.StringIO()).error("x")


def test_log_to_stderr_when_terminal(tmp_path) -> None:
    err = _Tty()
    _logger({"HA_LOGFILE": str(tmp_path / "l")}, err).warning("careful")
    assert err.getvalue() == f"t(r1)[{os.getpid()}]: WARNING: careful\n"


def test_log_to_stderr_when_nothing_configured() -> None:
    err = io.StringIO()
    _logger({}, err).info("kept")
    assert err.getvalue().endswith("INFO: kept\n")


def test_log_to_syslog(monkeypatch) -> None:
    import syslog

    calls: list[tuple] = []
    monkeypatch.setattr(syslog, "openlog", lambda *a: calls.append(("open", *a)))
    monkeypatch.setattr(syslog, "syslog", lambda *a: calls.append(("log", *a)))
    err = io.StringIO()
    log = _logger({"HA_LOGFACILITY": "local3"}, err)
    log.error("bad\x00thing")
    log.info("fine")
    assert calls == [
        ("open", f"t(r1)[{os.getpid()}]", 0, syslog.LOG_LOCAL3),
        ("log", syslog.LOG_ERR, "ERROR: bad\\0thing"),
        ("log", syslog.LOG_INFO, "INFO: fine"),
    ]
    assert err.getvalue() == ""


def test_facility_names() -> None:
    import syslog

    assert facility_code("daemon") == syslog.LOG_DAEMON
    assert facility_code("LOG_LOCAL7") == syslog.LOG_LOCAL7
    assert facility_code("bogus") == syslog.LOG_DAEMON


def test_the_run_time_classes_behave_as_dataclasses_and_enums() -> None:
    """ocf declares them with dataclass and Enum for type checkers and runs them on light
    stand-ins (ocf._light): the behaviour agents rely on is the same."""
    import copy
    import pickle

    from ocf import Level

    param = Parameter("count", "count", type="integer", default=3)
    assert param.type is ParamType.INTEGER and param.type.value == "integer"
    assert param == Parameter("count", "count", type=ParamType.INTEGER, default=3)
    assert param != Parameter("count", "count", type=ParamType.INTEGER, default=4)
    assert hash(param) == hash(Parameter("count", "count", type="integer", default=3))
    assert repr(param).startswith("Parameter(name='count', shortdesc='count', longdesc=''")
    with pytest.raises(AttributeError):
        param.name = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        Parameter()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Parameter("a", "b", bogus=1)  # type: ignore[call-arg]
    agent = Agent("a", "b")
    assert agent.handlers == {} and agent.handlers is not Agent("a", "b").handlers

    assert OCFRC(7) is OCFRC.NOT_RUNNING and OCFRC.NOT_RUNNING == 7 and OCFRC["DEGRADED"] == 190
    assert repr(OCFRC.DEGRADED) == "<OCFRC.DEGRADED: 190>" and str(OCFRC.DEGRADED) == "190"
    assert f"{OCFRC.ERR_ARGS}" == "2" and {0: "ok"}[OCFRC.SUCCESS] == "ok"
    assert len(OCFRC) == 12 and OCFRC.SUCCESS in OCFRC and list(OCFRC)[0] is OCFRC.SUCCESS
    with pytest.raises(ValueError):
        OCFRC(42)
    assert ParamType("boolean") is ParamType.BOOLEAN and ParamType.STRING == "string"
    assert Level("INFO") is Level.INFO and Level.INFO.name == "INFO"
    assert repr(Level.INFO) == "<Level.INFO: 'INFO'>"
    assert copy.deepcopy(OCFRC.ERR_PERM) is OCFRC.ERR_PERM
    assert pickle.loads(pickle.dumps(ParamType.INTEGER)) is ParamType.INTEGER
    with pytest.raises(AttributeError):
        OCFRC.SUCCESS = 1  # type: ignore[misc]


def test_the_light_dataclass_compares_and_replaces_as_dataclasses_does() -> None:
    """What pcmkimg's records need of the stand-in beyond the toolkit's own use
    (:mod:`pcmkimg.records`): a field left out of comparison, and ``replace``, which makes
    the copy through ``__init__`` so that ``__post_init__`` checks it again."""
    from ocf._light import dataclass, field, replace

    checked: list[int] = []

    @dataclass(frozen=True)
    class Record:
        name: str
        count: int = 0
        note: str = field(default="", compare=False, repr=False)

        def __post_init__(self) -> None:
            checked.append(self.count)

    one = Record("a", 1, note="x")
    assert one == Record("a", 1, note="y") and hash(one) == hash(Record("a", 1))
    assert one != Record("a", 2) and repr(one) == f"{Record.__qualname__}(name='a', count=1)"
    two = replace(one, count=2)
    assert (two.name, two.count, two.note) == ("a", 2, "x") and checked == [1, 1, 1, 2, 2]
    assert one.count == 1
    with pytest.raises(TypeError):
        replace(one, bogus=1)
