"""What an update runs: a release, node by node, in one run (one service or several).

Every service of the release moves to its image on a node in that node's one turn: after one
lease, one preflight of every bundle, and the pulls (each reference once per node, before any
restart), each node in turn (see :func:`pcmkimg.core.release.plan_release` for the order), the
node step of :mod:`pcmkimg.workflows.nodestep`:

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

A single service (``update SERVICE --image REF``) is the same machinery with one service
(:func:`pcmkimg.core.release.of_update`); its session words its journal and its failures as an
update's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from pcmkimg.adapters import lease as leasing
from pcmkimg.core import plan, release
from pcmkimg.core.errors import PreflightFailed
from pcmkimg.core.report import NodeResult
from pcmkimg.workflows.nodestep import turn
from pcmkimg.workflows.session import Session
from pcmkimg.workflows.step import NodeStep


class Turns(Protocol):
    """A report a run fills in node by node (an update's or a release's)."""

    def turn(self, node: str, services: Sequence[str]) -> dict[str, NodeResult]: ...

    def summary(self) -> str: ...


def execute(session: Session, the_plan: release.ReleasePlan, report: Turns) -> None:
    """Run ``the_plan``: the lease, the preflight, the pulls, each node's turn; ``report`` is
    filled in as the nodes go, also on failure."""
    bundles = [item.bundle for item in the_plan.items]
    services = [b.service for b in bundles]
    for item in the_plan.items:
        more = {"release": services} if session.release else {}
        session.record(
            "start",
            service=item.bundle.service,
            bundle=item.bundle.id,
            target=str(item.entry.image),
            nodes=list(the_plan.targets),
            **more,
        )
    # Renewed from a background thread until released: through the pulls, the restarts and
    # the rollbacks, with no CIB write of ours before any of them.
    with leasing.held(session.cluster, session.lease_period, say=session.say) as held:
        session.holding = held
        session.say(f"lease taken ({held.host}, pid {held.pid}, period {held.period:g}s)")
        _preflight(session, the_plan)
        ids = _pull(session, the_plan)
        for node_turn in the_plan.turns:
            session.check_lease()
            session.clear_written_back(bundles)  # one read for every bundle
            results = report.turn(node_turn.node, node_turn.services)
            steps = [
                NodeStep(
                    the_plan.item(s).bundle,
                    results[s],
                    the_plan.item(s).entry.image,
                    ids[str(the_plan.item(s).entry.image)][node_turn.node],
                    restart=the_plan.restart,
                    watch=s in node_turn.restart,
                )
                for s in node_turn.services
            ]
            turn(session, steps)
        session.clear_written_back(bundles)
    session.holding = None
    for item in the_plan.items:
        session.record("done", service=item.bundle.service, summary=report.summary())


def _preflight(session: Session, the_plan: release.ReleasePlan) -> None:
    """The preflight for every bundle, in one read (again after removing what a killed restart
    left); every problem of every bundle at once."""
    cluster = session.preflight_read([i.bundle for i in the_plan.items])
    problems: list[str] = []
    for item in the_plan.items:
        bundle = item.bundle
        nodes = [t.node for t in the_plan.turns if bundle.service in t.services]
        missing = session.missing(nodes, bundle.ref)
        found = plan.preflight_problems(cluster, bundle.id, nodes, missing)
        problems += [f"{bundle.service}: {p}" for p in found] if session.release else found
        session.baselines[bundle.id] = plan.health(cluster.status, bundle.id)
    session.snapshot = cluster.config  # the bundles' definitions, read under the lease
    if problems and session.release:
        raise PreflightFailed(
            "release refused: " + "; ".join(dict.fromkeys(problems)),
            "fix these, then run the release again (`pcmkimg check` lists them)",
        )
    if problems:
        raise PreflightFailed(
            "update refused: " + "; ".join(problems),
            "fix these, then run the update again (`pcmkimg check` lists them)",
        )


def _pull(session: Session, the_plan: release.ReleasePlan) -> dict[str, dict[str, str]]:
    """Each distinct reference once on every node that needs it (the nodes in parallel, one
    pull at a time per node), before any retag: reference -> node -> image ID. A failed pull
    anywhere changes nothing anywhere."""
    ids: dict[str, dict[str, str]] = {}
    for item in the_plan.items:
        ref = str(item.entry.image)
        if ref in ids:
            continue
        nodes = [n for n, refs in the_plan.pulls.items() if ref in refs]
        ids[ref] = session.pull_all(nodes, item.entry.image, item.entry.digest)
    return ids
