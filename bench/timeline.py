"""Line up one ``pcmkimg update`` run's trace (``PCMKIMG_TRACE=1``) against the DC's own record
(``/var/log/pacemaker/pacemaker.log`` of the DC node): what each CIB write of ours made the DC
do, and when.

Pure: :func:`trace_events` and :func:`dc_events` parse the two texts into :class:`Event` s on
one clock (UTC seconds), :func:`stalls` finds the DC's controller silent for a second after a
configuration change, :func:`summary` reduces one run to the figures ``python -m bench.restarts``
prints. The sandbox's nodes log in UTC, as the host.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path


@dataclass(frozen=True)
class Event:
    when: float  # UTC seconds
    source: str  # "pcmkimg" or the daemon, e.g. "pacemaker-controld"
    text: str
    thread: str = ""


_TRACE = re.compile(r"^pcmkimg-trace (\S+) mono=\S+ (\S+) (.*)$")
# Dec 02 01:53:05.268 controller-2 pacemaker-controld  [32003] (fn) 	info: text
_LOG = re.compile(
    r"^(\w{3} [ \d]\d \d\d:\d\d:\d\d\.\d{3}) \S+ (pacemaker-\w+)\s*\[\s*\d+\] "
    r"\((\w+)\)\s+\w+: (.*)$"
)


def trace_events(text: str) -> list[Event]:
    """The trace lines of ``text`` (a run's stderr); each ends when its call ended."""
    found = []
    for line in text.splitlines():
        m = _TRACE.match(line.strip())
        if m:
            stamp, thread, what = m.groups()
            when = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
            found.append(Event(when.timestamp(), "pcmkimg", what, thread))
    return found


def dc_events(text: str, year: int) -> list[Event]:
    """The lines of a Pacemaker log (its stamps carry no year: ``year``)."""
    found = []
    for line in text.splitlines():
        m = _LOG.match(line)
        if m:
            stamp, daemon, function, what = m.groups()
            when = datetime.strptime(f"{year} {stamp}", "%Y %b %d %H:%M:%S.%f")
            found.append(
                Event(when.replace(tzinfo=timezone.utc).timestamp(), daemon, f"({function}) {what}")
            )
    return found


def within(events: Iterable[Event], start: float, end: float) -> list[Event]:
    return [e for e in events if start <= e.when <= end]


@dataclass(frozen=True)
class Stall:
    """The DC's controller silent for ``seconds`` after the change that ``cause`` names."""

    when: float
    seconds: float
    cause: str


#: What the controller logs when it reads its options again (Pacemaker 2.1: the validation of
#: stonith-watchdog-timeout in config_query_callback), after a change of crm_config.
OPTIONS_READ = "(stonith__watchdog_fencing_enabled_for_node_api)"


def stalls(events: Sequence[Event], at_least: float = 0.8) -> list[Stall]:
    """The seconds the DC's controller sat on a scheduler run it had to make: ``at_least``
    seconds or more of silence after ``S_IDLE -> S_POLICY_ENGINE``, or ending in the read of
    its options (a wait for an in-flight action is not one: the controller has nothing to
    do then)."""
    ctl = [e for e in events if e.source == "pacemaker-controld"]
    found = []
    for here, after in zip(ctl, ctl[1:]):
        gap = after.when - here.when
        waiting = "S_IDLE -> S_POLICY_ENGINE" in here.text or (
            OPTIONS_READ in after.text and "abort_transition_graph" in here.text
        )
        if waiting and gap >= at_least:
            found.append(Stall(here.when, round(gap, 3), _cause(ctl, here)))
    return found


def _cause(ctl: Sequence[Event], at: Event) -> str:
    """The last abort's reason at or before ``at``."""
    for e in reversed([c for c in ctl if c.when <= at.when]):
        if "abort_transition_graph" in e.text:
            m = re.search(r"aborted by (.*?): ", e.text)
            return m.group(1) if m else e.text[:120]
    return "?"


@dataclass(frozen=True)
class RunSummary:
    """One update run: when each of our writes landed (seconds from the lease's take) and
    what stalled the DC's controller meanwhile."""

    restart_seconds: float
    marks: dict[str, float]
    renewals: list[float]
    stalls: list[Stall]

    def slow_causes(self) -> list[str]:
        return [s.cause for s in self.stalls]


def _first(events: Sequence[Event], needle: str, thread: str | None = None) -> float | None:
    for e in events:
        if needle in e.text and (thread is None or e.thread == thread):
            return e.when
    return None


def summary(trace: Sequence[Event], dc: Sequence[Event], restart_seconds: float) -> RunSummary:
    """The marks of one run (from the lease's take): the holds placed, the unban, the
    release, done; the lease's renewals (its own thread) and the DC's stalls in between."""
    take = _first(trace, "cibadmin --patch", "MainThread")
    if take is None:
        raise ValueError("no lease taken in this trace")
    marks = {}
    for key, needle in (
        ("holds placed", "cibadmin --modify --scope configuration"),
        ("stopped (unban)", "stopping -> starting"),
        ("active (release)", "starting -> settling"),
        ("done", "settled -> done"),
    ):
        when = _first(trace, needle)
        if when is not None:
            marks[key] = round(when - take, 3)
    renewals = [
        round(e.when - take, 3)
        for e in trace
        if e.thread == "pcmkimg-lease" and "cibadmin --patch" in e.text
    ]
    end = trace[-1].when
    found = [
        Stall(round(s.when - take, 3), s.seconds, s.cause)
        for s in stalls(within(dc, take - 0.5, end + 2))
    ]
    return RunSummary(restart_seconds, marks, renewals, found)


def replica_downtime(events: Sequence[Event], container: str, since: float) -> float | None:
    """The DC's record of a restart of ``container`` after ``since``: from its ``Initiating
    stop operation`` to the confirmation of the start after it (None: not both found)."""
    stopped = next(
        (
            e.when
            for e in sorted(events, key=lambda e: e.when)
            if e.when >= since and f"Initiating stop operation {container}_stop_0" in e.text
        ),
        None,
    )
    if stopped is None:
        return None
    started = next(
        (
            e.when
            for e in sorted(events, key=lambda e: e.when)
            if e.when >= stopped and f"({container}_start_0 " in e.text and "confirmed" in e.text
        ),
        None,
    )
    return None if started is None else round(started - stopped, 3)


# --------------------------------------------------------------------------- the command


def _run_once(cl: object, ref: str, node: str) -> tuple[float, str, float]:
    """One traced ``update --node``: (wall seconds, its stderr, its restart step)."""
    import json
    import sys
    import time

    env = {
        "PCMKIMG_CONF": str(cl.conf),  # type: ignore[attr-defined]
        "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
        "PCMKIMG_TRACE": "1",
    }
    argv = [sys.executable, "-m", "pcmkimg", "--json", "update", "bench", "--image", ref]
    start = time.perf_counter()
    out = cl.run(node, [*argv, "--node", node], env=env, check=False)  # type: ignore[attr-defined]
    wall = time.perf_counter() - start
    if out.returncode != 0:
        raise RuntimeError(f"update --node exit {out.returncode}: {out.stderr[-500:]}")
    (res,) = json.loads(out.stdout)["report"]["nodes"]
    if not res["restarted"]:
        raise RuntimeError(f"update --node restarted nothing ({res['result']}): run it again")
    return wall, out.stderr, float(res["restart_seconds"])


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m bench.timeline [--name SANDBOX] [--runs N]``: N traced ``update --node``
    runs of the bench bundle on a sandbox that is up (``python -m tests.sandbox up``; the
    bundle is set up when missing), each lined up against the DC's log: when the holds were
    placed, when the DC started the stop, the lease's renewals and the DC's stalls (seconds
    from the lease's take)."""
    import argparse
    import statistics
    import time

    from bench.__main__ import BUNDLE, FLOATING, NODE, setup
    from tests.sandbox.cluster import from_state, wait_idle
    from tests.sandbox.state import load

    parser = argparse.ArgumentParser(prog="python -m bench.timeline", description=main.__doc__)
    parser.add_argument("--name", default="sb")
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args(argv)
    state = load(args.name)
    if state is None:
        parser.error(f"no sandbox {args.name} (python -m tests.sandbox --name {args.name} up)")
    cl = from_state(state)
    registry = f"127.0.0.1:{cl.registry_port}"
    if not any(r.active for r in cl.replicas(BUNDLE)):
        setup(cl, registry)
    refs = [f"{registry}/ns1/svc:1.1", f"{registry}/ns1/svc:1.0"]
    for ref in refs:
        cl.podman(NODE, "pull", "-q", ref)
    # The first run moves the replica off the image it runs now.
    running = cl.podman(NODE, "image", "inspect", "--format", "{{.Id}}", FLOATING).stdout.strip()
    if (
        running
        == cl.podman(NODE, "image", "inspect", "--format", "{{.Id}}", refs[0]).stdout.strip()
    ):
        refs.reverse()
    steps = []
    print("run  step  wall | holds  stop@DC  stopped  active  done | renewals | DC stalls")
    for i in range(args.runs):
        wall, err, step = _run_once(cl, refs[i % 2], NODE)
        time.sleep(1.5)  # the DC's log is written after the fact
        dc: list[Event] = []
        for node in cl.nodes:
            log = node.dir / "log-pacemaker" / "pacemaker.log"
            dc += dc_events(log.read_text(errors="replace"), time.gmtime().tm_year)
        dc.sort(key=lambda e: e.when)
        trace = trace_events(err)
        run = summary(trace, dc, step)
        take = _first(trace, "cibadmin --patch", "MainThread") or 0.0
        stop = next(
            (e.when - take for e in dc if e.when >= take and "Initiating stop operation" in e.text),
            None,
        )
        m = run.marks
        print(
            f"{i + 1:3d} {step:5.2f} {wall:5.2f} | {m.get('holds placed', 0):5.2f} "
            f"{stop if stop is not None else float('nan'):7.2f} "
            f"{m.get('stopped (unban)', 0):7.2f} {m.get('active (release)', 0):7.2f} "
            f"{m.get('done', 0):5.2f} | {' '.join(f'{r:.2f}' for r in run.renewals) or '-'} | "
            + " ".join(f"{s.when:.2f}+{s.seconds:.2f}" for s in run.stalls),
            flush=True,
        )
        steps.append(step)
        wait_idle(cl)
    med = statistics.median(steps)
    print(
        f"restart step: min {min(steps):.2f} median {med:.2f} max {max(steps):.2f} "
        f"(max / median {max(steps) / med:.2f})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
