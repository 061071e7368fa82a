"""The node step: one node's turn of an update, a release or a rollback, in one place.

:func:`turn` runs a node's steps (:class:`~pcmkimg.workflows.step.NodeStep`: one service for an
update or a rollback, every service of the node for a release) with the run's
:class:`~pcmkimg.workflows.session.Session`:

1. :func:`check_others`: every other replica as healthy as when the run started;
2. the session's ``checks`` (:data:`pcmkimg.workflows.session.Check`), with the same look at
   the cluster: a check of the node's steps before its first write (for example "simulate
   this step's CIB change", "refuse on a pending fence") raises to refuse the node untouched;
3. :func:`retag`: each floating name moved to its target (the rollback name keeps the old);
4. under one holding scope for the node: :func:`prepare` each step (heal what kept a replica
   off the node; decide whether it restarts), restart those that do together, judge each
   (:func:`verdict`), and watch them with ``--soak`` (:func:`soak`);
5. on failure, every service moved on the node goes back
   (:func:`pcmkimg.workflows.noderollback.roll_back_failed`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from pcmkimg.adapters import podman as images
from pcmkimg.adapters.errors import BanNotRemovedError, RestartFailedError
from pcmkimg.core import cib, lease, plan
from pcmkimg.core import commands as cmd
from pcmkimg.core import restart as restart_rules
from pcmkimg.core.errors import PreflightFailed
from pcmkimg.core.report import NodeResult, Result
from pcmkimg.errors import PcmkimgError
from pcmkimg.workflows.noderollback import roll_back_failed
from pcmkimg.workflows.session import Session
from pcmkimg.workflows.step import NodeStep


def turn(session: Session, steps: Sequence[NodeStep]) -> None:
    """One node's turn (see the module's text). The session's ``checks`` run after the health
    check, with the turn's look at the cluster, before anything is written. An interruption
    (Ctrl-C, SIGTERM) after a retag is not rolled back: the node keeps the floating name, and
    running the same command again finishes the job."""
    status = session.cluster.status()  # one look for every step's check and restart
    for step in steps:
        check_others(session, step, status)
    for check in session.checks:
        check(session, steps, status)
    before = status.failures
    for step in steps:
        retag(session, step)
    try:
        # One holding scope for the node: the holds of a restart that fails stay until the
        # rollback is done (the replicas can only come back here, on the previous images).
        with session.cluster.holding(steps[0].bundle.id, session.timeout) as holds:
            for step in steps:
                step.holds = holds
            try:
                restart_together(session, steps, status)
                if session.soak > 0:
                    soak(session, steps, before)
            except (BanNotRemovedError, lease.LeaseError):
                raise
            except PcmkimgError as exc:
                roll_back_failed(session, steps, exc)
    except (BanNotRemovedError, lease.LeaseError) as exc:
        # A ban left behind, or the lease lost to another process: no rollback now, it
        # could not work (the ban) or would race the other holder (the lease).
        for step in steps:
            if _unfinished(session, step.res):
                step.res.result = "failed"
                session.record("failed", service=step.service, node=step.node, error=exc.one_line())
        raise


def _unfinished(session: Session, res: NodeResult) -> bool:
    """Whether a ban left behind or a lost lease fails this result: a release's steps not done
    yet; a single service's step unless its rollback said how it ended."""
    if session.release:
        return res.result == "pending"
    return res.result not in ("rolled-back", "rollback-failed")


def check_others(session: Session, step: NodeStep, status: cib.ClusterStatus | None = None) -> None:
    """Refuse to touch the step's node unless every other replica that was active when the run
    started is active, with as many promoted instances (in ``status``: read now when not
    given)."""
    baseline = session.baselines.get(step.bundle.id)
    if baseline is None:
        return
    if status is None:
        status = session.cluster.status()
    now = plan.health(status, step.bundle.id)
    problems = plan.before_node_problems(baseline, now, step.node)
    if problems:
        raise PreflightFailed(
            f"update of {step.service} stopped before {step.node}, which was not touched: "
            + "; ".join(problems),
            f"bring those replicas back ({cmd.quoted(cmd.status())}, "
            f"{cmd.quoted(cmd.status_xml())}), then run the update "
            "again: the nodes done so far are not redone",
        )


def retag(session: Session, step: NodeStep) -> images.Retagged:
    """Move the floating name on the step's node to its target (the rollback name keeps what
    it named), journaled; the step's result says what moved."""
    bundle, node, res = step.bundle, step.node, step.res
    done = step.retag = session.stores.get(node).retag(bundle.ref, step.target)
    res.before = done.old_id
    res.retagged = done.moved
    res.after = done.new_id
    session.record(
        "retag",
        service=bundle.service,
        node=node,
        floating=bundle.floating,
        before=res.before,
        after=res.after,
        moved=done.moved,
        rollback=done.rollback_name,
        rollback_before=done.rollback_before,
    )
    if done.moved:
        session.updated.setdefault(bundle.id, set()).add(node)
        session.say(f"{node}: {bundle.floating} now names {step.ref} ({step.target[:12]})")
    return done


# --------------------------------------------------------------------------- the restart


def restart_together(
    session: Session, steps: Sequence[NodeStep], status: cib.ClusterStatus | None
) -> None:
    """The node's replicas whose container does not run its new image yet, restarted in one
    go (their holds placed in one CIB change, lifted together: Pacemaker restarts a bundle
    ordered after another one once, in its order), then each judged (:func:`verdict`).
    ``status``: the turn's look at the cluster, before its retags; read again after a replica
    was healed here, and once after the restart for every step."""
    node = steps[0].node
    pending = []
    for step in steps:
        step.replica = prepare(session, step, status)
        if step.res.result == "started":  # healed: a CIB change of ours since that look
            status = None
        if step.replica is not None:
            pending.append(step)
    if not pending:
        return
    containers = ", ".join(s.chosen.container_id for s in pending)
    together = " together" if session.release else ""
    session.say(f"{node}: restarting {containers}{together} (waiting up to {session.timeout:.0f}s)")
    for step in pending:
        session.record(
            "restart", service=step.service, node=node, container=step.chosen.container_id
        )
        step.res.restarted = True
    bundles = [s.bundle.id for s in pending]
    holds = pending[0].holds
    wall, started = time.time(), time.monotonic()
    try:
        if len(bundles) == 1:
            session.cluster.restart_replica(bundles[0], node, session.timeout, holds=holds)
        else:
            session.cluster.restart_replicas(bundles, node, session.timeout, holds=holds)
    finally:
        for step in pending:
            step.res.restart_seconds = round(time.monotonic() - started, 3)
    after = session.cluster.status()  # one look for every step's verdict
    for step in pending:
        verdict(session, step, wall, after)


def prepare(
    session: Session, step: NodeStep, status: cib.ClusterStatus | None = None
) -> cib.ReplicaStatus | None:
    """Everything before the restart of the replica on the step's node: heal what kept it off
    the node; the replica to restart, or None when the node is done without a restart (the
    step's result says how). ``status``: a look at the cluster since the last change of ours
    (read now when not given)."""
    node, target, res = step.node, step.target, step.res
    if status is None:
        status = session.cluster.status()
    started_here = step.restart and heal(session, step, status)
    if started_here:
        status = session.cluster.status()
    replica = status.replica_on(step.bundle.id, node)
    container = replica.container_id if replica and replica.active else None
    res.container_before, running_image = session.container_image(node, container)
    if started_here:
        if container is None:
            raise RestartFailedError(
                f"the replica did not start on {node} after the cleanup of its failed start",
                f"see {cmd.quoted(cmd.status_xml())} for the failed start",
            )
        if running_image != target:
            raise RestartFailedError(
                f"the replica started on {node} runs {str(running_image)[:12]}, not {target[:12]}",
                "check the bundle's image in the CIB: it must be the floating name",
            )
        text = f"the replica runs again, on {str(running_image)[:12]}"
        _no_restart(session, step, "started", text, kept=True)
        return None
    if container is None:
        text = "no replica runs here; a later start uses the new image"
        _no_restart(session, step, "retag-only", text, kept=False)
        return None
    if running_image == target:
        text = f"the replica already runs {target[:12]}: no restart"
        _no_restart(session, step, "unchanged", text, kept=True)
        return None
    if not step.restart:
        text = "--no-restart: the replica keeps running the old image"
        _no_restart(session, step, "retag-only", text, kept=False)
        return None
    return replica


def _no_restart(session: Session, step: NodeStep, result: Result, text: str, *, kept: bool) -> None:
    """The node is done without a restart: its result, the same container after as before
    when ``kept``, the node attribute once the name moved, and a line for the operator."""
    step.res.result = result
    if kept:
        step.res.container_after = step.res.container_before
    if step.moved.moved:
        session.publish(step.bundle, step.node)
    session.say(f"{step.node}: {text}")


def heal(session: Session, step: NodeStep, status: cib.ClusterStatus) -> bool:
    """Clean up what kept the replica off the step's node now that the floating name is there.

    A guard that refused to start (rc 5: the name was missing) keeps the replica off this
    node until its failure is cleaned up; a degraded monitor (190) stays listed until then.
    A failed start of the replica itself is cleaned up too when the floating name was
    missing here before the retag (the bundle then tried to pull it), never otherwise.
    The cleanup runs under the step's holds (the pin, and bans on the other nodes without a
    replica), so that nothing but a replica starting here follows from it. True when a
    replica is expected to start here: none ran here and the bundle has one that runs
    nowhere (with every replica running elsewhere, nothing starts here).
    """
    bundle, node, holds = step.bundle, step.node, step.holds
    assert holds is not None
    config = session.bundle_config(bundle.id)
    resources: list[str] = []
    failures: list[cib.Failure] = []
    if config.guard is not None:
        found = status.failures_of([config.guard.primitive_id], node)
        if found:
            resources.append(config.guard.primitive_id)
            failures += found
    if step.moved.old_id is None:  # the name was missing here before the retag
        found = [f for f in status.real_failures if plan.healable(f, bundle.id, {node})]
        if found:
            resources.append(bundle.id)
            failures += found
    if not failures:
        return False
    replica = status.replica_on(bundle.id, node)
    was_active = bool(replica and replica.active)
    spare = sum(r.active for r in status.replicas_of(bundle.id)) < config.replicas
    session.say(f"{node}: cleaning up the failures of {', '.join(resources)}")
    holds.place(restart_rules.hold_nodes(status, bundle.id, node), bundle.id)
    for resource in resources:
        session.cluster.cleanup(resource, node)
    session.cluster.settle(session.timeout)
    holds.release()
    session.record(
        "guard-cleanup",
        service=bundle.service,
        node=node,
        failures=[f.op_key for f in failures],
    )
    return not was_active and spare


def verdict(session: Session, step: NodeStep, wall: float, status: cib.ClusterStatus) -> str:
    """After the restart of the step's replica begun at ``wall`` (time.time()), seen in
    ``status``: it is active again, on the node or on a node this run gave the new image, with
    as many promoted instances as before, and it runs the target; the node attribute, the
    journal, a line for the operator. The node where it runs now; the real downtime goes into
    the step's result."""
    bundle, node, res, replica = step.bundle, step.node, step.res, step.chosen
    now = plan.health(status, bundle.id)
    start = session.baselines.get(bundle.id) or now
    updated = session.updated.get(bundle.id, set()) | {node}
    problems = plan.after_restart_problems(start, now, replica.replica, node, updated)
    if problems:
        raise RestartFailedError(
            f"restart of {bundle.id} on {node}: " + "; ".join(problems),
            f"see {cmd.quoted(cmd.status_xml())}",
        )
    where = now.active[replica.replica]
    res.down_seconds = session.downtime(where, replica.container_id, wall)
    res.container_after, running_image = session.container_image(where, replica.container_id)
    if running_image != step.target:
        raise RestartFailedError(
            f"the replica on {where} runs image {str(running_image)[:12]}, not {step.target[:12]}",
            "check the bundle's image in the CIB: it must be the floating name",
        )
    res.result = "ok"
    session.publish(bundle, node)
    session.record(
        "updated",
        service=bundle.service,
        node=node,
        image=step.target,
        container=res.container_after,
        seconds=round(res.restart_seconds, 3),
        down_seconds=res.down_seconds,
    )
    down = "" if res.down_seconds is None else f", down {res.down_seconds:.1f}s"
    moved = "" if where == node else f" (the replica moved to {where})"
    session.say(
        f"{node}: healthy on {step.target[:12]} after {res.restart_seconds:.1f}s{down}{moved}"
    )
    return where


def soak(session: Session, steps: Sequence[NodeStep], before: Sequence[cib.Failure]) -> None:
    """Watch the node's replicas of the watched steps for the session's soak: still active
    there, no new failed operation (since ``before``), as many promoted instances as when the
    run started; else the node failed."""
    node = steps[0].node
    session.say(f"{node}: soaking {session.soak:g}s")
    config = session.cluster.query_cib()
    end = time.monotonic() + session.soak
    while True:
        state = session.cluster.status()
        for step in steps:
            if step.watch:
                _still_healthy(session, step, state, (before, config))
        if time.monotonic() >= end:
            return
        time.sleep(min(1.0, max(0.0, end - time.monotonic())))


def _still_healthy(
    session: Session,
    step: NodeStep,
    state: cib.ClusterStatus,
    since: tuple[Sequence[cib.Failure], cib.Element],
) -> None:
    """One look of the soak at ``step``'s replica (``since``: the failures before the turn and
    the configuration)."""
    before, config = since
    bundle, node = step.bundle, step.node
    replica = state.replica_on(bundle.id, node)
    now = plan.health(state, bundle.id)
    start = session.baselines.get(bundle.id) or now
    problems = []
    if replica is None or not replica.active:
        problems.append(f"the replica of {bundle.id} is no longer active on {node}")
    else:
        failed = restart_rules.new_failures(
            before, state.failures, cib.bundle(config, bundle.id), replica, node
        )
        problems += [f"{f.op_key} failed on {f.node}" for f in failed]
    if now.promoted < start.promoted:
        problems.append(f"{now.promoted} promoted instance(s) of {bundle.id}, "
                        f"{start.promoted} before the release")  # fmt: skip
    if problems:
        raise RestartFailedError(
            f"during the soak on {node}: " + "; ".join(problems),
            f"see {cmd.quoted(cmd.status_xml())}",
        )
