"""What one run of ``update`` (a single service or a release) or ``rollback`` shares.

A :class:`Session` holds the context's two ports, the run's journal and ``say``, the lease the
run holds, and what its preflight read under that lease (the configuration, each bundle's
health when the run started, the nodes whose floating name the run moved). The node steps
(:mod:`pcmkimg.workflows.nodestep`) take it as their first argument; it carries the pieces that
are the run's rather than one node's: the journal, the pulls, the leftover bans, the
preflight's read, the looks at a node's containers.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

from pcmkimg.adapters import lease as leasing
from pcmkimg.adapters import podman as images
from pcmkimg.adapters.journal import Journal
from pcmkimg.core import cib, lease, naming, plan
from pcmkimg.core.reference import Reference
from pcmkimg.errors import PcmkimgError
from pcmkimg.records import dataclass, field
from pcmkimg.workflows.context import ClusterPort, StoresPort
from pcmkimg.workflows.errors import DigestRefused, PullsFailed
from pcmkimg.workflows.step import NodeStep

LEFT_BEHIND = ", left behind by an earlier restart"
"""Why a ban or pin of ours is there when a command starts (a killed restart's)."""
WRITTEN_BACK = ": another CIB writer had put it back"
"""Why one is there between two nodes (a stale replace of the configuration)."""


Check = Callable[["Session", Sequence[NodeStep], cib.ClusterStatus], None]
"""A check of a node's steps before the node's first write (see :attr:`Session.checks`)."""


class PullCancelled(Exception):
    """Raised in a pull's progress once the update was interrupted: that pull stops."""


def _quiet(_: str) -> None:
    pass


@dataclass
class Session:
    """What a run shares (see the module's text)."""

    cluster: ClusterPort
    stores: StoresPort
    journal: Journal
    say: plan.Say = _quiet
    timeout: float = 300
    lease_period: float = lease.DEFAULT_PERIOD
    """The lease's period; renewed in the background every third of it, never by a step."""
    progress: images.ProgressCallback | None = None
    """Shows the pulls (pcmkimg.progress.PullDisplay); None: cached/retry/done lines via say."""
    release: bool = False
    """A release (several services, or one with ``--soak``): its journal lines and its
    failures are worded as a release's; False: a single service's update (or a rollback)."""
    soak: float = 0
    """Seconds to watch a node's restarted replicas before the next node (a release's)."""
    checks: tuple[Check, ...] = ()
    """Run by each node's turn (:func:`pcmkimg.workflows.nodestep.turn`) after its health
    check and before its first write, in order: each gets this session, the node's steps
    (their node, bundles, target image IDs and names; nothing retagged yet, no holds) and the
    turn's look at the cluster (``crm_mon``, read once for the turn); it raises (a
    :class:`~pcmkimg.core.errors.PreflightFailed`: exit 3, "stopped before NODE, which was
    not touched") to refuse the node, and returns to let it go on."""
    holding: leasing.Holding | None = field(default=None, repr=False)
    """The lease this run holds (None: none yet, or released)."""
    snapshot: cib.Element | None = field(default=None, repr=False)
    """The configuration read by the preflight under the lease (None: none read)."""
    baselines: dict[str, plan.Health] = field(default_factory=dict)
    """Bundle id -> its health when the run started: each node's turn is checked against it."""
    updated: dict[str, set[str]] = field(default_factory=dict)
    """Bundle id -> the nodes whose floating name this run moved to the target."""

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

    # -- the run's steps before the nodes -----------------------------------------------------

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

    # -- looks at a node, for its steps ---------------------------------------------------------

    def bundle_config(self, bundle_id: str) -> cib.Bundle:
        """The bundle's definition (its guard, its replicas): from the preflight's read under
        the lease, which only this run changes (its holds), else read now."""
        return cib.bundle(
            self.snapshot if self.snapshot is not None else self.cluster.query_cib(), bundle_id
        )

    def container_image(self, node: str, container: str | None) -> tuple[str | None, str | None]:
        """(container ID, image ID) of the running container named ``container`` on ``node``."""
        if not container:
            return None, None
        for c in self.stores.get(node).containers(running_only=True):
            if c.name.lstrip("/") == container:
                return c.id, c.image_id
        return None, None

    def downtime(self, node: str, container: str, since: float) -> float | None:
        """How long no container named ``container`` ran since ``since``, from the node's
        podman events (informative: None when they can't be read)."""
        try:
            events = self.stores.get(node).container_events(container, since, time.time())
        except PcmkimgError:
            return None
        return images.downtime(events, since)

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
