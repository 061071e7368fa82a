"""``pcmkimg update``: plans, then runs the plan node by node, and rolls a failed node back.

Everything here goes through the context's two ports (:mod:`pcmkimg.workflows.context`): the
cluster port (``ctx.cluster``) and the stores port (a store per node). The decisions are made
by the pure core (:mod:`pcmkimg.core.plan`, :mod:`pcmkimg.core.restart`,
:mod:`pcmkimg.core.cib`); this module runs them, journals each step and cleans up.
:class:`Updater` is the node step that ``rollback`` shares.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from pcmkimg.adapters import lease as leasing
from pcmkimg.adapters import pacemaker
from pcmkimg.adapters import podman as images
from pcmkimg.adapters.journal import Journal
from pcmkimg.core import cib, lease, naming, plan
from pcmkimg.core import commands as cmd
from pcmkimg.core import restart as restart_rules
from pcmkimg.core.reference import Reference, parse
from pcmkimg.core.report import NodeResult, Result, UpdateReport
from pcmkimg.errors import (
    BadInput,
    LeftBehind,
    NodeFailed,
    PcmkimgError,
    Unreachable,
    UsageError,
)
from pcmkimg.workflows.context import ClusterPort, Context, HoldsPort, StoresPort


class PullsFailed(Unreachable):
    """A pull failed on at least one node; nothing was retagged or restarted."""


class DigestRefused(BadInput):
    """The image pulled under the given tag has another digest than the one asked for;
    nothing was retagged or restarted."""


class PullCancelled(Exception):
    """Raised in a pull's progress once the update was interrupted: that pull stops."""


class UpdateFailed(NodeFailed):
    """The update failed on a node, and that node was rolled back."""


class RollbackFailed(LeftBehind):
    """The update failed on a node and rolling that node back failed too."""


def _quiet(_: str) -> None:
    pass


# --------------------------------------------------------------------------- update


@dataclass
class Updater:
    """Runs an update's (or a rollback's) node steps through the context's two ports."""

    cluster: ClusterPort
    stores: StoresPort
    journal: Journal
    say: plan.Say = _quiet
    timeout: float = 300
    lease_period: float = lease.DEFAULT_PERIOD
    """The lease's period; renewed in the background every third of it, never by a step."""
    progress: images.ProgressCallback | None = None
    """Shows the pulls (pcmkimg.progress.PullDisplay); None: cached/retry/done lines via say."""
    baseline: plan.Health | None = None
    """The bundle's health when the update started: each node's turn is checked against it."""
    updated: set[str] = field(default_factory=set)
    """Nodes whose floating name this run moved to the target."""
    holding: leasing.Holding | None = field(default=None, repr=False)
    """The lease this run holds (None: none, e.g. a rollback holds its own)."""

    def check_lease(self) -> None:
        """:class:`~pcmkimg.core.lease.LeaseLostError` when our lease was lost (no CIB access:
        the background renewals say it)."""
        if self.holding is not None:
            self.holding.check()

    def record(self, event: str, **fields: object) -> None:
        """Journal a step. A journal that can't be written (a full disk) must not stop an
        update half-way: the failure is said, and the update goes on."""
        try:
            self.journal.record(event, **fields)
        except OSError as exc:
            self.say(f"could not write the journal {self.journal.path}: {exc.strerror}")

    # -- steps ----------------------------------------------------------------------------

    def missing(self, nodes: Sequence[str], floating: Reference | str) -> set[str]:
        """The nodes where ``floating`` does not resolve (a store that can't be read is not
        counted: the pulls say what is wrong with it)."""
        found = self.stores.each(nodes, lambda s: s.resolve(floating))
        return {n for n, r in found.items() if isinstance(r, images.Unresolved)}

    def pull_all(self, nodes: Sequence[str], ref: Reference, digest: str | None) -> dict:
        """Pull on every node in parallel. An interruption ends the wait at once (the pulls
        left running in the background stop reporting and die with the process)."""
        cancelled = threading.Event()

        def progress(p: images.PullProgress) -> None:
            if cancelled.is_set():
                raise PullCancelled("the update was interrupted during the pulls")
            if self.progress is not None:
                self.progress(p)
            elif p.kind in ("cached", "retry", "done"):
                self.say(f"  {p.node}: {p.kind}: {p.text}")

        self.say(f"pulling {ref} on {', '.join(nodes)}")
        try:
            results = self.stores.each(
                nodes, lambda s: s.pull(ref, expected_digest=digest, progress=progress)
            )
        except BaseException:
            cancelled.set()
            raise
        failed = {n: r for n, r in results.items() if isinstance(r, Exception)}
        for node, res in results.items():
            ok = not isinstance(res, Exception)
            self.record(
                "pull", node=node, ref=str(ref), ok=ok, detail=res.resolved.id if ok else str(res)
            )
        wrong = [e for e in failed.values() if isinstance(e, images.DigestMismatch)]
        if wrong:
            raise DigestRefused(
                f"update refused, nothing was retagged or restarted: {wrong[0].message}",
                wrong[0].fix,
            )
        if failed:
            first = next(iter(failed.values()))
            raise PullsFailed(
                "pull failed, nothing was retagged or restarted: "
                + "; ".join(
                    f"{n}: {e.message if isinstance(e, PcmkimgError) else e}"
                    for n, e in failed.items()
                ),
                first.fix if isinstance(first, PcmkimgError) else "",
            )
        return {n: r.resolved.id for n, r in results.items()}

    def container_image(self, node: str, container: str | None) -> tuple[str | None, str | None]:
        """(container ID, image ID) of the running container named ``container`` on ``node``."""
        if not container:
            return None, None
        for c in self.stores.get(node).containers(running_only=True):
            if c.name.lstrip("/") == container:
                return c.id, c.image_id
        return None, None

    def update_node(
        self,
        bundle: plan.BundleRef,
        res: NodeResult,
        ref: Reference | str,
        target_id: str,
        restart: bool,
    ) -> NodeResult:
        """Check the other replicas, retag, then restart if needed and verify; roll this node
        back if that fails, to exactly the names it had before.

        An interruption (Ctrl-C, SIGTERM) after the retag is not rolled back: the node keeps
        the floating name, and running the same update again finishes the job.
        """
        self.check_others(bundle, res.node)
        retag = self.retag_node(bundle, res, ref, target_id)
        return self.restart_node(bundle, res, ref, target_id, restart, retag)

    def retag_node(
        self, bundle: plan.BundleRef, res: NodeResult, ref: Reference | str, target_id: str
    ) -> images.Retagged:
        """Move the floating name on ``res.node`` to ``target_id`` (the rollback name keeps
        what it named), journaled; ``res`` says what moved."""
        node = res.node
        retag = self.stores.get(node).retag(bundle.ref, target_id)
        res.before = retag.old_id
        res.retagged = retag.moved
        res.after = retag.new_id
        self.record(
            "retag",
            service=bundle.service,
            node=node,
            floating=bundle.floating,
            before=res.before,
            after=res.after,
            moved=retag.moved,
            rollback=retag.rollback_name,
            rollback_before=retag.rollback_before,
        )
        if retag.moved:
            self.updated.add(node)
            self.say(f"{node}: {bundle.floating} now names {ref} ({target_id[:12]})")
        return retag

    def restart_node(
        self,
        bundle: plan.BundleRef,
        res: NodeResult,
        ref: Reference | str,
        target_id: str,
        restart: bool,
        retag: images.Retagged,
    ) -> NodeResult:
        """After :meth:`retag_node`: restart the replica if needed and verify; roll this node
        back if that fails, to exactly the names it had before."""
        node = res.node
        try:
            # The holds of a restart that fails stay until the rollback is done: the replica
            # can only come back here, on the previous image.
            with self.cluster.holding(bundle.id, self.timeout) as holds:
                return self._update_or_roll_back(bundle, res, ref, target_id, restart, retag, holds)
        except (pacemaker.BanNotRemovedError, lease.LeaseError) as exc:
            # A ban left behind, or the lease lost to another process: no rollback now, it
            # could not work (the ban) or would race the other holder (the lease).
            if res.result not in ("rolled-back", "rollback-failed"):
                res.result = "failed"
                self.record("failed", service=bundle.service, node=node, error=exc.one_line())
            raise

    def _update_or_roll_back(
        self,
        bundle: plan.BundleRef,
        res: NodeResult,
        ref: Reference | str,
        target_id: str,
        restart: bool,
        retag: images.Retagged,
        holds: HoldsPort,
    ) -> NodeResult:
        node = res.node
        try:
            return self._restart_if_needed(bundle, res, target_id, restart, retag, holds)
        except (pacemaker.BanNotRemovedError, lease.LeaseError):
            raise
        except PcmkimgError as exc:
            self.record("failed", service=bundle.service, node=node, error=exc.one_line())
            self.say(f"{node}: FAILED: {exc.message}")
            undo = retag
            if not retag.moved:
                # A re-run: the name was moved by an earlier, interrupted run. A start that
                # failed on the new image is rolled back to what that run moved it from (its
                # journal says; else the image kept under the rollback name); anything else
                # changed nothing here and is reported as it is.
                store = self.stores.get(node)
                earlier = self.earlier_retag(bundle, node, target_id) or self.previous_retag(
                    bundle, store, target_id
                )
                if earlier is None or not isinstance(exc, pacemaker.RestartFailedError):
                    res.result = "failed"
                    raise
                undo = earlier
                res.before = earlier.old_id
            self.rollback_node(bundle, node, res, undo, holds)
            res.result = "rolled-back"
            raise UpdateFailed(
                f"update of {bundle.service} failed on {node} and was rolled back: {exc.message}",
                f"{ref} does not run here: fix the image or choose another, then run the "
                f"update again; {node} runs the previous image, the nodes after it were "
                "not touched"
                if isinstance(exc, pacemaker.RestartFailedError)
                else exc.fix,
            ) from exc

    def clear_written_back(self, bundle: plan.BundleRef) -> None:
        """Between two nodes no ban or pin of ours is in force: remove any that another
        writer put back after our restart removed it (a stale replace of the configuration,
        as ``pcs resource update`` makes: it reads, edits and replaces the section whole). A
        ban on a node done before would stop its replica again. Then wait for the cluster to
        settle, so that the next node's check sees that replica back."""
        left = self.cluster.remove_own_bans(bundle.id)
        if left:
            for cid in left:
                self.say(f"removed {cid}: another CIB writer had put it back")
            self.record("leftover-bans", service=bundle.service, removed=left)
            self.cluster.settle(self.timeout)

    def check_others(self, bundle: plan.BundleRef, node: str) -> None:
        """Refuse to touch ``node`` unless every other replica that was active when the update
        started is active, with as many promoted instances."""
        if self.baseline is None:
            return
        problems = plan.before_node_problems(
            self.baseline, plan.health(self.cluster.status(), bundle.id), node
        )
        if problems:
            raise plan.PreflightFailed(
                f"update of {bundle.service} stopped before {node}, which was not touched: "
                + "; ".join(problems),
                f"bring those replicas back ({cmd.quoted(cmd.status())}, "
                f"{cmd.quoted(cmd.status_xml())}), then run the update "
                "again: the nodes done so far are not redone",
            )

    def _no_restart(
        self,
        bundle: plan.BundleRef,
        res: NodeResult,
        retag: images.Retagged,
        result: Result,
        text: str,
        *,
        kept: bool,
    ) -> NodeResult:
        """The node is done without a restart: its result, the same container after as before
        when ``kept``, the node attribute once the name moved, and a line for the operator."""
        res.result = result
        if kept:
            res.container_after = res.container_before
        if retag.moved:
            self.publish(bundle, res.node)
        self.say(f"{res.node}: {text}")
        return res

    def _restart_if_needed(
        self,
        bundle: plan.BundleRef,
        res: NodeResult,
        target_id: str,
        restart: bool,
        retag: images.Retagged,
        holds: HoldsPort,
    ) -> NodeResult:
        node = res.node
        status = self.cluster.status()
        started_here = restart and self.heal(
            bundle, node, status, holds, missing=retag.old_id is None
        )
        if started_here:
            status = self.cluster.status()
        replica = status.replica_on(bundle.id, node)
        container = replica.container_id if replica and replica.active else None
        res.container_before, running_image = self.container_image(node, container)
        if started_here:
            if container is None:
                raise pacemaker.RestartFailedError(
                    f"the replica did not start on {node} after the cleanup of its failed start",
                    f"see {cmd.quoted(cmd.status_xml())} for the failed start",
                )
            if running_image != target_id:
                raise pacemaker.RestartFailedError(
                    f"the replica started on {node} runs {str(running_image)[:12]}, "
                    f"not {target_id[:12]}",
                    "check the bundle's image in the CIB: it must be the floating name",
                )
            text = f"the replica runs again, on {str(running_image)[:12]}"
            return self._no_restart(bundle, res, retag, "started", text, kept=True)
        if container is None:
            text = "no replica runs here; a later start uses the new image"
            return self._no_restart(bundle, res, retag, "retag-only", text, kept=False)
        if running_image == target_id:
            text = f"the replica already runs {target_id[:12]}: no restart"
            return self._no_restart(bundle, res, retag, "unchanged", text, kept=True)
        if not restart:
            text = "--no-restart: the replica keeps running the old image"
            return self._no_restart(bundle, res, retag, "retag-only", text, kept=False)
        assert replica is not None
        self.say(f"{node}: restarting {container} (waiting up to {self.timeout:.0f}s)")
        self.record("restart", service=bundle.service, node=node, container=container)
        res.restarted = True
        where = self.restart(bundle, node, replica, res, holds)
        res.container_after, running_image = self.container_image(where, container)
        if running_image != target_id:
            raise pacemaker.RestartFailedError(
                f"the replica on {where} runs image {str(running_image)[:12]}, "
                f"not {target_id[:12]}",
                "check the bundle's image in the CIB: it must be the floating name",
            )
        res.result = "ok"
        self.publish(bundle, node)
        self.record(
            "updated",
            service=bundle.service,
            node=node,
            image=target_id,
            container=res.container_after,
            seconds=round(res.restart_seconds, 3),
            down_seconds=res.down_seconds,
        )
        down = "" if res.down_seconds is None else f", down {res.down_seconds:.1f}s"
        moved = "" if where == node else f" (the replica moved to {where})"
        self.say(
            f"{node}: healthy on {target_id[:12]} after {res.restart_seconds:.1f}s{down}{moved}"
        )
        return res

    def restart(
        self,
        bundle: plan.BundleRef,
        node: str,
        replica: cib.ReplicaStatus,
        res: NodeResult,
        holds: HoldsPort,
    ) -> str:
        """Restart ``replica`` on ``node``; check it is active again, on ``node`` or on a node
        this update gave the new image, with as many promoted instances as before. The node
        where it runs now; the restart's wall time and the real downtime go into ``res``."""
        wall, started = time.time(), time.monotonic()
        try:
            self.cluster.restart_replica(bundle.id, node, self.timeout, holds=holds)
        finally:
            res.restart_seconds = round(time.monotonic() - started, 3)
        now = plan.health(self.cluster.status(), bundle.id)
        start = self.baseline or now
        problems = plan.after_restart_problems(
            start, now, replica.replica, node, self.updated | {node}
        )
        if problems:
            raise pacemaker.RestartFailedError(
                f"restart of {bundle.id} on {node}: " + "; ".join(problems),
                f"see {cmd.quoted(cmd.status_xml())}",
            )
        where = now.active[replica.replica]
        res.down_seconds = self.downtime(where, replica.container_id, wall)
        return where

    def downtime(self, node: str, container: str, since: float) -> float | None:
        """How long no container named ``container`` ran since ``since``, from the node's
        podman events (informative: None when they can't be read)."""
        try:
            events = self.stores.get(node).container_events(container, since, time.time())
        except PcmkimgError:
            return None
        return images.downtime(events, since)

    def earlier_retag(
        self, bundle: plan.BundleRef, node: str, target_id: str
    ) -> images.Retagged | None:
        """The retag of an earlier run that moved the floating name on ``node`` to
        ``target_id``, from the journal: what to undo exactly on a re-run."""
        from pcmkimg.adapters import journal

        found = None
        try:
            for entry in journal.history(self.journal.path.parent, bundle.service):
                if (
                    entry.get("event") == "retag"
                    and entry.get("node") == node
                    and entry.get("moved")
                    and entry.get("after") == target_id
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
            target_id,
            moved=True,
            rollback_name=found.get("rollback"),
            rollback_before=found.get("rollback_before"),
        )

    def previous_retag(
        self, bundle: plan.BundleRef, store: images.Store, target_id: str
    ) -> images.Retagged | None:
        """A re-run with no journal of the earlier retag: undo it as a swap with the image
        under the rollback name (the rollback name then keeps the target), if there is one
        other than the target."""
        back = naming.rollback_for(bundle.ref, store.scheme)
        try:
            held = store.resolve(back)
        except PcmkimgError:
            return None
        if isinstance(held, images.Resolved) and held.id != target_id:
            return images.Retagged(
                store.node,
                bundle.floating,
                held.id,
                target_id,
                moved=True,
                rollback_name=str(back),
                rollback_before=target_id,
            )
        return None

    def heal(
        self,
        bundle: plan.BundleRef,
        node: str,
        status: cib.ClusterStatus,
        holds: HoldsPort,
        *,
        missing: bool,
    ) -> bool:
        """Clean up what kept the replica off ``node`` now that the floating name is there.

        A guard that refused to start (rc 5: the name was missing) keeps the replica off this
        node until its failure is cleaned up; a degraded monitor (190) stays listed until then.
        A failed start of the replica itself is cleaned up too when the floating name was
        missing here before the retag (the bundle then tried to pull it), never otherwise.
        The cleanup runs under ``holds`` (the pin, and bans on the other nodes without a
        replica), so that nothing but a replica starting here follows from it. True when a
        replica is expected to start here: none ran here and the bundle has one that runs
        nowhere (with every replica running elsewhere, nothing starts here).
        """
        config = cib.bundle(self.cluster.query_cib(), bundle.id)
        resources: list[str] = []
        failures: list[cib.Failure] = []
        if config.guard is not None:
            found = status.failures_of([config.guard.primitive_id], node)
            if found:
                resources.append(config.guard.primitive_id)
                failures += found
        if missing:
            found = [f for f in status.real_failures if plan.healable(f, bundle.id, {node})]
            if found:
                resources.append(bundle.id)
                failures += found
        if not failures:
            return False
        replica = status.replica_on(bundle.id, node)
        was_active = bool(replica and replica.active)
        spare = sum(r.active for r in status.replicas_of(bundle.id)) < config.replicas
        self.say(f"{node}: cleaning up the failures of {', '.join(resources)}")
        holds.place(restart_rules.hold_nodes(status, bundle.id, node))
        for resource in resources:
            self.cluster.cleanup(resource, node)
        self.cluster.settle(self.timeout)
        holds.release()
        self.record(
            "guard-cleanup",
            service=bundle.service,
            node=node,
            failures=[f.op_key for f in failures],
        )
        return not was_active and spare

    def publish(self, bundle: plan.BundleRef, node: str) -> None:
        """Show the new real image in the node attribute, as the guard's next monitor would
        (same attribute, same value). Done after the restart: no CIB write may delay it."""
        try:
            found = self.stores.get(node).resolve(bundle.ref)
            if isinstance(found, images.Resolved):
                guard = cib.bundle(self.cluster.query_cib(), bundle.id).guard
                name = naming.attribute_name(bundle.service, guard.attribute if guard else None)
                self.cluster.set_node_attribute(node, name, naming.describe(found))
        except PcmkimgError as exc:  # informative only; the guard's monitor refreshes it
            self.say(f"{node}: could not update the node attribute: {exc.message}")

    def rollback_node(
        self,
        bundle: plan.BundleRef,
        node: str,
        res: NodeResult,
        undo: images.Retagged,
        holds: HoldsPort,
    ) -> None:
        """Put the floating and the rollback name back exactly as they were before ``undo``
        and bring the replica back on the previous image: cleaned up and started if it is
        down, restarted if it runs another image; all under the failed restart's ``holds``,
        so that it can only come back on ``node``."""
        store = self.stores.get(node)
        back = undo.rollback_name or str(naming.rollback_for(bundle.ref, store.scheme))
        fix = f"on {node}: {cmd.quoted(cmd.tag(back, bundle.floating))}, then " + cmd.quoted(
            cmd.cleanup(bundle.id, node)
        )
        if res.before is None:
            res.result = "rollback-failed"
            self.record("rollback-failed", service=bundle.service, node=node, error="no previous")
            raise RollbackFailed(
                f"update of {bundle.service} failed on {node}, which had no image behind "
                f"{bundle.floating} before: there is nothing to roll back to",
                f"fix the image, then {cmd.quoted(cmd.update(node, bundle.service))}",
            )
        self.say(f"{node}: rolling back to {res.before[:12]}")
        try:
            store.restore(undo)
            replica = self.cluster.status().replica_on(bundle.id, node)
            if replica is None or not replica.active or replica.failed:
                self.cluster.cleanup(bundle.id, node)
                self.cluster.settle(self.timeout)
                replica = self.cluster.status().replica_on(bundle.id, node)
            if replica is None or not replica.active:
                raise pacemaker.RestartFailedError(
                    f"the replica did not start again on {node}",
                    f"see {cmd.quoted(cmd.status_xml())} for the cause",
                )
            _, running = self.container_image(node, replica.container_id)
            if running != res.before:
                self.cluster.restart_replica(bundle.id, node, self.timeout, holds=holds)
                _, running = self.container_image(node, replica.container_id)
            if running != res.before:
                raise pacemaker.RestartFailedError(
                    f"the replica on {node} runs {str(running)[:12]}, not {res.before[:12]}",
                    f"see {cmd.quoted(cmd.status())}",
                )
            self.publish(bundle, node)
        except (pacemaker.BanNotRemovedError, lease.LeaseError) as exc:
            res.result = "rollback-failed"
            self.record("rollback-failed", service=bundle.service, node=node, error=exc.one_line())
            raise  # its own message and fix say what is left behind
        except PcmkimgError as exc:
            res.result = "rollback-failed"
            self.record("rollback-failed", service=bundle.service, node=node, error=exc.one_line())
            if isinstance(exc, images.NodeUnreachable):
                # The node's store went away (its podman API): once it is back, the same
                # update finishes the node; going back by hand is the other way.
                fix = (
                    f"{exc.fix}, then run the same update again: it finishes {node} (the "
                    f"journal's retag line says what {bundle.floating} named before and after); "
                    f"or go back by hand: {fix}"
                )
            raise RollbackFailed(
                f"update of {bundle.service} failed on {node}, and so did its rollback: "
                f"{exc.message}",
                fix,
            ) from exc
        res.rolled_back = True
        self.record("rolled-back", service=bundle.service, node=node)
        self.say(f"{node}: rolled back; the replica runs the previous image again")

    # -- the whole job --------------------------------------------------------------------

    def run(self, the_plan: plan.Plan, report: UpdateReport) -> UpdateReport:
        """Run the plan's steps in order (what ``--dry-run`` prints is what runs); ``report``
        is filled in as the nodes go, also on failure."""
        bundle = the_plan.bundle
        ref = the_plan.ref or parse(the_plan.image)
        self.record(
            "start",
            service=bundle.service,
            bundle=bundle.id,
            target=str(ref),
            nodes=list(the_plan.targets),
        )
        pulled: dict[str, str] = {}
        with contextlib.ExitStack() as lease_scope:
            for step in the_plan.steps:
                if step.kind == "lease":
                    # Renewed from a background thread until released: through the pulls, the
                    # restarts and the rollbacks, with no CIB write of ours before any of them.
                    self.holding = lease_scope.enter_context(
                        leasing.held(self.cluster, self.lease_period, say=self.say)
                    )
                    self.say(
                        f"lease taken ({self.holding.host}, pid {self.holding.pid}, "
                        f"period {self.holding.period:g}s)"
                    )
                elif step.kind == "preflight":
                    # Read under the lease; the leftover bans are found in that same read.
                    cluster = self.cluster.read_cluster()
                    left = self.cluster.remove_own_bans(bundle.id, cluster.config)
                    for cid in left:
                        self.say(f"removed {cid}, left behind by an earlier restart")
                    if left:
                        # The replica that ban held off comes back now: check the cluster as
                        # it settles, not half-way (the baseline would miss that replica).
                        self.cluster.settle(self.timeout)
                        self.record("leftover-bans", service=bundle.service, removed=left)
                        cluster = self.cluster.read_cluster()
                    missing = self.missing(step.nodes, bundle.ref)
                    problems = plan.preflight_problems(cluster, bundle.id, step.nodes, missing)
                    if problems:
                        raise plan.PreflightFailed(
                            "update refused: " + "; ".join(problems),
                            "fix these, then run the update again (`pcmkimg check` lists them)",
                        )
                    self.baseline = plan.health(cluster.status, bundle.id)
                elif step.kind == "pull":
                    pulled = self.pull_all(step.nodes, ref, the_plan.digest)
                elif step.kind == "update":
                    (node,) = step.nodes
                    self.check_lease()
                    self.clear_written_back(bundle)
                    res = NodeResult(node)
                    report.nodes.append(res)
                    self.update_node(bundle, res, ref, pulled[node], the_plan.restart)
                elif step.kind == "release":
                    self.clear_written_back(bundle)
                    lease_scope.close()
                    self.holding = None
                else:  # pragma: no cover - StepKind is closed
                    raise AssertionError(f"unknown step {step.kind!r}")
        self.record("done", service=bundle.service, summary=report.summary())
        return report


# --------------------------------------------------------------------------- the command


@dataclass(frozen=True)
class UpdateRequest:
    """``pcmkimg update SERVICE --image REF (--node N... | --all)``."""

    service: str
    image: str
    nodes: tuple[str, ...] = ()
    """The nodes to update; empty with ``every``."""
    every: bool = False
    digest: str | None = None
    restart: bool = True
    """False with ``--no-restart``: pull and retag only."""
    timeout: float = 300
    dry_run: bool = False


@dataclass
class UpdateOutcome:
    """What ``update`` did: its plan, and the report of the nodes (None with ``--dry-run``)."""

    plan: plan.Plan
    report: UpdateReport | None = None

    def as_dict(self) -> dict[str, object]:
        doc: dict[str, object] = {"plan": self.plan.lines(), "targets": list(self.plan.targets)}
        if self.report is None:
            return {**doc, "dry_run": True}
        return {**doc, "report": self.report.as_dict(), "summary": self.report.summary()}


def one_of(nodes: Sequence[str], every: bool) -> None:
    """Either nodes or every node, never both, never neither."""
    if bool(nodes) == every:
        raise UsageError("give either --node (one or more) or --all", "e.g. --node controller-1")


def plan_for(ctx: Context, req: UpdateRequest) -> plan.Plan:
    """The plan of ``req`` (what ``--dry-run`` prints and :func:`run` executes); bad input is
    refused before the cluster is read."""
    one_of(req.nodes, req.every)
    target = parse(req.image)
    if naming.classify(target, ctx.scheme) is not None:
        raise UsageError(
            f"--image {req.image} is a floating or rollback name, not a real image",
            "give the registry reference of the image to run, e.g. REGISTRY/NS/IMAGE:TAG",
        )
    if req.digest is not None:
        parse(f"x@{req.digest}")
        if target.digest is not None and target.digest != req.digest:
            raise UsageError(
                f"--image {req.image} is pinned to {target.digest}, --digest asks for {req.digest}",
                "give one digest, or the same digest in both",
            )
    cluster = ctx.cluster.read_cluster()
    bundle = plan.find_bundle(cluster, req.service, ctx.scheme)
    facts = plan.node_facts(cluster, bundle.id)
    nodes = None if req.every else list(req.nodes)
    return plan.plan_update(bundle, target, facts, nodes, digest=req.digest, restart=req.restart)


def run(ctx: Context, req: UpdateRequest) -> UpdateOutcome:
    """Plan, then (unless ``dry_run``) run the plan's steps with the context's ports. On
    failure or interruption the error carries the report of the nodes done so far."""
    the_plan = plan_for(ctx, req)
    outcome = UpdateOutcome(the_plan)
    if req.dry_run:
        return outcome
    for line in the_plan.lines():
        ctx.say(line)
    report = UpdateReport(
        the_plan.bundle.id, the_plan.bundle.service, str(the_plan.ref or the_plan.image)
    )
    outcome.report = report
    jrnl = ctx.journal()
    with ctx.open_stores() as stores:
        updater = Updater(
            ctx.cluster,
            stores,
            jrnl,
            ctx.say,
            req.timeout,
            lease_period=ctx.lease_period,
            progress=ctx.progress,
        )
        try:
            updater.run(the_plan, report)
        except BaseException as exc:
            if isinstance(exc, PcmkimgError):
                exc.report = report.as_dict()
            else:  # an interruption (or a bug) carries the report too: --json shows it
                exc.__dict__["report"] = report.as_dict()
            try:
                jrnl.record("aborted", service=the_plan.bundle.service, error=str(exc))
            except OSError:
                pass  # the error being reported matters more than its journal line
            raise
    ctx.say(report.summary())
    return outcome
