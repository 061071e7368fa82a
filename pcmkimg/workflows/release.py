"""``pcmkimg update SERVICE=REF... | --images FILE``: a release, node by node, in one run.

Every service of the release moves to its image on a node in that node's one turn: after one
lease, one preflight of every bundle, and the pulls (each reference once per node, before any
restart), each node in turn (see :func:`pcmkimg.core.release.plan_release` for the order):

1. every other replica of every bundle of the release is as healthy as when the run started;
2. every service's floating name is retagged there;
3. its replicas whose container does not run the new image yet restart in one go (the
   update's in-place restart over all of them: holds placed in one CIB change, lifted
   together; Pacemaker restarts a bundle ordered after another one once, in its order);
4. with ``--soak S`` they are watched S seconds (still active, no new failed operation, as many
   promoted instances);
5. when anything fails there, every service moved on that node goes back to the image it ran
   before (names restored exactly, replicas restarted and verified): the run stops, exit 6; the
   nodes done before stay updated, and a re-run of the same command converges.

A single service (``update SERVICE --image REF``) is the same machinery with one service.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from pcmkimg.adapters import lease as leasing
from pcmkimg.adapters.errors import BanNotRemovedError, RestartFailedError
from pcmkimg.core import cib, lease, plan, release, restart
from pcmkimg.core import commands as cmd
from pcmkimg.core.errors import PreflightFailed, ReleaseFileError
from pcmkimg.core.report import NodeResult
from pcmkimg.core.tagplan import Retagged
from pcmkimg.errors import PcmkimgError, UsageError
from pcmkimg.records import dataclass, field
from pcmkimg.workflows.context import Context, HoldsPort
from pcmkimg.workflows.errors import UpdateFailed
from pcmkimg.workflows.update import (
    Undo,
    Updater,
    one_of,
    outcome_document,
    reported_on_failure,
    roll_back_together,
)


@dataclass(frozen=True)
class ReleaseRequest:
    """``pcmkimg update SERVICE=REF... [--images FILE] (--node N... | --all)``."""

    pairs: tuple[str, ...] = ()
    """``SERVICE=REF`` arguments (``SERVICE = REF [DIGEST]`` lines of a file are the same)."""
    images_file: Path | None = None
    nodes: tuple[str, ...] = ()
    every: bool = False
    restart: bool = True
    timeout: float = 300
    soak: float = 0
    """Seconds to watch a node's restarted replicas before the next node."""
    dry_run: bool = False


@dataclass
class ReleaseReport:
    """Per node, per service, what the release did."""

    nodes: list[dict[str, NodeResult]] = field(default_factory=list)
    """Each node's turn so far, in order: its services' results."""
    names: list[str] = field(default_factory=list)
    """The node of each turn in :attr:`nodes`."""

    def turn(self, node: str, services: Sequence[str]) -> dict[str, NodeResult]:
        """The results of ``node``'s turn, one per service, in the report from its start (also
        when the turn fails)."""
        results = {s: NodeResult(node) for s in services}
        self.nodes.append(results)
        self.names.append(node)
        return results

    def restarted(self) -> int:
        return sum(r.restarted for per in self.nodes for r in per.values())

    def summary(self) -> str:
        done = sum(all(r.result != "pending" for r in per.values()) for per in self.nodes)
        return f"{done} node(s) done, {self.restarted()} container(s) restarted"

    def as_dict(self) -> dict[str, object]:
        return {
            "nodes": [
                {"node": node, "services": {s: r.as_dict() for s, r in per.items()}}
                for node, per in zip(self.names, self.nodes)
            ],
            "restarted": self.restarted(),
        }


@dataclass
class ReleaseOutcome:
    plan: release.ReleasePlan
    report: ReleaseReport | None = None

    def as_dict(self) -> dict[str, object]:
        return {
            **outcome_document(self.plan, self.report),
            "promotions": [m.as_dict() for m in self.plan.promotions],
        }


def _lines(req: ReleaseRequest) -> list[tuple[str, str]]:
    """The release's lines: the file's, then the arguments' (``SERVICE=REF``)."""
    lines: list[tuple[str, str]] = []
    if req.images_file is not None:
        try:
            text = req.images_file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ReleaseFileError(
                f"--images {req.images_file}: cannot read it ({exc})",
                "give a readable file of SERVICE = IMAGE [DIGEST] lines",
            ) from None
        lines += [(t, f"{req.images_file}:{n}") for n, t in enumerate(text.splitlines(), 1)]
    for n, pair in enumerate(req.pairs, 1):
        if "=" not in pair:
            raise UsageError(
                f"argument {pair!r}: give SERVICE=REF (several services), or one SERVICE "
                "with --image REF",
                "e.g. pcmkimg update galera=REGISTRY/NS/MARIADB:TAG rabbitmq=... --all",
            )
        lines.append((pair, f"argument {n}"))
    return lines


def plan_for(ctx: Context, req: ReleaseRequest) -> release.ReleasePlan:
    """The plan (what ``--dry-run`` prints); bad input refused before the cluster is read."""
    one_of(req.nodes, req.every)
    entries = release.parse_release(_lines(req), ctx.scheme)
    cluster = ctx.cluster.read_cluster()
    nodes = None if req.every else list(req.nodes)
    return release.plan_release(cluster, entries, nodes, ctx.scheme, restart=req.restart)


def run(ctx: Context, req: ReleaseRequest) -> ReleaseOutcome:
    the_plan = plan_for(ctx, req)
    outcome = ReleaseOutcome(the_plan)
    if req.dry_run:
        return outcome
    for line in the_plan.lines():
        ctx.say(line)
    report = ReleaseReport()
    outcome.report = report
    jrnl = ctx.journal()
    with ctx.open_stores() as stores:
        updaters = {
            i.bundle.service: Updater(
                ctx.cluster, stores, jrnl, ctx.say, req.timeout, ctx.lease_period, ctx.progress
            )
            for i in the_plan.items
        }
        with reported_on_failure(jrnl, "release", report):
            _run(ctx, the_plan, req, updaters, report)
    ctx.say(report.summary())
    return outcome


def _run(
    ctx: Context,
    the_plan: release.ReleasePlan,
    req: ReleaseRequest,
    updaters: dict[str, Updater],
    report: ReleaseReport,
) -> None:
    first = next(iter(updaters.values()))
    bundles = [item.bundle for item in the_plan.items]
    for item in the_plan.items:
        first.record(
            "start",
            service=item.bundle.service,
            bundle=item.bundle.id,
            target=str(item.entry.image),
            nodes=list(the_plan.targets),
            release=[i.bundle.service for i in the_plan.items],
        )
    with leasing.held(ctx.cluster, ctx.lease_period, say=ctx.say) as held:
        ctx.say(f"lease taken ({held.host}, pid {held.pid}, period {held.period:g}s)")
        for u in updaters.values():
            u.holding = held
        _preflight(the_plan, updaters)
        ids = _pull(the_plan, updaters)
        for turn in the_plan.turns:
            first.check_lease()
            first.clear_written_back(bundles)  # one read for every bundle
            results = report.turn(turn.node, turn.services)
            _turn(ctx, the_plan, turn, req, updaters, ids, results)
        first.clear_written_back(bundles)
    for item in the_plan.items:
        first.record("done", service=item.bundle.service, summary=report.summary())


def _preflight(the_plan: release.ReleasePlan, updaters: dict[str, Updater]) -> None:
    """The update's preflight for every bundle, in one read (again after removing what a
    killed restart left); every problem of every bundle at once."""
    first = next(iter(updaters.values()))
    cluster = first.preflight_read([i.bundle for i in the_plan.items])
    problems: list[str] = []
    for item in the_plan.items:
        updater = updaters[item.bundle.service]
        nodes = [t.node for t in the_plan.turns if item.bundle.service in t.services]
        missing = updater.missing(nodes, item.bundle.ref)
        problems += [
            f"{item.bundle.service}: {p}"
            for p in plan.preflight_problems(cluster, item.bundle.id, nodes, missing)
        ]
        updater.baseline = plan.health(cluster.status, item.bundle.id)
        updater.snapshot = cluster.config  # its bundle's definition, read under the lease
    if problems:
        raise PreflightFailed(
            "release refused: " + "; ".join(dict.fromkeys(problems)),
            "fix these, then run the release again (`pcmkimg check` lists them)",
        )


def _pull(the_plan: release.ReleasePlan, updaters: dict[str, Updater]) -> dict[str, dict[str, str]]:
    """Each distinct reference once on every node that needs it (the nodes in parallel, one
    pull at a time per node), before any retag: reference -> node -> image ID. A failed pull
    anywhere changes nothing anywhere."""
    ids: dict[str, dict[str, str]] = {}
    for item in the_plan.items:
        ref = str(item.entry.image)
        if ref in ids:
            continue
        nodes = [n for n, refs in the_plan.pulls.items() if ref in refs]
        updater = updaters[item.bundle.service]
        ids[ref] = updater.pull_all(nodes, item.entry.image, item.entry.digest)
    return ids


def _turn(
    ctx: Context,
    the_plan: release.ReleasePlan,
    turn: release.NodeTurn,
    req: ReleaseRequest,
    updaters: dict[str, Updater],
    ids: dict[str, dict[str, str]],
    results: dict[str, NodeResult],
) -> None:
    """One node's turn: check, retag every service, restart the node's replicas together,
    soak; on failure every service moved here goes back."""
    node = turn.node
    status = ctx.cluster.status()  # one look for every service's check
    for service in turn.services:
        updaters[service].check_others(the_plan.item(service).bundle, node, status)
    before = status.failures
    targets = {s: ids[str(the_plan.item(s).entry.image)][node] for s in turn.services}
    retags = {}
    for service in turn.services:
        item = the_plan.item(service)
        retags[service] = updaters[service].retag_node(
            item.bundle, results[service], item.entry.image, targets[service]
        )
    first = the_plan.item(turn.services[0]).bundle.id
    try:
        # One holding scope for the node: the holds of a restart that fails stay until the
        # rollback is done (the replicas can only come back here, on the previous images).
        with ctx.cluster.holding(first, req.timeout) as holds:
            try:
                _restart_together(
                    ctx, the_plan, turn, req, updaters, targets, retags, results, holds, status
                )
                if req.soak > 0 and req.restart:
                    _soak(ctx, the_plan, turn, updaters, before, req.soak)
            except (BanNotRemovedError, lease.LeaseError):
                raise
            except PcmkimgError as exc:
                here = _roll_back(the_plan, turn, updaters, results, retags, targets, holds, exc)
                if not here:
                    raise UpdateFailed(
                        f"release failed on {node}, which left the cluster during its restart "
                        f"({exc.message}); the names of every service moved there were rolled "
                        "back",
                        f"bring {node} back into the cluster (its corosync, pacemaker and "
                        f"network; {cmd.quoted(cmd.cluster_state())}): its replicas then start "
                        "on the previous images; then run the release again; the nodes after "
                        "it were not touched",
                    ) from exc
                raise UpdateFailed(
                    f"release failed on {node}; every service moved there went back to its "
                    f"previous image: {exc.message}",
                    exc.fix,
                ) from exc
    except (BanNotRemovedError, lease.LeaseError) as exc:
        # A ban left behind, or the lease lost to another process: no rollback now.
        for service in turn.services:
            res = results[service]
            if res.result in ("pending",):
                res.result = "failed"
                updaters[service].record("failed", service=service, node=node, error=exc.one_line())
        raise


def _restart_together(
    ctx: Context,
    the_plan: release.ReleasePlan,
    turn: release.NodeTurn,
    req: ReleaseRequest,
    updaters: dict[str, Updater],
    targets: dict[str, str],
    retags: dict[str, Retagged],
    results: dict[str, NodeResult],
    holds: HoldsPort,
    status: cib.ClusterStatus | None,
) -> None:
    """The node's replicas whose container does not run its new image yet, restarted in one
    go (their holds placed in one CIB change, lifted together: Pacemaker restarts a bundle
    ordered after another one once, in its order), then each checked as a single update
    checks its replica. ``status``: the turn's look at the cluster, before its retags (the
    restart reads the cluster again and checks it before it begins); read again after a
    replica was healed here, and once after the restart for every service."""
    node = turn.node
    pending: dict[str, cib.ReplicaStatus] = {}
    for service in turn.services:
        bundle = the_plan.item(service).bundle
        res = results[service]
        replica = updaters[service].prepare_restart(
            bundle, res, targets[service], req.restart, retags[service], holds, status
        )
        if res.result == "started":  # healed: a CIB change of ours since that look
            status = None
        if replica is not None:
            pending[service] = replica
    if not pending:
        return
    containers = ", ".join(r.container_id for r in pending.values())
    ctx.say(f"{node}: restarting {containers} together (waiting up to {req.timeout:.0f}s)")
    for service, replica in pending.items():
        updaters[service].record(
            "restart", service=service, node=node, container=replica.container_id
        )
        results[service].restarted = True
    bundles = [the_plan.item(s).bundle.id for s in pending]
    wall, started = time.time(), time.monotonic()
    try:
        if len(bundles) == 1:
            ctx.cluster.restart_replica(bundles[0], node, req.timeout, holds=holds)
        else:
            ctx.cluster.restart_replicas(bundles, node, req.timeout, holds=holds)
    finally:
        for service in pending:
            results[service].restart_seconds = round(time.monotonic() - started, 3)
    after = ctx.cluster.status()  # one look for every service's check
    for service, replica in pending.items():
        bundle = the_plan.item(service).bundle
        updater = updaters[service]
        where = updater.after_restart(bundle, node, replica, results[service], wall, after)
        updater.finish_restart(
            bundle, results[service], targets[service], replica.container_id, where
        )


def _roll_back(
    the_plan: release.ReleasePlan,
    turn: release.NodeTurn,
    updaters: dict[str, Updater],
    results: dict[str, NodeResult],
    retags: dict[str, Retagged],
    targets: dict[str, str],
    holds: HoldsPort,
    exc: PcmkimgError,
) -> bool:
    """Every service moved on the node goes back (names restored, replicas restarted
    together on the previous images), under the node's ``holds``; not once the lease may be
    another's (:class:`~pcmkimg.core.lease.LeaseError`). False when the node left the
    cluster: only its names went back (see :func:`~pcmkimg.workflows.update.roll_back_together`)."""
    undos = []
    for service in turn.services:
        res = results[service]
        updater = updaters[service]
        bundle = the_plan.item(service).bundle
        if res.result == "pending":
            updater.record("failed", service=service, node=turn.node, error=exc.one_line())
        # This run's retag; on a re-run, an earlier run's, for a replica restarted now.
        retag = retags[service]
        undo = (
            updater.undo_for(bundle, res, retag, targets[service], exc)
            if retag.moved or res.restarted
            else None
        )
        if undo is None:
            if res.result == "pending":
                res.result = "failed" if res.restarted else "unchanged"
            continue
        undos.append(Undo(updater, bundle, res, undo))
    if not undos:
        return True
    first = updaters[turn.services[0]]
    first.say(f"{turn.node}: FAILED: {exc.message}")
    first.check_lease()
    here = roll_back_together(undos, holds)
    for u in undos:
        u.res.result = "rolled-back"
    return here


def _soak(
    ctx: Context,
    the_plan: release.ReleasePlan,
    turn: release.NodeTurn,
    updaters: dict[str, Updater],
    before: Sequence[cib.Failure],
    seconds: float,
) -> None:
    """Watch the node's replicas for ``seconds``: still active there, no new failed operation,
    as many promoted instances as when the run started; else the node failed."""
    ctx.say(f"{turn.node}: soaking {seconds:g}s")
    config = ctx.cluster.query_cib()
    end = time.monotonic() + seconds
    while True:
        state = ctx.cluster.status()
        for service in turn.restart:
            bundle = the_plan.item(service).bundle
            replica = state.replica_on(bundle.id, turn.node)
            updater = updaters[service]
            now = plan.health(state, bundle.id)
            start = updater.baseline or now
            problems = []
            if replica is None or not replica.active:
                problems.append(f"the replica of {bundle.id} is no longer active on {turn.node}")
            else:
                failed = restart.new_failures(
                    before, state.failures, cib.bundle(config, bundle.id), replica, turn.node
                )
                problems += [f"{f.op_key} failed on {f.node}" for f in failed]
            if now.promoted < start.promoted:
                problems.append(f"{now.promoted} promoted instance(s) of {bundle.id}, "
                                f"{start.promoted} before the release")  # fmt: skip
            if problems:
                raise RestartFailedError(
                    f"during the soak on {turn.node}: " + "; ".join(problems),
                    f"see {cmd.quoted(cmd.status_xml())}",
                )
        if time.monotonic() >= end:
            return
        time.sleep(min(1.0, max(0.0, end - time.monotonic())))
