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
from collections.abc import Iterator, Sequence
from typing import Protocol

from pcmkimg.adapters import lease as leasing
from pcmkimg.adapters import podman as images
from pcmkimg.adapters.errors import BanNotRemovedError, RestartFailedError
from pcmkimg.adapters.journal import Journal
from pcmkimg.core import cib, lease, naming, plan
from pcmkimg.core import commands as cmd
from pcmkimg.core import restart as restart_rules
from pcmkimg.core.errors import NodeUnreachable, PreflightFailed
from pcmkimg.core.reference import Reference, parse
from pcmkimg.core.report import NodeResult, Result, UpdateReport
from pcmkimg.errors import PcmkimgError, UsageError
from pcmkimg.records import dataclass, field
from pcmkimg.workflows.context import ClusterPort, Context, HoldsPort, StoresPort
from pcmkimg.workflows.errors import DigestRefused, PullsFailed, RollbackFailed, UpdateFailed

LEFT_BEHIND = ", left behind by an earlier restart"
"""Why a ban or pin of ours is there when a command starts (a killed restart's)."""
WRITTEN_BACK = ": another CIB writer had put it back"
"""Why one is there between two nodes (a stale replace of the configuration)."""


class PullCancelled(Exception):
    """Raised in a pull's progress once the update was interrupted: that pull stops."""


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
    snapshot: cib.Element | None = field(default=None, repr=False)
    """The configuration read by the preflight under the lease (None: none read)."""

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
        status = self.cluster.status()  # one look for the check and the restart's start
        self.check_others(bundle, res.node, status)
        retag = self.retag_node(bundle, res, ref, target_id)
        return self.restart_node(bundle, res, ref, target_id, restart, retag, status)

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
        status: cib.ClusterStatus | None = None,
    ) -> NodeResult:
        """After :meth:`retag_node`: restart the replica if needed and verify; roll this node
        back if that fails, to exactly the names it had before. ``status``: a look at the
        cluster before the retag (read now when not given)."""
        node = res.node
        try:
            # The holds of a restart that fails stay until the rollback is done: the replica
            # can only come back here, on the previous image.
            with self.cluster.holding(bundle.id, self.timeout) as holds:
                return self._update_or_roll_back(
                    bundle, res, ref, target_id, restart, retag, holds, status
                )
        except (BanNotRemovedError, lease.LeaseError) as exc:
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
        status: cib.ClusterStatus | None = None,
    ) -> NodeResult:
        node = res.node
        try:
            return self._restart_if_needed(bundle, res, target_id, restart, retag, holds, status)
        except (BanNotRemovedError, lease.LeaseError):
            raise
        except PcmkimgError as exc:
            self.record("failed", service=bundle.service, node=node, error=exc.one_line())
            self.say(f"{node}: FAILED: {exc.message}")
            # A rollback changes the node's store and restarts its replica: not once the lease
            # may be another's (cut off from the others, the restart failed for that reason).
            self.check_lease()
            undo = self.undo_for(bundle, res, retag, target_id, exc)
            if undo is None:
                res.result = "failed"
                raise
            here = self.rollback_node(bundle, node, res, undo, holds)
            res.result = "rolled-back"
            if not here:
                raise UpdateFailed(
                    f"update of {bundle.service} failed on {node}, which left the cluster "
                    f"during its restart ({exc.message}); its names were rolled back",
                    f"bring {node} back into the cluster (its corosync, pacemaker and "
                    f"network; {cmd.quoted(cmd.cluster_state())}): its replica then starts "
                    "on the previous image; then run the update again; the nodes after it "
                    "were not touched",
                ) from exc
            raise UpdateFailed(
                f"update of {bundle.service} failed on {node} and was rolled back: {exc.message}",
                f"{ref} does not run here: fix the image or choose another, then run the "
                f"update again; {node} runs the previous image, the nodes after it were "
                "not touched"
                if isinstance(exc, RestartFailedError)
                else exc.fix,
            ) from exc

    def undo_for(
        self,
        bundle: plan.BundleRef,
        res: NodeResult,
        retag: images.Retagged,
        target_id: str,
        exc: PcmkimgError,
    ) -> images.Retagged | None:
        """What to undo on ``res.node`` after ``exc``: this run's retag when it moved the name;
        on a re-run (the name was moved by an earlier, interrupted run), a start that failed on
        the new image goes back to what that run moved it from (its journal says; else the
        image kept under the rollback name), and ``res.before`` says so; anything else changed
        nothing here (None)."""
        if retag.moved:
            return retag
        store = self.stores.get(res.node)
        earlier = self.earlier_retag(bundle, res.node, target_id) or self.previous_retag(
            bundle, store, target_id
        )
        if earlier is None or not isinstance(exc, RestartFailedError):
            return None
        res.before = earlier.old_id
        return earlier

    def remove_leftover_bans(
        self,
        bundles: Sequence[plan.BundleRef],
        why: str,
        config: cib.Element | None = None,
    ) -> bool:
        """Remove every ban and pin of ours of ``bundles`` found in ``config`` (one CIB read
        for all of them: read now when not given), each said and journaled with ``why``.
        When any was removed, the replicas it held off come back: wait until Pacemaker has
        nothing left to do and the cluster has settled (``crm_resource --wait`` computes what
        is left itself; the DC may still look idle just after the change: seen on Pacemaker
        3.0 under load, a replica still stopped when the next restart placed its holds, after
        which it started in the restarted replica's place). Whether any was removed: the
        caller's read of the cluster is stale then."""
        if config is None:
            config = self.cluster.query_cib()
        removed = False
        for bundle in bundles:
            left = self.cluster.remove_own_bans(bundle.id, config)
            for cid in left:
                self.say(f"removed {cid}{why}")
            if left:
                self.record("leftover-bans", service=bundle.service, removed=left)
                removed = True
        if removed:
            self.settled()
        return removed

    def settled(self) -> None:
        """Wait until Pacemaker has nothing left to do (``crm_resource --wait``), then until
        the DC is idle (the settle)."""
        self.cluster.wait(self.timeout)
        self.cluster.settle(self.timeout)

    def preflight_read(self, bundles: Sequence[plan.BundleRef]) -> plan.Cluster:
        """The cluster as the preflight judges it, read under the lease: the leftover bans of
        ``bundles`` found in that read are removed (:meth:`remove_leftover_bans`); while a
        replica of one of them is not active, the cluster is waited for until it has nothing
        left to do (a run interrupted a moment ago stopped it, and Pacemaker is bringing it
        back), then read again. A restart started meanwhile would hold that replica off its
        node, and it would start in the restarted replica's place (seen live on Pacemaker 3.0
        after a SIGTERM). A replica that stays down (nowhere to run) costs one wait."""
        cluster = self.cluster.read_cluster()
        if self.remove_leftover_bans(bundles, LEFT_BEHIND, cluster.config):
            return self.cluster.read_cluster()  # as it settled, not half-way
        down = [
            r.container_id
            for b in bundles
            for r in cluster.status.replicas_of(b.id)
            if not r.active and not r.failed
        ]
        if not down:
            return cluster
        self.say(f"waiting for the cluster to settle first: {', '.join(down)} not active")
        self.settled()
        return self.cluster.read_cluster()

    def clear_written_back(self, bundles: Sequence[plan.BundleRef]) -> None:
        """Between two nodes no ban or pin of ours is in force: remove any that another
        writer put back after our restart removed it (a stale replace of the configuration,
        as ``pcs resource update`` makes: it reads, edits and replaces the section whole). A
        ban on a node done before would stop its replica again."""
        self.remove_leftover_bans(bundles, WRITTEN_BACK)

    def check_others(
        self, bundle: plan.BundleRef, node: str, status: cib.ClusterStatus | None = None
    ) -> None:
        """Refuse to touch ``node`` unless every other replica that was active when the update
        started is active, with as many promoted instances (in ``status``: read now when not
        given)."""
        if self.baseline is None:
            return
        if status is None:
            status = self.cluster.status()
        problems = plan.before_node_problems(self.baseline, plan.health(status, bundle.id), node)
        if problems:
            raise PreflightFailed(
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
        status: cib.ClusterStatus | None = None,
    ) -> NodeResult:
        replica = self.prepare_restart(bundle, res, target_id, restart, retag, holds, status)
        if replica is None:
            return res
        node = res.node
        self.say(f"{node}: restarting {replica.container_id} (waiting up to {self.timeout:.0f}s)")
        self.record("restart", service=bundle.service, node=node, container=replica.container_id)
        res.restarted = True
        where = self.restart(bundle, node, replica, res, holds)
        return self.finish_restart(bundle, res, target_id, replica.container_id, where)

    def prepare_restart(
        self,
        bundle: plan.BundleRef,
        res: NodeResult,
        target_id: str,
        restart: bool,
        retag: images.Retagged,
        holds: HoldsPort,
        status: cib.ClusterStatus | None = None,
    ) -> cib.ReplicaStatus | None:
        """Everything before the restart of the replica on ``res.node``: heal what kept it
        off the node; the replica to restart, or None when the node is done without a
        restart (``res`` says how). ``status``: a look at the cluster since the last change of
        ours (read now when not given)."""
        node = res.node
        if status is None:
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
                raise RestartFailedError(
                    f"the replica did not start on {node} after the cleanup of its failed start",
                    f"see {cmd.quoted(cmd.status_xml())} for the failed start",
                )
            if running_image != target_id:
                raise RestartFailedError(
                    f"the replica started on {node} runs {str(running_image)[:12]}, "
                    f"not {target_id[:12]}",
                    "check the bundle's image in the CIB: it must be the floating name",
                )
            text = f"the replica runs again, on {str(running_image)[:12]}"
            self._no_restart(bundle, res, retag, "started", text, kept=True)
            return None
        if container is None:
            text = "no replica runs here; a later start uses the new image"
            self._no_restart(bundle, res, retag, "retag-only", text, kept=False)
            return None
        if running_image == target_id:
            text = f"the replica already runs {target_id[:12]}: no restart"
            self._no_restart(bundle, res, retag, "unchanged", text, kept=True)
            return None
        if not restart:
            text = "--no-restart: the replica keeps running the old image"
            self._no_restart(bundle, res, retag, "retag-only", text, kept=False)
            return None
        assert replica is not None
        return replica

    def finish_restart(
        self, bundle: plan.BundleRef, res: NodeResult, target_id: str, container: str, where: str
    ) -> NodeResult:
        """After the restart (the replica's ``container`` active on ``where``): it runs
        ``target_id``; the node attribute, the journal, a line for the operator."""
        node = res.node
        res.container_after, running_image = self.container_image(where, container)
        if running_image != target_id:
            raise RestartFailedError(
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
        return self.after_restart(bundle, node, replica, res, wall)

    def after_restart(
        self,
        bundle: plan.BundleRef,
        node: str,
        replica: cib.ReplicaStatus,
        res: NodeResult,
        wall: float,
        status: cib.ClusterStatus | None = None,
    ) -> str:
        """After the restart of ``replica`` begun at ``wall`` (time.time()): see
        :meth:`restart`. ``status``: a look at the cluster after the restart (read now when
        not given)."""
        if status is None:
            status = self.cluster.status()
        now = plan.health(status, bundle.id)
        start = self.baseline or now
        problems = plan.after_restart_problems(
            start, now, replica.replica, node, self.updated | {node}
        )
        if problems:
            raise RestartFailedError(
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

    def bundle_config(self, bundle_id: str) -> cib.Bundle:
        """The bundle's definition (its guard, its replicas): from the preflight's read under
        the lease, which only this run changes (its holds), else read now."""
        return cib.bundle(
            self.snapshot if self.snapshot is not None else self.cluster.query_cib(), bundle_id
        )

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
        config = self.bundle_config(bundle.id)
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
        holds.place(restart_rules.hold_nodes(status, bundle.id, node), bundle.id)
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
                guard = self.bundle_config(bundle.id).guard
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
    ) -> bool:
        """Put the floating and the rollback name back exactly as they were before ``undo``
        and bring the replica back on the previous image: cleaned up and started if it is
        down, restarted if it runs another image; all under the failed restart's ``holds``,
        so that it can only come back on ``node``. False when ``node`` is not online (it
        left the cluster): only the names were put back, its replica starts on them when the
        node rejoins."""
        assert res.node == node
        return roll_back_together([Undo(self, bundle, res, undo)], holds)

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
                    cluster = self.preflight_read([bundle])
                    missing = self.missing(step.nodes, bundle.ref)
                    problems = plan.preflight_problems(cluster, bundle.id, step.nodes, missing)
                    if problems:
                        raise PreflightFailed(
                            "update refused: " + "; ".join(problems),
                            "fix these, then run the update again (`pcmkimg check` lists them)",
                        )
                    self.baseline = plan.health(cluster.status, bundle.id)
                    self.snapshot = cluster.config
                elif step.kind == "pull":
                    pulled = self.pull_all(step.nodes, ref, the_plan.digest)
                elif step.kind == "update":
                    (node,) = step.nodes
                    self.check_lease()
                    self.clear_written_back([bundle])
                    res = NodeResult(node)
                    report.nodes.append(res)
                    self.update_node(bundle, res, ref, pulled[node], the_plan.restart)
                elif step.kind == "release":
                    self.clear_written_back([bundle])
                    lease_scope.close()
                    self.holding = None
                else:  # pragma: no cover - StepKind is closed
                    raise AssertionError(f"unknown step {step.kind!r}")
        self.record("done", service=bundle.service, summary=report.summary())
        return report


@dataclass(frozen=True)
class Undo:
    """One service to put back on a node: its updater, bundle, node result and the retag to
    undo (see :func:`roll_back_together`)."""

    updater: Updater
    bundle: plan.BundleRef
    res: NodeResult
    retag: images.Retagged


def roll_back_together(undos: Sequence[Undo], holds: HoldsPort) -> bool:
    """Put the floating and rollback names of every service of ``undos`` (all on one node)
    back exactly as they were before its retag and bring their replicas back on the previous
    images: those down cleaned up and started, those on another image restarted together
    (one :meth:`~pcmkimg.workflows.context.ClusterPort.restart_replicas`); all under the
    failed restart's ``holds``, so that they can only come back on their node. One service:
    what an update's failed node does; several: a release's. False when the node is not
    online (it left the cluster): only the names were put back, its replicas start on them
    when it rejoins."""
    first = undos[0].updater
    cluster, node = first.cluster, undos[0].res.node
    services = ", ".join(u.bundle.service for u in undos)
    fixes = "; ".join(
        f"on {node}: "
        + cmd.quoted(
            cmd.tag(
                u.retag.rollback_name
                or str(naming.rollback_for(u.bundle.ref, u.updater.stores.get(node).scheme)),
                u.bundle.floating,
            )
        )
        + f", then {cmd.quoted(cmd.cleanup(u.bundle.id, node))}"
        for u in undos
    )

    def failed(error: str) -> None:
        for u in undos:
            u.res.result = "rollback-failed"
            u.updater.record("rollback-failed", service=u.bundle.service, node=node, error=error)

    for u in undos:
        if u.res.before is None:
            failed("no previous")
            raise RollbackFailed(
                f"update of {u.bundle.service} failed on {node}, which had no image behind "
                f"{u.bundle.floating} before: there is nothing to roll back to",
                f"fix the image, then {cmd.quoted(cmd.update(node, u.bundle.service))}",
            )
    for u in undos:
        what = f" {u.bundle.service}" if len(undos) > 1 else ""
        first.say(f"{node}: rolling back{what} to {str(u.res.before)[:12]}")
    try:
        for u in undos:
            u.updater.stores.get(node).restore(u.retag)
        status = cluster.status()
        known = status.node(node)
        if known is None or not known.online:
            for u in undos:
                u.res.rolled_back = True
                u.updater.record("rolled-back", service=u.bundle.service, node=node, offline=True)
            first.say(
                f"{node}: rolled back its names; the node is not in the cluster: its "
                "replicas start on the previous images when it rejoins"
            )
            return False
        # A service not restarted here whose bundle had no replica active on the node when
        # the run started (its spare node: every replica placed elsewhere) had only its names
        # moved: they are back, and no replica of it is to start here.
        placed = [u for u in undos if _had_replica(u, node, status)]
        down = [u for u in placed if _down(status.replica_on(u.bundle.id, node))]
        for u in down:
            cluster.cleanup(u.bundle.id, node)
        if down:
            cluster.settle(first.timeout)
            status = cluster.status()
        replicas = {u.bundle.id: status.replica_on(u.bundle.id, node) for u in placed}
        for u in placed:
            replica = replicas[u.bundle.id]
            if replica is None or not replica.active:
                raise RestartFailedError(
                    f"the replica{'' if len(undos) == 1 else ' of ' + u.bundle.id} did not "
                    f"start again on {node}",
                    f"see {cmd.quoted(cmd.status_xml())} for the cause",
                )

        def running(u: Undo) -> str | None:
            replica = replicas[u.bundle.id]
            assert replica is not None
            return u.updater.container_image(node, replica.container_id)[1]

        again = [u for u in placed if running(u) != u.res.before]
        if len(again) == 1:
            cluster.restart_replica(again[0].bundle.id, node, first.timeout, holds=holds)
        elif again:
            ids = [u.bundle.id for u in again]
            cluster.restart_replicas(ids, node, first.timeout, holds=holds)
        for u in placed:
            now = running(u)
            if now != u.res.before:
                raise RestartFailedError(
                    f"the replica{'' if len(undos) == 1 else ' of ' + u.bundle.id} on {node} "
                    f"runs {str(now)[:12]}, not {str(u.res.before)[:12]}",
                    f"see {cmd.quoted(cmd.status())}",
                )
        for u in undos:
            u.updater.publish(u.bundle, node)
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
    for u in undos:
        u.res.rolled_back = True
        u.updater.record("rolled-back", service=u.bundle.service, node=node)
    first.say(f"{node}: rolled back; the replica{'' if len(undos) == 1 else 's'} "
              f"run{'s' if len(undos) == 1 else ''} the previous image again")  # fmt: skip
    return True


def _had_replica(undo: Undo, node: str, status: cib.ClusterStatus) -> bool:
    """Whether ``undo``'s bundle has a replica to bring back on ``node``: restarted there by
    this run, placed there now, or active there when the run started (unknown: assumed)."""
    baseline = undo.updater.baseline
    return (
        undo.res.restarted
        or status.replica_on(undo.bundle.id, node) is not None
        or baseline is None
        or node in baseline.active.values()
    )


def _down(replica: cib.ReplicaStatus | None) -> bool:
    return replica is None or not replica.active or replica.failed


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
        return outcome_document(self.plan, self.report)


class Planned(Protocol):
    """A plan as an outcome shows it: an update's or a release's."""

    @property
    def targets(self) -> tuple[str, ...]: ...

    def lines(self) -> list[str]: ...


class Reported(Protocol):
    """What a run did as an outcome shows it: an update's or a release's report."""

    def as_dict(self) -> dict[str, object]: ...

    def summary(self) -> str: ...


def outcome_document(the_plan: Planned, report: Reported | None) -> dict[str, object]:
    """The ``--json`` document of an update or a release: the plan, its targets, and what was
    done (``dry_run`` when nothing was)."""
    doc: dict[str, object] = {"plan": the_plan.lines(), "targets": list(the_plan.targets)}
    if report is None:
        return {**doc, "dry_run": True}
    return {**doc, "report": report.as_dict(), "summary": report.summary()}


@contextlib.contextmanager
def reported_on_failure(jrnl: Journal, service: str, report: Reported) -> Iterator[None]:
    """A failure or an interruption of the body carries ``report`` (what was done so far:
    ``--json`` shows it) and is journalled as ``aborted``."""
    try:
        yield
    except BaseException as exc:
        if isinstance(exc, PcmkimgError):
            exc.report = report.as_dict()
        else:  # an interruption (or a bug) carries the report too
            exc.__dict__["report"] = report.as_dict()
        with contextlib.suppress(OSError):  # the error matters more than its journal line
            jrnl.record("aborted", service=service, error=str(exc))
        raise


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
        with reported_on_failure(jrnl, the_plan.bundle.service, report):
            updater.run(the_plan, report)
    ctx.say(report.summary())
    return outcome
