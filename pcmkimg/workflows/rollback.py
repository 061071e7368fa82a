"""``pcmkimg rollback``: the floating name back to the rollback image on one node.

The same node step as an update (:func:`pcmkimg.workflows.nodestep.turn`), to the image kept
under the rollback name: a retag (a swap: the rollback name then keeps the image it replaced)
and a restart of that node's replica, checked and rolled back on failure like any update.
"""

from __future__ import annotations

from pcmkimg.adapters import journal
from pcmkimg.adapters import lease as leasing
from pcmkimg.adapters import podman as images
from pcmkimg.adapters.errors import RestartFailedError
from pcmkimg.adapters.journal import Journal
from pcmkimg.core import commands as cmd
from pcmkimg.core import naming, plan
from pcmkimg.core.errors import PreflightFailed
from pcmkimg.core.reference import Reference
from pcmkimg.core.report import NodeResult
from pcmkimg.core.tagplan import HOLD_TAG, unswap_plan
from pcmkimg.errors import PcmkimgError
from pcmkimg.records import dataclass
from pcmkimg.workflows.context import Context
from pcmkimg.workflows.errors import UpdateFailed
from pcmkimg.workflows.nodestep import turn
from pcmkimg.workflows.session import Session
from pcmkimg.workflows.step import NodeStep


@dataclass(frozen=True)
class RollbackRequest:
    """``pcmkimg rollback SERVICE --node N``."""

    service: str
    node: str
    timeout: float = 300


@dataclass(frozen=True)
class RollbackReport:
    """What ``rollback`` did: the bundle, the node's result, the image it went back to."""

    bundle: plan.BundleRef
    result: NodeResult
    image_id: str


def run(ctx: Context, req: RollbackRequest) -> RollbackReport:
    """Roll ``req.service`` back on ``req.node``."""
    node = req.node
    cluster = ctx.cluster.read_cluster()
    bundle = plan.find_bundle(cluster, req.service, ctx.scheme)
    plan.choose_nodes(bundle, plan.node_facts(cluster, bundle.id), [node])
    back = naming.rollback_name(bundle.service, ctx.scheme)
    jrnl = ctx.journal()
    with (
        ctx.open_stores() as stores,
        leasing.held(ctx.cluster, ctx.lease_period, say=ctx.say) as held,
    ):  # renewed in the background until released
        _undo_interrupted_swap(stores.get(node), jrnl, bundle, back, ctx.say)
        target = stores.get(node).resolve(back)
        if not isinstance(target, images.Resolved):
            raise PreflightFailed(
                f"{back} does not exist on {node}: there is nothing to roll back to",
                f"use {cmd.shown(cmd.update(node, bundle.service))}",
            )

        session = Session(
            ctx.cluster, stores, jrnl, ctx.say, req.timeout, ctx.lease_period, holding=held
        )
        read = session.preflight_read([bundle])
        session.baselines[bundle.id] = plan.health(read.status, bundle.id)
        res = NodeResult(node)
        session.record("rollback", service=bundle.service, node=node, to=target.id)
        try:
            turn(session, [NodeStep(bundle, res, back, target.id)])
        except UpdateFailed as exc:
            cause = exc.__cause__
            said = cause.message if isinstance(cause, PcmkimgError) else exc.message
            raise UpdateFailed(
                f"rollback of {bundle.service} on {node} failed, and {node} was put back on "
                f"the image it ran before: {said}",
                f"the image under {back} does not start on {node}; update the node to a "
                "working image instead"
                if isinstance(cause, RestartFailedError)
                else exc.fix,
            ) from exc
    return RollbackReport(bundle, res, target.id)


def _undo_interrupted_swap(
    store: images.Store, jrnl: Journal, bundle: plan.BundleRef, back: Reference, say: plan.Say
) -> None:
    """Put the names back as they were before a rollback on this node that stopped in the
    middle of its swap (killed, or its store went away), so that this run does that rollback.

    Its trace is the hold name on the image it was moving the floating name to, and the journal
    saying that the last rollback on the node, toward that image, did not get to its retag. A
    hold name the journal does not explain is refused: which image is which is then a person's
    call."""
    hold = back.with_tag(HOLD_TAG)
    held = store.inspect(str(hold))
    if held is None:
        return
    if held.id != _unfinished_rollback(jrnl, bundle.service, store.node):
        raise PreflightFailed(
            f"{hold} names {held.id[:12]} on {store.node}: a move of the floating name there "
            "was interrupted, and the journal does not say it was a rollback to that image",
            f"see `pcmkimg history {bundle.service}`, give {bundle.floating} and {back} "
            f"the images they should name (`podman tag IMAGE NAME`), then "
            f"`podman untag {held.id[:12]} {hold}`",
        )
    ops = unswap_plan(
        bundle.ref,
        back,
        held=held,
        now=store.inspect(str(bundle.ref)),
        holder=store.inspect(str(back)),
    )
    store.apply(ops)
    say(f"{store.node}: an interrupted rollback left {hold}: names put back as before it")


def _unfinished_rollback(jrnl: Journal, service: str, node: str) -> str | None:
    """The image the last rollback on ``node`` was moving the floating name to, if no retag
    was journaled on the node after it."""
    pending = None
    for entry in journal.history(jrnl.path.parent, service):
        if entry.get("node") != node:
            continue
        if entry.get("event") == "rollback":
            pending = entry.get("to")
        elif entry.get("event") == "retag":
            pending = None
    return pending
