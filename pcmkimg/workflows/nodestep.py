"""The node step: one node's turn of an update, a release or a rollback, in one place.

A :class:`NodeStep` is what one service's step on one node carries: the bundle, the node's
result (the report's), the target image (as named, and its ID), whether to restart, and, as the
step goes, the retag it did (the previous image), the replica it restarts and the holds it
runs under. :func:`turn` runs a node's steps (one service for an update or a rollback, every
service of the node for a release) with the run's :class:`~pcmkimg.workflows.session.Session`:

1. :func:`check_others`: every other replica as healthy as when the run started;
2. :func:`retag`: each floating name moved to its target (the rollback name keeps the old);
3. under one holding scope for the node: :func:`prepare` each step (heal what kept a replica
   off the node; decide whether it restarts), restart those that do together, judge each
   (:func:`verdict`), and watch them with ``--soak``;
4. on failure, every service moved on the node goes back (:func:`roll_back`).

A check before the node's first write plugs in as a function of the steps called at the top
of :func:`turn` (see ``checks`` there): it raises a
:class:`~pcmkimg.core.errors.PreflightFailed` to refuse the node untouched.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import NoReturn

from pcmkimg.adapters import journal as journals
from pcmkimg.adapters import podman as images
from pcmkimg.adapters.errors import BanNotRemovedError, RestartFailedError
from pcmkimg.core import cib, lease, naming, plan
from pcmkimg.core import commands as cmd
from pcmkimg.core import restart as restart_rules
from pcmkimg.core.errors import NodeUnreachable, PreflightFailed
from pcmkimg.core.reference import Reference
from pcmkimg.core.report import NodeResult, Result
from pcmkimg.errors import PcmkimgError
from pcmkimg.records import dataclass, field
from pcmkimg.workflows.context import HoldsPort
from pcmkimg.workflows.errors import RollbackFailed, UpdateFailed
from pcmkimg.workflows.session import Session


@dataclass
class NodeStep:
    """What one service's step on one node carries (see the module's text)."""

    bundle: plan.BundleRef
    res: NodeResult
    """The node's result for this service, in the report from the step's start."""
    ref: Reference | str
    """The target image as named (for the operator's lines)."""
    target: str
    """The target's image ID on the node."""
    restart: bool = True
    """False with ``--no-restart``: retag only."""
    watch: bool = False
    """Watched during a soak (the plan has a replica of it on the node)."""
    retag: images.Retagged | None = field(default=None, repr=False)
    """What :func:`retag` did: the previous image is its ``old_id``."""
    replica: cib.ReplicaStatus | None = field(default=None, repr=False)
    """The replica :func:`prepare` chose to restart (None: none restarts)."""
    holds: HoldsPort | None = field(default=None, repr=False)
    """The holds of the node's turn, once placed."""

    @property
    def node(self) -> str:
        return self.res.node

    @property
    def service(self) -> str:
        return self.bundle.service

    @property
    def chosen(self) -> cib.ReplicaStatus:
        """The replica to restart, once chosen."""
        assert self.replica is not None, "prepare() first"
        return self.replica

    @property
    def moved(self) -> images.Retagged:
        """The retag, once done."""
        assert self.retag is not None, "retag() first"
        return self.retag


Check = Callable[[Session, Sequence[NodeStep], cib.ClusterStatus], None]
"""A check of a node's steps before its first write: raises to refuse the node untouched."""


def turn(session: Session, steps: Sequence[NodeStep], checks: Sequence[Check] = ()) -> None:
    """One node's turn (see the module's text). ``checks`` run after the health check, with
    the turn's look at the cluster, before anything is written. An interruption (Ctrl-C,
    SIGTERM) after a retag is not rolled back: the node keeps the floating name, and running
    the same command again finishes the job."""
    status = session.cluster.status()  # one look for every step's check and restart
    for step in steps:
        check_others(session, step, status)
    for check in checks:
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


# --------------------------------------------------------------------------- the rollback


@dataclass(frozen=True)
class Undo:
    """One service to put back on a node: its step, and the retag to undo (this run's, or on
    a re-run an earlier run's)."""

    step: NodeStep
    retag: images.Retagged


def roll_back_failed(session: Session, steps: Sequence[NodeStep], exc: PcmkimgError) -> NoReturn:
    """After ``exc`` in a node's turn: every service moved on the node goes back (names
    restored, replicas restarted together on the previous images) under the turn's holds; not
    once the lease may be another's (:class:`~pcmkimg.core.lease.LeaseError`). Raises what
    the operator is told: the node was rolled back (or left the cluster: only its names went
    back), or ``exc`` itself where a single service's step changed nothing to undo."""
    node = steps[0].node
    undos = []
    for step in steps:
        res = step.res
        if res.result == "pending":
            session.record("failed", service=step.service, node=node, error=exc.one_line())
        # A release undoes this run's retag, or an earlier run's for a replica restarted now.
        considered = not session.release or step.moved.moved or res.restarted
        undo = undo_for(session, step, exc) if considered else None
        if undo is None:
            if res.result == "pending":
                res.result = "failed" if res.restarted or not session.release else "unchanged"
            continue
        undos.append(Undo(step, undo))
    if not undos:
        if not session.release:
            session.say(f"{node}: FAILED: {exc.message}")
            session.check_lease()
            raise exc
        raise _failure(session, steps, exc, here=True) from exc
    session.say(f"{node}: FAILED: {exc.message}")
    # A rollback changes the node's store and restarts its replicas: not once the lease may
    # be another's (cut off from the others, the restart failed for that reason).
    session.check_lease()
    here = roll_back(session, undos)
    for u in undos:
        u.step.res.result = "rolled-back"
    raise _failure(session, steps, exc, here=here) from exc


def _failure(
    session: Session, steps: Sequence[NodeStep], exc: PcmkimgError, *, here: bool
) -> UpdateFailed:
    """What the operator is told of a node rolled back after ``exc`` (``here``: the node is
    in the cluster; else it left it during its restart, and only its names went back)."""
    node = steps[0].node
    back = (
        f"bring {node} back into the cluster (its corosync, pacemaker and "
        f"network; {cmd.quoted(cmd.cluster_state())}): its replica"
    )
    if session.release and not here:
        return UpdateFailed(
            f"release failed on {node}, which left the cluster during its restart "
            f"({exc.message}); the names of every service moved there were rolled back",
            f"{back}s then start on the previous images; then run the release again; the "
            "nodes after it were not touched",
        )
    if session.release:
        return UpdateFailed(
            f"release failed on {node}; every service moved there went back to its "
            f"previous image: {exc.message}",
            exc.fix,
        )
    step = steps[0]
    if not here:
        return UpdateFailed(
            f"update of {step.service} failed on {node}, which left the cluster "
            f"during its restart ({exc.message}); its names were rolled back",
            f"{back} then starts on the previous image; then run the update again; the "
            "nodes after it were not touched",
        )
    return UpdateFailed(
        f"update of {step.service} failed on {node} and was rolled back: {exc.message}",
        f"{step.ref} does not run here: fix the image or choose another, then run the "
        f"update again; {node} runs the previous image, the nodes after it were "
        "not touched"
        if isinstance(exc, RestartFailedError)
        else exc.fix,
    )


def undo_for(session: Session, step: NodeStep, exc: PcmkimgError) -> images.Retagged | None:
    """What to undo on the step's node after ``exc``: this run's retag when it moved the name;
    on a re-run (the name was moved by an earlier, interrupted run), a start that failed on
    the new image goes back to what that run moved it from (its journal says; else the image
    kept under the rollback name), and the step's result says so; anything else changed
    nothing here (None)."""
    if step.moved.moved:
        return step.moved
    earlier = earlier_retag(session, step) or previous_retag(session, step)
    if earlier is None or not isinstance(exc, RestartFailedError):
        return None
    step.res.before = earlier.old_id
    return earlier


def earlier_retag(session: Session, step: NodeStep) -> images.Retagged | None:
    """The retag of an earlier run that moved the floating name on the step's node to its
    target, from the journal: what to undo exactly on a re-run."""
    bundle, node, target = step.bundle, step.node, step.target
    found = None
    try:
        for entry in journals.history(session.journal.path.parent, bundle.service):
            if (
                entry.get("event") == "retag"
                and entry.get("node") == node
                and entry.get("moved")
                and entry.get("after") == target
                and entry.get("floating") == bundle.floating
            ):
                found = entry
    except PcmkimgError:
        return None
    if found is None or not found.get("rollback"):
        return None
    return images.Retagged(
        node,
        bundle.floating,
        found.get("before"),
        target,
        moved=True,
        rollback_name=found.get("rollback"),
        rollback_before=found.get("rollback_before"),
    )


def previous_retag(session: Session, step: NodeStep) -> images.Retagged | None:
    """A re-run with no journal of the earlier retag: undo it as a swap with the image under
    the rollback name (the rollback name then keeps the target), if there is one other than
    the target."""
    store = session.stores.get(step.node)
    back = naming.rollback_for(step.bundle.ref, store.scheme)
    try:
        held = store.resolve(back)
    except PcmkimgError:
        return None
    if isinstance(held, images.Resolved) and held.id != step.target:
        return images.Retagged(
            store.node,
            step.bundle.floating,
            held.id,
            step.target,
            moved=True,
            rollback_name=str(back),
            rollback_before=step.target,
        )
    return None


def roll_back(session: Session, undos: Sequence[Undo]) -> bool:
    """Put the floating and rollback names of every service of ``undos`` (all on one node)
    back exactly as they were before its retag and bring their replicas back on the previous
    images: those down cleaned up and started, those on another image restarted together
    (one :meth:`~pcmkimg.workflows.context.ClusterPort.restart_replicas`); all under the
    failed restart's holds, so that they can only come back on their node. One service:
    what an update's failed node does; several: a release's. False when the node is not
    online (it left the cluster): only the names were put back, its replicas start on them
    when it rejoins."""
    node = undos[0].step.node
    services = ", ".join(u.step.service for u in undos)
    fixes = "; ".join(
        f"on {node}: "
        + cmd.quoted(
            cmd.tag(
                u.retag.rollback_name
                or str(naming.rollback_for(u.step.bundle.ref, session.stores.get(node).scheme)),
                u.step.bundle.floating,
            )
        )
        + f", then {cmd.quoted(cmd.cleanup(u.step.bundle.id, node))}"
        for u in undos
    )

    def failed(error: str) -> None:
        for u in undos:
            u.step.res.result = "rollback-failed"
            session.record("rollback-failed", service=u.step.service, node=node, error=error)

    for u in undos:
        if u.step.res.before is None:
            failed("no previous")
            raise RollbackFailed(
                f"update of {u.step.service} failed on {node}, which had no image behind "
                f"{u.step.bundle.floating} before: there is nothing to roll back to",
                f"fix the image, then {cmd.quoted(cmd.update(node, u.step.service))}",
            )
    for u in undos:
        what = f" {u.step.service}" if len(undos) > 1 else ""
        session.say(f"{node}: rolling back{what} to {str(u.step.res.before)[:12]}")
    try:
        here = _put_back(session, undos)
    except (BanNotRemovedError, lease.LeaseError) as exc:
        failed(exc.one_line())
        raise  # its own message and fix say what is left behind
    except PcmkimgError as exc:
        failed(exc.one_line())
        if isinstance(exc, NodeUnreachable):
            # The node's store went away (its podman API): once it is back, the same command
            # finishes the node; going back by hand is the other way.
            fixes = (
                f"{exc.fix}, then run the same command again: it finishes {node} (the "
                "journal's retag lines say what each floating name named before and after); "
                f"or go back by hand: {fixes}"
            )
        raise RollbackFailed(
            f"update of {services} failed on {node}, and so did its rollback: {exc.message}",
            fixes,
        ) from exc
    if not here:
        return False
    for u in undos:
        u.step.res.rolled_back = True
        session.record("rolled-back", service=u.step.service, node=node)
    session.say(f"{node}: rolled back; the replica{'' if len(undos) == 1 else 's'} "
                f"run{'s' if len(undos) == 1 else ''} the previous image again")  # fmt: skip
    return True


def _put_back(session: Session, undos: Sequence[Undo]) -> bool:
    """The names of ``undos`` restored, their replicas brought back and checked (see
    :func:`roll_back`); False when the node is not online."""
    cluster, node = session.cluster, undos[0].step.node
    holds = undos[0].step.holds
    for u in undos:
        session.stores.get(node).restore(u.retag)
    status = cluster.status()
    known = status.node(node)
    if known is None or not known.online:
        for u in undos:
            u.step.res.rolled_back = True
            session.record("rolled-back", service=u.step.service, node=node, offline=True)
        session.say(
            f"{node}: rolled back its names; the node is not in the cluster: its "
            "replicas start on the previous images when it rejoins"
        )
        return False
    # A service not restarted here whose bundle had no replica active on the node when the
    # run started (its spare node: every replica placed elsewhere) had only its names moved:
    # they are back, and no replica of it is to start here.
    placed = [u for u in undos if _had_replica(session, u.step, status)]
    down = [u for u in placed if _down(status.replica_on(u.step.bundle.id, node))]
    for u in down:
        cluster.cleanup(u.step.bundle.id, node)
    if down:
        cluster.settle(session.timeout)
        status = cluster.status()
    replicas = {u.step.bundle.id: status.replica_on(u.step.bundle.id, node) for u in placed}
    one = len(undos) == 1
    for u in placed:
        replica = replicas[u.step.bundle.id]
        if replica is None or not replica.active:
            raise RestartFailedError(
                f"the replica{'' if one else ' of ' + u.step.bundle.id} did not "
                f"start again on {node}",
                f"see {cmd.quoted(cmd.status_xml())} for the cause",
            )

    def running(u: Undo) -> str | None:
        replica = replicas[u.step.bundle.id]
        assert replica is not None
        return session.container_image(node, replica.container_id)[1]

    again = [u for u in placed if running(u) != u.step.res.before]
    if len(again) == 1:
        cluster.restart_replica(again[0].step.bundle.id, node, session.timeout, holds=holds)
    elif again:
        ids = [u.step.bundle.id for u in again]
        cluster.restart_replicas(ids, node, session.timeout, holds=holds)
    for u in placed:
        now = running(u)
        if now != u.step.res.before:
            raise RestartFailedError(
                f"the replica{'' if one else ' of ' + u.step.bundle.id} on {node} "
                f"runs {str(now)[:12]}, not {str(u.step.res.before)[:12]}",
                f"see {cmd.quoted(cmd.status())}",
            )
    for u in undos:
        session.publish(u.step.bundle, node)
    return True


def _had_replica(session: Session, step: NodeStep, status: cib.ClusterStatus) -> bool:
    """Whether the step's bundle has a replica to bring back on its node: restarted there by
    this run, placed there now, or active there when the run started (unknown: assumed)."""
    baseline = session.baselines.get(step.bundle.id)
    return (
        step.res.restarted
        or status.replica_on(step.bundle.id, step.node) is not None
        or baseline is None
        or step.node in baseline.active.values()
    )


def _down(replica: cib.ReplicaStatus | None) -> bool:
    return replica is None or not replica.active or replica.failed
