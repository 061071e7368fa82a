"""Putting a node back after its step failed: every service moved there returns to the image
it ran before (names restored exactly, replicas brought back and verified), under the failed
step's holds; what the operator is told then.

Called by the node step (:mod:`pcmkimg.workflows.nodestep`) with the run's
:class:`~pcmkimg.workflows.session.Session` and the node's
:class:`~pcmkimg.workflows.step.NodeStep` records.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NoReturn

from pcmkimg.adapters import journal as journals
from pcmkimg.adapters import podman as images
from pcmkimg.adapters.errors import BanNotRemovedError, RestartFailedError
from pcmkimg.core import cib, lease, naming
from pcmkimg.core import commands as cmd
from pcmkimg.core.errors import NodeUnreachable
from pcmkimg.errors import PcmkimgError
from pcmkimg.workflows.errors import RollbackFailed, UpdateFailed
from pcmkimg.workflows.session import Session
from pcmkimg.workflows.step import NodeStep, Undo


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
