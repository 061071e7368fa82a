"""The one adapter for the Pacemaker command-line tools.

Every external call goes through a :class:`Runner` (:mod:`pcmkimg.adapters.runner`):
argument lists only (never a shell), a timeout on every call, ``LC_ALL=C``,
stderr captured and mapped to one error type per failure kind. The runner takes an optional
argv ``prefix`` (e.g. ``nsenter ... --`` to run the tools on a test node; empty in production)
and an optional ``cib_file`` for offline work on a saved CIB (passed as ``CIB_file``;
operations that need a live cluster refuse it).

The operations are plain functions of a runner. They parse what the tools print with the pure
model in :mod:`pcmkimg.core.cib` and apply its :class:`~pcmkimg.core.cib.CibChange` patches with
``cibadmin --patch``, which Pacemaker applies only to a CIB of exactly the patch's source
version: a CIB that changed in between is refused (:class:`CibChangedError`).

A restart is "ban, watch, clear, watch, verify", run here with ``cibadmin``, ``crm_mon`` and
``crmadmin`` (not ``crm_resource --restart``: its 2 s ticks, a replica moved to a free node,
and rc 105 on Pacemaker 3.0): :func:`restart_replica`. Its bans carry a lifetime and are
removed by id on every exit path, SIGINT and SIGTERM included.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime, timezone

from lxml import etree

from pcmkimg import LEASE_TICKET
from pcmkimg.adapters import trace
from pcmkimg.adapters.early import Early
from pcmkimg.adapters.errors import (
    BanNotRemovedError,
    CibChangedError,
    ClusterUnreachableError,
    OfflineError,
    PacemakerError,
    PacemakerTimeoutError,
    RestartFailedError,
)
from pcmkimg.adapters.runner import (
    CALL_SLACK,
    FIX_ROOT,
    RC_NOSUCH,
    RC_TIMEOUT,
    RawSnapshot,
    Runner,
    ToolResult,
    read_snapshot,
    tool_error,
)
from pcmkimg.adapters.signals import signals_held, sigterm_raises
from pcmkimg.core import cib, plan, restart
from pcmkimg.core import commands as cmd
from pcmkimg.core.errors import CibStructureError
from pcmkimg.records import dataclass, field

log = logging.getLogger(__name__)


def _need_live(runner: Runner, what: str) -> None:
    if runner.offline:
        raise OfflineError(
            f"{what} needs a live cluster, not the CIB file {runner.cib_file}",
            "run it on a cluster node without --cib-file",
        )


def query_cib(runner: Runner) -> cib.Element:
    """The whole CIB (``cibadmin --query``)."""
    return cib.parse_cib(runner.run(["cibadmin", "--query"]).stdout)


def status_xml(runner: Runner) -> cib.Element:
    """``crm_mon -1 --output-as=xml``, parsed."""
    return cib.parse_crm_mon(runner.run(["crm_mon", "-1", "--output-as=xml"]).stdout)


def status(runner: Runner) -> cib.ClusterStatus:
    return cib.cluster_status(status_xml(runner))


def push(runner: Runner, change: cib.CibChange) -> None:
    """Apply one atomic patch; :class:`CibChangedError` if the CIB is no longer its base."""
    if change.empty:
        return
    runner.run(["cibadmin", "--patch", "--xml-pipe"], stdin=change.patch_xml().decode())


def update_cib(
    runner: Runner,
    edit: Callable[[cib.Element], cib.CibChange],
    *,
    attempts: int = 10,
    pause: float = 0.2,
) -> cib.CibChange:
    """Read, edit, push; again on :class:`CibChangedError` (the CIB moves on its own: status
    updates bump ``num_updates``). ``edit`` may raise to give up. Returns the applied change."""
    for attempt in range(1, attempts + 1):
        change = edit(query_cib(runner))
        try:
            push(runner, change)
        except CibChangedError:
            if attempt == attempts:
                raise
            time.sleep(pause * attempt)
            continue
        return change
    raise AssertionError("unreachable")


def local_node(runner: Runner) -> str:
    """This node's Pacemaker name (``crm_node -n``)."""
    _need_live(runner, "finding the local node")
    name = runner.run(["crm_node", "-n"]).stdout.strip()
    if not name:
        raise ClusterUnreachableError(
            "crm_node -n printed no node name", "start the cluster on this node", argv=["crm_node"]
        )
    return name


# --------------------------------------------------------------------------- resources


def _node_args(node: str | None) -> list[str]:
    return ["--node", node] if node else []


def cleanup(runner: Runner, resource: str, node: str | None = None) -> None:
    """Forget past failures of ``resource`` (on ``node``), so Pacemaker retries it."""
    _need_live(runner, "crm_resource --cleanup")
    runner.run(["crm_resource", "--cleanup", "--resource", resource, *_node_args(node)])


def refresh(runner: Runner, resource: str, node: str | None = None) -> None:
    """Forget the whole history of ``resource`` (on ``node``): Pacemaker re-probes it."""
    _need_live(runner, "crm_resource --refresh")
    runner.run(["crm_resource", "--refresh", "--resource", resource, *_node_args(node)])


def wait(runner: Runner, timeout: float) -> None:
    """Wait until the cluster settles (``crm_resource --wait``)."""
    _need_live(runner, "crm_resource --wait")
    seconds = max(1, int(timeout))
    runner.run(["crm_resource", "--wait", f"--timeout={seconds}s"], timeout=seconds + CALL_SLACK)


# --------------------------------------------------------------------------- node attributes


def _attr_args(node: str, name: str) -> list[str]:
    return ["crm_attribute", "--lifetime", "reboot", "--node", node, "--name", name]


def set_node_attribute(runner: Runner, node: str, name: str, value: str) -> None:
    """Set a transient (until reboot) node attribute."""
    runner.run([*_attr_args(node, name), "--update", value])


def delete_node_attribute(runner: Runner, node: str, name: str) -> None:
    """Delete a transient node attribute (nothing happens when it is not set)."""
    runner.run([*_attr_args(node, name), "--delete"])


# --------------------------------------------------------------------------- restart

POLL = 0.1  # seconds between two looks at the cluster while a restart or a settle runs
RECHECK = 1.0
"""Seconds between two looks, while a restart is watched, for a ban of ours another writer wrote
back (:func:`_written_back`)."""


@dataclass(frozen=True)
class RestartReport:
    """What :func:`restart_replica` did."""

    bundle: str
    node: str
    replica: int
    container: str  # the replica's container resource, e.g. "galera-bundle-podman-1"
    seconds: float
    stopped_after: float = 0.0  # seconds from the ban until the replica ran nowhere
    active_after: float = 0.0  # seconds from the ban until it was active on its node again


ban_id = restart.ban_id


def _describe(failures: Sequence[cib.Failure]) -> str:
    return "; ".join(
        f"{f.op_key} on {f.node}: {f.exitstatus or f.exitcode}"
        + (f" ({f.exit_reason})" if f.exit_reason else "")
        for f in failures
    )


def remove_ban(runner: Runner, resource: str, node: str) -> None:
    """Delete ``cli-ban-<resource>-on-<node>`` by id (no-op when absent). Unlike
    ``crm_resource --clear`` this keeps a ``cli-prefer`` the operator made."""
    _delete(runner, "constraints", "rsc_location", ban_id(resource, node))


def remove_pin(runner: Runner, bundle_id: str) -> None:
    """Delete the bundle's pin (:func:`~pcmkimg.core.restart.pin_element`) by id (no-op when
    absent)."""
    _delete(runner, "resources", "meta_attributes", restart.pin_id(bundle_id))


def remove_defaults_pin(runner: Runner) -> None:
    """Delete the pin of ``rsc_defaults`` (:func:`~pcmkimg.core.restart.defaults_pin_element`)
    by id (no-op when absent)."""
    _delete(runner, "rsc_defaults", "meta_attributes", restart.DEFAULTS_PIN)


def _delete(runner: Runner, scope: str, tag: str, element_id: str) -> None:
    xml = etree.tostring(etree.Element(tag, id=element_id), encoding="unicode")
    runner.run(["cibadmin", "--delete", "--scope", scope, "--xml-text", xml])


def place_bans(runner: Runner, resource: str, nodes: Sequence[str], end: str) -> None:
    """One CIB write: a ban of ``resource`` on each of ``nodes`` until ``end`` (see
    :func:`~pcmkimg.core.restart.ban_element`)."""
    runner.run(
        ["cibadmin", "--modify", "--scope", "constraints", "--xml-text"]
        + [restart.bans_xml(resource, nodes, end)]
    )


def remove_own_bans(runner: Runner, resource: str, config: cib.Element | None = None) -> list[str]:
    """Remove what an earlier (killed) restart of ``resource`` left: the constraints with our
    rule id (:func:`~pcmkimg.core.restart.own_bans`) and the bundle's pin, by id, as found in
    ``config`` (a CIB just read; read now when not given). The ids removed."""
    config = query_cib(runner) if config is None else config
    ids = restart.own_bans(config, resource)
    prefix = ban_id(resource, "")
    for cid in ids:
        remove_ban(runner, resource, cid[len(prefix) :])
    if restart.own_pin(config, resource):
        remove_pin(runner, resource)
        ids.append(restart.pin_id(resource))
    if restart.defaults_pinned(config):
        remove_defaults_pin(runner)
        ids.append(restart.DEFAULTS_PIN)
    return ids


@dataclass
class Holds:
    """What keeps the restarts of replicas in place, as placed in the CIB: our bans (on the
    replicas' node while they stop, and on every node where a stopped replica could start
    instead) and the pins of their bundles (every other replica stays where it is, whatever
    the stickiness), each with the lifetime :attr:`end`. Removed by id (:meth:`release`).

    One bundle's (``bundle_id``: :meth:`place`, :meth:`unban`) or, for the replicas of
    several bundles on one node restarted together, several bundles' (:meth:`place_all`,
    :meth:`unban_all`): every placement is one CIB change with all of them, and so is every
    removal.

    A restart places them and, when the replicas are active on their node again, releases
    them. When it fails, only the bans on the node go: the holds and the pins stay until
    whoever gave the Holds (the update's node step) has rolled back, so that the replicas can
    only come back on their own node (a failed start's fail-count would send them elsewhere)."""

    runner: Runner
    bundle_id: str
    timeout: float
    end: str = ""
    bans: dict[str, list[str]] = field(default_factory=dict)
    """bundle -> the nodes where it is banned."""
    pins: list[str] = field(default_factory=list)
    """The bundles pinned (with any, the defaults' pin too)."""

    @property
    def banned(self) -> list[str]:
        """The nodes where ``bundle_id`` is banned."""
        return self.bans.get(self.bundle_id, [])

    @property
    def pinned(self) -> bool:
        return bool(self.pins)

    @property
    def placed(self) -> bool:
        return any(self.bans.values()) or self.pinned

    def place(self, nodes: Sequence[str], bundle_id: str | None = None) -> None:
        """One CIB write: bans of ``bundle_id`` (default: the Holds') on ``nodes`` and its
        pin, written again with everything already placed, all with a lifetime of the
        timeout (plus a margin) from now."""
        self.place_all({bundle_id or self.bundle_id: nodes})

    def place_all(self, per_bundle: Mapping[str, Sequence[str]]) -> None:
        """:meth:`place` for several bundles (bundle -> nodes) in one CIB write."""
        self.end = restart.lifetime_end(datetime.now(timezone.utc), self.timeout)
        # Recorded before the call: an interrupted call may have written.
        for bundle_id, nodes in per_bundle.items():
            self.bans[bundle_id] = list(dict.fromkeys([*self.bans.get(bundle_id, []), *nodes]))
            if bundle_id not in self.pins:
                self.pins.append(bundle_id)
        xml = restart.group_holds_xml(self.bans, self.pins, self.end)
        self.runner.run(["cibadmin", "--modify", "--scope", "configuration", "--xml-text", xml])

    def unban(self, node: str, bundle_id: str | None = None) -> None:
        """Remove the ban of ``bundle_id`` (default: the Holds') on ``node`` (the holds
        elsewhere and the pins stay)."""
        bundle_id = bundle_id or self.bundle_id
        if node in self.bans.get(bundle_id, []):
            self._remove({bundle_id: [node]}, [])

    def unban_all(self, node: str) -> None:
        """Remove the ban of every bundle on ``node``, in one CIB change."""
        self._remove({b: [node] for b, nodes in self.bans.items() if node in nodes}, [])

    def _remove(self, bans: Mapping[str, Sequence[str]], pins: Sequence[str]) -> None:
        """One CIB change removing ``bans`` (bundle -> nodes) and the pins of ``pins`` (with
        the defaults' pin), by id: a single ban by ``cibadmin --delete``, more at once by
        ``cibadmin --delete-all --xpath`` (``--force``: cibadmin asks it of every delete-all;
        no read, no version to race with the status updates of a restart). What was removed
        is forgotten."""
        items = [(b, n) for b, nodes in bans.items() for n in nodes]
        if not items and not pins:
            return
        if len(items) == 1 and not pins:
            remove_ban(self.runner, *items[0])
        else:
            xpath = restart.removal_xpath(bans, pins)
            self.runner.run(["cibadmin", "--delete-all", "--force", "--xpath", xpath])
        for bundle_id, node in items:
            self.bans[bundle_id].remove(node)
        self.pins = [b for b in self.pins if b not in pins]

    def release(self, *, interrupted: bool = False) -> None:
        """Remove every ban and pin, in one CIB change; :class:`BanNotRemovedError` names
        every one left (with the command that removes it)."""
        bans = {b: list(nodes) for b, nodes in self.bans.items() if nodes}
        pins = list(self.pins)
        try:
            self._remove(bans, pins)
        except PacemakerError as exc:
            left = [(ban_id(b, n), cmd.clear_ban(b, n)) for b, nodes in bans.items() for n in nodes]
            left += [(restart.pin_id(b), cmd.delete_meta_set(restart.pin_id(b))) for b in pins]
            if pins:
                left.append((restart.DEFAULTS_PIN, cmd.delete_meta_set(restart.DEFAULTS_PIN)))
            raise BanNotRemovedError(
                f"{', '.join(i for i, _ in left)} could not be removed"
                + (" after an interruption" if interrupted else "")
                + f" (in force until {self.end}): {exc.message}",
                "; ".join(cmd.quoted(argv) for _, argv in left),
            ) from exc


@contextlib.contextmanager
def holding(runner: Runner, bundle_id: str, timeout: float) -> Iterator[Holds]:
    """A scope for the restarts of one bundle's replica (a restart and the rollback after
    it): whatever a restart in it placed and did not release goes at its end, on every exit
    path (SIGTERM raises in it, signals are held while it cleans up)."""
    holds = Holds(runner, bundle_id, timeout)
    done = False
    with sigterm_raises():
        try:
            yield holds
            done = True
        finally:
            with signals_held():
                holds.release(interrupted=not done)


def controller_idle(runner: Runner, node: str) -> bool:
    """Whether the controller on ``node`` (the DC's: no transition running) is in S_IDLE."""
    out = runner.run(["crmadmin", f"--status={node}", "--output-as=xml"], check=False)
    if out.rc != 0:
        return False
    return restart.controller_idle(cib.parse_xml(out.stdout, what="crmadmin output"))


def settle(runner: Runner, timeout: float, poll: float = POLL) -> float:
    """Wait until the DC's controller is idle at two looks in a row ``poll`` apart (what
    ``crm_resource --wait`` waits for, without its 2 s ticks). The seconds it took."""
    _need_live(runner, "waiting for the cluster")
    started = time.monotonic()
    idle = 0
    while True:
        dc = status(runner).dc
        idle = idle + 1 if dc and controller_idle(runner, dc) else 0
        if idle >= 2:
            return round(time.monotonic() - started, 3)
        if time.monotonic() - started > timeout:
            raise PacemakerTimeoutError(
                f"the cluster did not settle within {timeout:g}s",
                f"check {cmd.quoted(cmd.cluster_state())}",
                argv=["crmadmin", "--status"],
                rc=RC_TIMEOUT,
            )
        time.sleep(poll)


def restart_replica(
    runner: Runner,
    bundle_id: str,
    node: str,
    timeout: float = 120,
    *,
    poll: float = POLL,
    holds: Holds | None = None,
    recheck: float = RECHECK,
) -> RestartReport:
    """Restart the replica of ``bundle_id`` on ``node`` in place and check that it came back.

    Refuses (:class:`~pcmkimg.core.errors.RestartRefusedError`, as
    :func:`~pcmkimg.core.restart.check_restartable` decides) before touching anything. Then,
    with no other CIB write before it, one write places the :class:`Holds`:
    ``cli-ban-BUNDLE-on-NODE``, the same ban on each node where no replica runs (so the
    replica can only stop) and the bundle's pin (no other replica moves), each with a
    lifetime of ``timeout`` + a margin; crm_mon is read every ``poll`` seconds; the ban on
    ``node`` goes as soon as the replica runs nowhere, the rest once it is active on ``node``
    again; done when the DC is idle twice in a row (see :func:`~pcmkimg.core.restart.judge`).
    Raises :class:`RestartFailedError` at the first new failed operation of the replica or
    when it runs elsewhere, :class:`PacemakerTimeoutError` after ``timeout``.

    ``holds``: the caller's (see :func:`holding`), kept on failure for its rollback, all but
    the ban on ``node``; without it, everything placed is removed on every exit path.
    ``recheck``: every so many seconds of the watch, a ban of ours that another writer put back
    (:func:`_written_back`) is removed again.
    """
    (report,) = restart_replicas(
        runner, [bundle_id], node, timeout, poll=poll, holds=holds, recheck=recheck
    )
    return report


def restart_replicas(
    runner: Runner,
    bundle_ids: Sequence[str],
    node: str,
    timeout: float = 120,
    *,
    poll: float = POLL,
    holds: Holds | None = None,
    recheck: float = RECHECK,
) -> list[RestartReport]:
    """:func:`restart_replica` of the replicas of several bundles on ``node`` together: their
    holds placed in one CIB write, their bans on ``node`` lifted together once every one is
    stopped, the rest once every one is active there again (one CIB change each; see
    :func:`~pcmkimg.core.restart.judge_group`). Pacemaker stops and starts them in its own
    order: a bundle ordered after another one of them restarts once. At most one replica of
    each bundle is down (the one on ``node``). The reports in the order of ``bundle_ids``."""
    _need_live(runner, "a replica restart")
    config = query_cib(runner)
    before = status(runner)
    group = []
    for bundle_id in bundle_ids:
        replica = restart.check_restartable(config, before, bundle_id, node)
        others = restart.hold_nodes(before, bundle_id, node)
        group.append((cib.bundle(config, bundle_id), replica, others))
    if not (holds is not None and holds.placed):
        for bundle, _, others in group:
            restart.check_no_bans(config, bundle.id, [node, *others], pin=True)
    if holds is None:
        with holding(runner, bundle_ids[0], timeout) as own:
            return _restart(runner, own, group, node, before, timeout, poll, recheck)
    with sigterm_raises():
        try:
            return _restart(runner, holds, group, node, before, timeout, poll, recheck)
        except BaseException:
            with signals_held(), contextlib.suppress(PacemakerError):
                holds.unban_all(node)  # the replicas may come back here; the rest stays (the
                # holding scope tries again, and says it, if this fails)
            raise


def _written_back(
    runner: Runner, bundle_ids: Sequence[str], placed: Mapping[str, Sequence[str]]
) -> list[tuple[str, str]]:
    """(bundle, node) of our bans of ``bundle_ids`` in the CIB's constraints other than those
    ``placed`` (in force now, bundle -> nodes): bans an earlier restart removed and another
    writer put back. One read of the constraints."""
    out = runner.run(["cibadmin", "--query", "--scope", "constraints"]).stdout
    root = etree.Element("cib")
    etree.SubElement(root, "configuration").append(cib.parse_xml(out, what="constraints"))
    back = []
    for bundle_id in bundle_ids:
        prefix = ban_id(bundle_id, "")
        for cid in restart.own_bans(root, bundle_id):
            if cid[len(prefix) :] not in placed.get(bundle_id, []):
                back.append((bundle_id, cid[len(prefix) :]))
    return back


def _restart(
    runner: Runner,
    holds: Holds,
    group: Sequence[tuple[cib.Bundle, cib.ReplicaStatus, Sequence[str]]],
    node: str,
    before: cib.ClusterStatus,
    timeout: float,
    poll: float,
    recheck: float = RECHECK,
) -> list[RestartReport]:
    """The watch of :func:`restart_replicas`, its holds placed first."""
    names = ", ".join(bundle.id for bundle, _, _ in group)
    replicas = [(bundle, replica) for bundle, replica, _ in group]
    started = time.monotonic()
    marks: dict[str, float] = {}
    holds.place_all({bundle.id: [node, *others] for bundle, _, others in group})
    phase: restart.Phase = "stopping"
    look_again = time.monotonic() + recheck
    while True:
        state = status(runner)
        idle = None
        if phase in ("settling", "settled") and state.dc:
            idle = controller_idle(runner, state.dc)
        verdict = restart.judge_group(
            phase, restart.Seen(state, idle), before.failures, replicas, node
        )
        failed = verdict.bundle or names
        fix = (
            f"fix the cause on {node} (e.g. its image), then "
            f"{cmd.quoted(cmd.cleanup(failed, node))}"
        )
        if verdict.failures:
            raise RestartFailedError(
                f"restart of {failed} on {node} failed: {_describe(verdict.failures)}",
                fix,
                failures=verdict.failures,
            )
        if verdict.failed:
            raise RestartFailedError(f"restart of {failed} on {node}: {verdict.failed}", fix)
        if verdict.phase != phase or verdict.act:
            trace.note(f"restart {names} on {node}: {phase} -> {verdict.phase} {verdict.act}")
        if verdict.act == "unban":
            marks["stopped"] = time.monotonic() - started
            holds.unban_all(node)
        elif verdict.act == "release":
            marks["active"] = time.monotonic() - started
            holds.release()
        elif time.monotonic() >= look_again:
            # Another writer's stale replace of the configuration (pcs's read-modify-replace)
            # can put back a ban we removed (this restart's, or an earlier one's): a replica
            # would stay stopped until its end, or stop and move.
            look_again = time.monotonic() + recheck
            ids = [bundle.id for bundle, _, _ in group]
            for bundle_id, back in _written_back(runner, ids, holds.bans):
                log.warning(
                    "%s was written back by another CIB writer: removed again",
                    ban_id(bundle_id, back),
                )
                remove_ban(runner, bundle_id, back)
        phase = verdict.phase
        if phase == "done":
            break
        if time.monotonic() - started > timeout:
            raise PacemakerTimeoutError(
                f"restart of {names} on {node} did not finish within {timeout:g}s (still {phase})",
                f"check {cmd.quoted(cmd.cluster_state())}; the constraints are removed",
                argv=["crm_mon"],
                rc=RC_TIMEOUT,
            )
        time.sleep(poll)
    return [
        RestartReport(
            bundle=bundle.id,
            node=node,
            replica=replica.replica,
            container=replica.container_id,
            seconds=round(time.monotonic() - started, 3),
            stopped_after=round(marks.get("stopped", 0.0), 3),
            active_after=round(marks.get("active", 0.0), 3),
        )
        for bundle, replica in replicas
    ]


# --------------------------------------------------------------------------- snapshot


def _cib_root(text: str) -> cib.Element:
    """The ``<cib>`` element of ``cibadmin --query --no-children``, with its version."""
    root = cib.parse_xml(text)
    if root.tag != "cib":
        raise CibStructureError(f"XML is not a CIB: root <{root.tag}>", FIX_ROOT)
    return root


def query_config(
    runner: Runner, attempts: int = 5, first: RawSnapshot | None = None
) -> tuple[cib.Element, cib.Element]:
    """The configuration section alone (``--scope configuration``: a few hundred kB where the
    whole CIB with its status history can be 50 MB) under its ``<cib>`` element and version,
    and ``crm_mon --output-as=xml``, from one snapshot: the configuration's version is the
    same before and after crm_mon reads the state (else it is read again).

    Offline, the saved CIB is one file that nothing changes: one ``cibadmin --query`` (every
    call would parse the whole file again), its status section dropped. Both keep the update
    lease's ticket state (the one part of the status section that ``status``, ``check`` and
    ``metrics`` show) under ``<cib><status><tickets>``. ``first``: the tools' answers of a read
    already made (:func:`read_early`), judged as the first attempt."""
    for attempt in range(1, attempts + 1):
        raw = first if attempt == 1 and first is not None else read_snapshot(runner)
        if runner.offline:
            whole = cib.parse_cib(raw.config)
            ticket = cib.ticket_element(whole, LEASE_TICKET)
            for status in whole.findall("status"):
                whole.remove(status)
            _add_lease_ticket(whole, ticket)
            return whole, cib.parse_crm_mon(raw.mon)
        assert raw.head is not None and raw.tail is not None and raw.ticket is not None
        head = _cib_root(raw.head)
        section = cib.parse_xml(raw.config)
        mon = cib.parse_crm_mon(raw.mon)
        ticket = _lease_ticket(raw.ticket)
        if cib.cib_version(_cib_root(raw.tail))[:2] == cib.cib_version(head)[:2]:
            break
        if attempt == attempts:
            raise CibChangedError(
                f"the configuration changed during each of {attempts} reads",
                "retry when the cluster's configuration is not being changed",
                argv=("cibadmin", "--query"),
            )
        time.sleep(0.1 * attempt)
    if section.tag != "configuration":
        raise CibStructureError(
            f"cibadmin --query --scope configuration printed <{section.tag}>", FIX_ROOT
        )
    head.append(section)
    _add_lease_ticket(head, ticket)
    return head, mon


def _add_lease_ticket(head: cib.Element, ticket: cib.Element | None) -> None:
    """The update lease's ticket state, the one part of the status section the configuration's
    readers (``status``, ``check``, ``metrics``) show, under ``head``."""
    if ticket is not None:
        etree.SubElement(etree.SubElement(head, "status"), "tickets").append(ticket)


def _lease_ticket(answer: ToolResult) -> cib.Element | None:
    """The update lease's ticket state from ``cibadmin``'s answer to
    :data:`~pcmkimg.adapters.runner.TICKET_ARGV`; None when there is none (exit 105, ENXIO)."""
    if answer.rc == RC_NOSUCH:
        return None
    if answer.rc != 0:
        raise tool_error(answer)
    el = cib.parse_xml(answer.stdout, what="cibadmin --query --xpath")
    return el if el.tag == "ticket_state" else el.find(".//ticket_state")


def read_cluster(runner: Runner, first: RawSnapshot | None = None) -> plan.Cluster:
    """The configuration and the state, from one snapshot (see :func:`query_config`)."""
    config, mon = query_config(runner, first=first)
    return plan.Cluster(config, mon, cib.cluster_status(mon))


# --------------------------------------------------------------------------- the cluster port


@dataclass(frozen=True)
class Pacemaker:
    """The cluster port: every Pacemaker operation a workflow uses, on one :class:`Runner`.

    Workflows get it from their context (``ctx.cluster``) and never call this module's
    functions themselves; tests give them ``tests.fakes.FakeCluster`` instead, which answers
    the same methods from a scripted CIB and crm_mon."""

    runner: Runner = field(default_factory=Runner)
    early: Early[RawSnapshot] | None = field(default=None, compare=False, repr=False)
    """A snapshot read started before the command's first read (``status``, ``check``): that
    first read takes it; every later read is a fresh one."""

    @property
    def offline(self) -> bool:
        return self.runner.offline

    def read_cluster(self) -> plan.Cluster:
        return read_cluster(self.runner, None if self.early is None else self.early.take())

    def query_cib(self) -> cib.Element:
        return query_cib(self.runner)

    def status(self) -> cib.ClusterStatus:
        return status(self.runner)

    def update_cib(self, edit: Callable[[cib.Element], cib.CibChange]) -> cib.CibChange:
        return update_cib(self.runner, edit)

    def local_node(self) -> str:
        return local_node(self.runner)

    def cleanup(self, resource: str, node: str | None = None) -> None:
        cleanup(self.runner, resource, node)

    def refresh(self, resource: str, node: str | None = None) -> None:
        refresh(self.runner, resource, node)

    def wait(self, timeout: float) -> None:
        wait(self.runner, timeout)

    def settle(self, timeout: float) -> float:
        return settle(self.runner, timeout)

    def set_node_attribute(self, node: str, name: str, value: str) -> None:
        set_node_attribute(self.runner, node, name, value)

    def delete_node_attribute(self, node: str, name: str) -> None:
        delete_node_attribute(self.runner, node, name)

    def holding(self, bundle_id: str, timeout: float) -> contextlib.AbstractContextManager[Holds]:
        return holding(self.runner, bundle_id, timeout)

    def restart_replica(
        self, bundle_id: str, node: str, timeout: float, *, holds: Holds | None = None
    ) -> RestartReport:
        return restart_replica(self.runner, bundle_id, node, timeout, holds=holds)

    def restart_replicas(
        self,
        bundle_ids: Sequence[str],
        node: str,
        timeout: float,
        *,
        holds: Holds | None = None,
    ) -> list[RestartReport]:
        return restart_replicas(self.runner, bundle_ids, node, timeout, holds=holds)

    def remove_own_bans(self, bundle_id: str, config: cib.Element | None = None) -> list[str]:
        return remove_own_bans(self.runner, bundle_id, config)
