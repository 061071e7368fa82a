"""PCMKIMG_TRACE (issue 23): each Pacemaker tool call on stderr with its times, to line up
against the DC's log; nothing at all without it. bench.timeline reads those lines back with
the DC's own."""

from __future__ import annotations

import pytest

from bench import timeline as tl
from pcmkimg.adapters import trace
from tests.unit.test_pacemaker import runner

WALL = 1796176384.277615  # 2026-12-02T01:53:04.277615Z


def test_a_trace_line_carries_utc_to_the_microsecond_mono_thread_and_text() -> None:
    line = trace.line("0.012s rc=0 cibadmin --query", wall=WALL, mono=11127.8261)
    assert line == (
        "pcmkimg-trace 2026-12-02T01:53:04.277615Z mono=11127.826 MainThread "
        "0.012s rc=0 cibadmin --query"
    )
    (event,) = tl.trace_events(line)
    assert event.when == pytest.approx(WALL, abs=1e-6)
    assert (event.thread, event.text) == ("MainThread", "0.012s rc=0 cibadmin --query")


@pytest.mark.parametrize(("value", "on"), [("1", True), ("yes", True), ("0", False), ("", False)])
def test_the_variable_turns_it_on(monkeypatch: pytest.MonkeyPatch, value: str, on: bool) -> None:
    monkeypatch.setenv(trace.VARIABLE, value)
    assert trace.enabled() is on


def test_every_tool_call_is_traced_with_an_xml_argument_shortened(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    r = runner({("cibadmin",): [(0, "", "")], ("crm_mon",): [(3, "", "boom")]})
    monkeypatch.setenv(trace.VARIABLE, "1")
    r.run(["cibadmin", "--modify", "--xml-text", "<configuration><constraints/></configuration>"])
    r.run(["crm_mon", "-1"], check=False)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2
    assert lines[0].endswith("rc=0 cibadmin --modify --xml-text <configuration>...")
    assert lines[1].endswith("rc=3 crm_mon -1")
    assert all(line.startswith("pcmkimg-trace ") for line in lines)


def test_without_the_variable_nothing_is_written(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(trace.VARIABLE, raising=False)
    runner({("crm_mon",): [(0, "", "")]}).run(["crm_mon", "-1"])
    assert capsys.readouterr().err == ""


CTL = "pacemaker-controld  [32003]"


def log_line(stamp: str, who: str, function: str, text: str) -> str:
    """A line of pacemaker.log as Pacemaker 2.1 writes it."""
    return f"Dec 02 {stamp} controller-2 {who} ({function}) \tinfo: {text}"


DC_LOG = "\n".join(
    [
        log_line(
            "01:53:04.256",
            CTL,
            "abort_transition_graph",
            "Transition 5 aborted by cib-bootstrap-options-pcmkimg-lease doing create "
            "pcmkimg-lease=x: Configuration change | cib=0.17.0",
        ),
        log_line(
            "01:53:04.256", CTL, "do_state_transition", "State transition S_IDLE -> S_POLICY_ENGINE"
        ),
        log_line(
            "01:53:04.544", "pacemaker-based     [31998]", "cib_perform_op", "Diff: +++ 0.18.0"
        ),
        log_line(
            "01:53:05.268",
            CTL,
            "stonith__watchdog_fencing_enabled_for_node_api",
            "Cluster does not have watchdog fencing device",
        ),
        log_line(
            "01:53:05.268",
            CTL,
            "abort_transition_graph",
            "Transition 5 aborted by meta_attributes.b-pin 'create': Configuration change",
        ),
        log_line("01:53:05.272", CTL, "execute_rsc_action", "Initiating stop operation b_stop_0"),
        log_line(
            "01:53:05.692", CTL, "process_graph_event", "Transition 6 action 7: confirmed: ok"
        ),
        log_line(
            "01:53:07.080",
            CTL,
            "abort_transition_graph",
            "Transition 9 aborted by deletion of rsc_location[@id='x']: Configuration change",
        ),
        log_line(
            "01:53:08.088", CTL, "process_graph_event", "Transition 9 action 6: confirmed: ok"
        ),
    ]
)


def test_the_dc_log_is_read_on_the_same_clock_and_its_stalls_found() -> None:
    events = tl.dc_events(DC_LOG, 2026)
    assert len(events) == 9
    assert events[0].when == pytest.approx(WALL - 0.021615, abs=1e-6)
    (stall,) = tl.stalls(events)  # the last gap is a start in flight, not a stall
    assert stall.seconds == pytest.approx(1.012)
    assert stall.cause.startswith("cib-bootstrap-options-pcmkimg-lease doing create")


def test_a_run_is_summed_up_from_the_lease_take() -> None:
    trace_text = "\n".join(
        trace.line(text, wall=WALL + offset, mono=offset)
        for offset, text in (
            (0.0, "0.020s rc=0 cibadmin --patch --xml-pipe"),
            (0.3, "0.020s rc=0 cibadmin --modify --scope configuration --xml-text <c>..."),
            (1.5, "restart b on n: stopping -> starting unban"),
            (2.2, "restart b on n: starting -> settling release"),
            (2.7, "restart b on n: settled -> done "),
        )
    )
    run = tl.summary(tl.trace_events(trace_text), tl.dc_events(DC_LOG, 2026), 2.4)
    assert run.marks == {
        "holds placed": 0.3,
        "stopped (unban)": 1.5,
        "active (release)": 2.2,
        "done": 2.7,
    }
    assert run.renewals == []
    assert [(s.when, s.seconds) for s in run.stalls] == [(-0.022, 1.012)]
