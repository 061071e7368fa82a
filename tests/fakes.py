"""One fake of each port of :mod:`pcmkimg.workflows.context`, for the unit tests of the workflows.

- :class:`FakeCluster`, the cluster port: a scripted cluster, in the manner of pcs's tier0
  ``config.runner.cib.load(...)``: the configuration from a CIB fixture (changed in memory by
  :meth:`FakeCluster.update_cib`, so the lease and every CIB edit work on it as on the real
  one), nodes, quorum and failures from a crm_mon fixture, and the replicas of the bundle
  ``galera-bundle`` from the containers running in the node stores. Every call is an event.
- :class:`FakeStore`, one node's store: the primitives of the store port over a dict (names ->
  image IDs), recording calls; its rules (resolve, retag, restore, prune) are the port's own.
- :class:`FakeRegistry`, the registry port (``outdated``): what each reference serves.
- :func:`context`: a :class:`~pcmkimg.workflows.context.Context` of these.

Nothing in pcmkimg is patched: a workflow gets the fakes through its context.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from lxml import etree

from pcmkimg import records
from pcmkimg.adapters.config import Config
from pcmkimg.core import cib, lease, plan
from pcmkimg.core.images import Container, ImageInfo, Pulled, Resolved
from pcmkimg.core.reference import Reference, parse
from pcmkimg.core.store import Resolution, StorePort
from pcmkimg.core.tagplan import Retagged
from pcmkimg.errors import PcmkimgError
from pcmkimg.workflows.context import Context
from tests import fixtures

BUNDLE_ID = "galera-bundle"
FLOATING = "cluster.common.tag/mariadb:pcmklatest"
NODES = ("controller-0", "controller-1", "controller-2")

_container_ids = itertools.count(1)


def container_of(node: str, bundle_id: str = BUNDLE_ID) -> str:
    return f"{bundle_id}-podman-{NODES.index(node)}"


def key(name: Reference | str) -> str:
    return str(parse(str(name)))


# --------------------------------------------------------------------------- the stores port


class FakeStore(StorePort):
    """One node's image store: the primitives of the store port over a dict (names -> image
    IDs), recording calls. resolve, retag and restore are the port's own rules (recorded, then
    run as the real store runs them)."""

    def __init__(
        self,
        node: str,
        names: Mapping[str, str],
        running: Mapping[str, str] | None = None,
        registry: Mapping[str, str] | None = None,
    ) -> None:
        self.node = node
        self.scheme = Config().scheme
        self.names = {key(n): i for n, i in names.items()}
        self.known = set(self.names.values())
        """Every image the store has had, named or not (podman keeps a dangling image)."""
        self.starts_on = FLOATING
        """The name a container starts on (the bundle's image in the CIB): the floating name,
        unless a test scripts a bundle whose image is another name."""
        self.running: dict[str, Container] = {}
        self.events: dict[str, list[tuple[float, str]]] = {}
        for name, image_id in (running or {}).items():
            self.start(name, image_id)
        self.registry = {key(n): i for n, i in (registry or {}).items()}
        self.calls: list[tuple[str, str]] = []
        self.failures: dict[str, list[BaseException | None]] = {}
        self.repo_digests: dict[str, tuple[str, ...]] = {}
        """image ID -> its RepoDigests (``REPO@sha256:...``, what podman records on a pull)."""

    def fail(self, method: str, *outcomes: BaseException | None) -> None:
        """The next calls of ``method`` raise these errors in turn (None: work as usual)."""
        self.failures[method] = list(outcomes)

    def _call(self, method: str, arg: object = "") -> None:
        self.known |= set(self.names.values())  # the tests also give names by hand
        self.calls.append((method, str(arg)))
        queue = self.failures.get(method)
        if queue:
            outcome = queue.pop(0)
            if outcome is not None:
                raise outcome

    def called(self, method: str) -> list[str]:
        return [arg for m, arg in self.calls if m == method]

    def _info(self, image_id: str) -> ImageInfo:
        others = tuple(sorted(n for n, i in self.names.items() if i == image_id))
        return ImageInfo(image_id, None, self.repo_digests.get(image_id, ()), others)

    # -- the port's rules, recorded ------------------------------------------------------------

    def resolve(self, floating: Reference | str) -> Resolution:
        self._call("resolve", floating)
        return super().resolve(floating)

    def retag(
        self,
        floating: Reference | str,
        image: Reference | str,
        *,
        rollback: Reference | str | None = None,
    ) -> Retagged:
        self._call("retag", f"{floating} -> {image}")
        return super().retag(floating, image, rollback=rollback)

    def restore(self, done: Retagged) -> None:
        self._call("restore", f"{done.floating} -> {done.old_id}")
        super().restore(done)

    # -- the primitives ------------------------------------------------------------------------

    def inspect(self, name: str) -> ImageInfo | None:
        self._call("inspect", name)
        if name in self.known:  # an image ID
            return self._info(name)
        image_id = self.names.get(key(name))
        return None if image_id is None else self._info(image_id)

    def tag(self, image_id: str, ref: Reference) -> None:
        self._call("tag", f"{image_id[:12]} {ref}")
        assert image_id in self.known, image_id
        self.names[key(ref)] = image_id
        self.known.add(image_id)

    def untag(self, image_id: str, ref: Reference) -> None:
        self._call("untag", f"{image_id[:12]} {ref}")
        assert self.names.get(key(ref)) == image_id, f"{ref} is not on {image_id[:12]}"
        del self.names[key(ref)]

    def images(self) -> tuple[ImageInfo, ...]:
        self._call("images")
        return tuple(self._info(i) for i in sorted(self.known))

    def named_images(self) -> tuple[ImageInfo, ...]:
        """Every image that has a name (what status and metrics ask of a store: one call)."""
        self._call("named_images")
        return tuple(self._info(i) for i in sorted(set(self.names.values())))

    def remove(self, image: ImageInfo) -> bool:
        self._call("remove", image.id)
        self.names = {n: i for n, i in self.names.items() if i != image.id}
        self.known.discard(image.id)
        return True

    def container_events(
        self, name: str, since: float, until: float
    ) -> tuple[tuple[float, str], ...]:
        self._call("container_events", name)
        return tuple((t, a) for t, a in self.events.get(name, ()) if since <= t <= until + 1)

    def containers(self, *, running_only: bool = False) -> tuple[Container, ...]:
        self._call("containers")
        assert running_only
        return tuple(self.running.values())

    def pull(self, ref: Reference | str, *, expected_digest=None, progress=None) -> Pulled:  # type: ignore[no-untyped-def]
        self._call("pull", ref)
        self.names[key(ref)] = image_id = self.registry[key(ref)]
        self.known.add(image_id)
        resolved = Resolved(self.node, key(ref), self._info(image_id))
        return Pulled(resolved, cached=False, attempts=1)

    def close(self) -> None:
        self._call("close")

    # -- what the node's container runtime does for Pacemaker -----------------------------------

    def start(self, container: str, image_id: str | None = None) -> None:
        """Start ``container`` on ``image_id``, by default on what :attr:`starts_on` names
        (the floating name)."""
        image_id = image_id or self.names[key(self.starts_on)]
        self.known.add(image_id)
        self.events.setdefault(container, []).append((time.time(), "start"))
        self.running[container] = Container(
            name=f"/{container}",
            id=f"{next(_container_ids):064x}",
            image=FLOATING,
            image_id=image_id,
            state="running",
        )

    def stop(self, container: str) -> None:
        if self.running.pop(container, None) is not None:
            self.events.setdefault(container, []).append((time.time(), "died"))

    def image_of(self, container: str) -> str | None:
        found = self.running.get(container)
        return found.image_id if found else None


class FakeStores:
    """The stores port over :class:`FakeStore` objects: one per node, the same work on several
    nodes (in turn; an exception is that node's answer, as the real stores' is)."""

    def __init__(self, stores: Mapping[str, FakeStore]) -> None:
        self.stores = stores

    def get(self, node: str) -> FakeStore:
        return self.stores[node]

    def each(self, nodes: Sequence[str], work: Callable[[Any], object]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for node in nodes:
            try:
                out[node] = work(self.stores[node])
            except Exception as exc:
                out[node] = exc
        return out


# --------------------------------------------------------------------------- the cluster port


class FakeHolds:
    """A restart's holds (pcmkimg.adapters.pacemaker.Holds): placing and releasing them are
    events of the cluster."""

    def __init__(self, events: list[tuple[str, ...]]) -> None:
        self.events = events
        self.placed = False

    def place(self, nodes: Sequence[str], bundle_id: str | None = None) -> None:
        self.placed = True
        self.events.append(("hold", *nodes))

    def unban(self, node: str) -> None:
        pass

    def release(self, *, interrupted: bool = False) -> None:
        if self.placed:
            self.placed = False
            self.events.append(("release",))


class FakeCluster:
    """The cluster port on a scripted cluster (see the module's text).

    The events: ("restart", node), ("cleanup", resource, node), ("wait",), ("attribute",
    node, name, value), ("hold", nodes...), ("release",) (a restart's holds, or the lease),
    ("acquire", period) and ("renew",) (the lease, as written into the CIB), ("cib",
    description) (any other CIB change).
    """

    offline = False

    def __init__(
        self,
        stores: Mapping[str, FakeStore],
        *,
        config: str | cib.Element = "base.xml",
        mon: str = "mon-ok.xml",
        timeout: float | None = None,
        bundles: Sequence[str] = (BUNDLE_ID,),
    ) -> None:
        self.stores = stores
        self.bundles = tuple(bundles)
        """The bundles whose replicas are the containers running in the stores (named
        ``BUNDLE-podman-N`` for the node ``NODES[N]``); the others' replicas come from the
        crm_mon fixture as they are."""
        self.config = fixtures.cib(config) if isinstance(config, str) else config
        self.mon = fixtures.mon(mon)
        self.base = cib.cluster_status(self.mon)
        self.timeout = timeout
        """When given, every timeout the workflow passes must be this one."""
        self.events: list[tuple[str, ...]] = []
        self.failed: set[str] = set()
        self.extra_failures: list[cib.Failure] = []
        self.restart_errors: dict[object, tuple[PcmkimgError, bool]] = {}
        """node (the bundle's) or (node, bundle) -> (the error its next restart raises,
        whether the replica stopped first)."""
        self.starts_on_cleanup = True
        self.own_bans: list[str] = []
        """What :meth:`remove_own_bans` finds (and removes) the next time it is asked."""
        self.record_reads = False
        """When True, reading the cluster and asking for our bans are events too: ("read",)
        for :meth:`read_cluster`, ("find-bans", bundle) for :meth:`remove_own_bans`."""
        self.guards_run = False
        """When True, :meth:`read_cluster`'s crm_mon shows the guard clone of each bundle wired
        with one started on each node whose store has the guard's image, as the agent starts
        there (rc 5 where the name does not resolve); the fixture's crm_mon has no guard."""
        self.after_update: Callable[[FakeCluster], None] | None = None
        """Called once a CIB change landed, as its writer gets the answer (e.g. to interrupt
        it right then)."""
        self.cib_queries = 0
        """How many times :meth:`query_cib` was asked."""
        self.status_reads = 0
        """How many times :meth:`status` was asked (crm_mon, live)."""
        self._lock = threading.RLock()  # one compare-and-swap at a time (the lease's thread)

    def kinds(self, *wanted: str) -> list[tuple[str, ...]]:
        return [e for e in self.events if e[0] in wanted]

    def _timeout(self, timeout: float) -> None:
        assert self.timeout is None or timeout == self.timeout, timeout

    # -- reading -------------------------------------------------------------------------------

    def query_cib(self) -> cib.Element:
        self.cib_queries += 1
        return self.config

    def read_cluster(self) -> plan.Cluster:
        if self.record_reads:
            self.events.append(("read",))
        mon = self._with_guards(self.mon) if self.guards_run else self.mon
        return plan.Cluster(self.config, mon, self._status())

    def _with_guards(self, mon: cib.Element) -> cib.Element:
        """``mon`` with the guard clones started where their image resolves (see
        :attr:`guards_run`)."""
        mon = copy.deepcopy(mon)
        resources = mon.find("resources")
        assert resources is not None
        for bundle in cib.bundles(self.config):
            guard = bundle.guard
            if guard is None:
                continue
            clone = etree.SubElement(resources, "clone", id=guard.clone_id, managed="true")
            for i, node in enumerate(NODES):
                store = self.stores.get(node)
                if store is None or key(guard.image) not in store.names:
                    continue
                res = etree.SubElement(
                    clone, "resource", id=guard.primitive_id, role="Started", active="true"
                )
                etree.SubElement(res, "node", name=node, id=str(i + 1), cached="true")
        return mon

    def local_node(self) -> str:
        return NODES[0]

    def status(self) -> cib.ClusterStatus:
        self.status_reads += 1
        return self._status()

    def _status(self) -> cib.ClusterStatus:
        ours = []
        for bundle_id in self.bundles:
            for i, node in enumerate(NODES):
                store = self.stores.get(node)
                up = store is not None and container_of(node, bundle_id) in store.running
                ours.append(
                    cib.ReplicaStatus(
                        bundle_id=bundle_id,
                        replica=i,
                        container_id=container_of(node, bundle_id),
                        node=node if up else None,
                        role="Promoted" if up else "Stopped",
                        container_role="Started" if up else "Stopped",
                        active=up,
                        failed=node in self.failed,
                        managed=True,
                        blocked=False,
                    )
                )
        others = tuple(r for r in self.base.replicas if r.bundle_id not in self.bundles)
        return records.replace(
            self.base,
            replicas=(*ours, *others),
            failures=(*self.base.failures, *self.extra_failures),
        )

    def _start_on(self, store: FakeStore, bundle_id: str, node: str) -> None:
        """Start the bundle's container on what its image (in the CIB) names in the store."""
        image = cib.bundle(self.config, bundle_id).image
        floating = image if bundle_id != BUNDLE_ID else store.starts_on
        store.start(container_of(node, bundle_id), store.names[key(floating)])

    # -- writing -------------------------------------------------------------------------------

    def update_cib(self, edit: Callable[[cib.Element], cib.CibChange]) -> cib.CibChange:
        """``edit`` on the configuration; its result becomes the configuration (one change
        at a time, as the CIB's version check makes it: the lease renews from a thread)."""
        with self._lock:
            before = _lease_text(self.config)
            change = edit(self.config)
            if change.empty:
                return change
            self.config = change.new_cib
            after = _lease_text(self.config)
            if before is None and after is not None:
                held = lease.read(self.config)
                self.events.append(("acquire", f"{held.period:g}" if held else "?"))
            elif before is not None and after is None:
                self.events.append(("release",))
            elif before != after:
                self.events.append(("renew",))
            else:
                self.events.append(("cib", change.description))
        if self.after_update is not None:
            self.after_update(self)
        return change

    def cleanup(self, resource: str, node: str | None = None) -> None:
        assert node is not None
        self.events.append(("cleanup", resource, node))
        self.failed.discard(node)
        self.extra_failures = [
            f for f in self.extra_failures if not (f.resource == resource and f.node == node)
        ]
        store = self.stores[node]
        bundle_id = resource if resource in self.bundles else BUNDLE_ID
        if self.starts_on_cleanup and container_of(node, bundle_id) not in store.running:
            self._start_on(store, bundle_id, node)

    def refresh(self, resource: str, node: str | None = None) -> None:
        self.events.append(("refresh", resource, node or ""))

    def wait(self, timeout: float) -> None:
        self._timeout(timeout)
        self.events.append(("wait",))

    def settle(self, timeout: float) -> float:
        self.wait(timeout)
        return 0.0

    def set_node_attribute(self, node: str, name: str, value: str) -> None:
        self.events.append(("attribute", node, name, value))

    def delete_node_attribute(self, node: str, name: str) -> None:
        self.events.append(("attribute-deleted", node, name))

    @contextlib.contextmanager
    def holding(self, bundle_id: str, timeout: float) -> Iterator[FakeHolds]:
        assert bundle_id in self.bundles
        self._timeout(timeout)
        holds = FakeHolds(self.events)
        try:
            yield holds
        finally:
            holds.release()

    def restart_replica(
        self, bundle_id: str, node: str, timeout: float, *, holds: FakeHolds | None = None
    ) -> None:
        assert bundle_id in self.bundles
        self._timeout(timeout)
        self.events.append(
            ("restart", node) if bundle_id == BUNDLE_ID else ("restart", node, bundle_id)
        )
        store = self.stores[node]
        error = self.restart_errors.pop((node, bundle_id), None)
        if error is None and bundle_id == BUNDLE_ID:
            error = self.restart_errors.pop(node, None)
        if error is not None:
            exc, stopped = error
            if stopped:
                store.stop(container_of(node, bundle_id))
            raise exc
        store.stop(container_of(node, bundle_id))
        self._start_on(store, bundle_id, node)

    def restart_replicas(
        self,
        bundle_ids: Sequence[str],
        node: str,
        timeout: float,
        *,
        holds: FakeHolds | None = None,
    ) -> None:
        """The replicas of ``bundle_ids`` on ``node`` restarted together: the event
        ("together", node, bundles...), then each one's as :meth:`restart_replica`'s (the
        first error raised after every replica was handled)."""
        self.events.append(("together", node, *bundle_ids))
        errors = []
        for bundle_id in bundle_ids:
            try:
                self.restart_replica(bundle_id, node, timeout, holds=holds)
            except PcmkimgError as exc:
                errors.append(exc)
        if errors:
            raise errors[0]

    def remove_own_bans(self, bundle_id: str, config: cib.Element | None = None) -> list[str]:
        assert bundle_id in self.bundles
        if self.record_reads:
            self.events.append(("find-bans", bundle_id))
        found, self.own_bans = self.own_bans, []
        if found:
            self.events.append(("removed-bans", *found))
        return found


def _lease_text(config: cib.Element) -> str | None:
    state = cib.ticket_state(config, lease.TICKET)
    return state.get(lease.ATTRIBUTE) if state is not None else None


# --------------------------------------------------------------------------- the registry port


class FakeRegistry:
    """The registry port: what each reference serves (a digest, or a
    :class:`~pcmkimg.core.outdated.Served` as it is), recording every ``served`` call."""

    def __init__(self, serves: Mapping[str, Any] | None = None) -> None:
        self.serves: dict[str, Any] = dict(serves or {})
        self.calls: list[tuple[tuple[str, ...], float]] = []

    def served(self, references: Sequence[str], timeout: float) -> dict[str, Any]:
        from pcmkimg.core.outdated import Served

        self.calls.append((tuple(references), timeout))
        out = {}
        for ref in references:
            found = self.serves.get(ref)
            if isinstance(found, Served):
                out[ref] = found
            elif found is None:
                out[ref] = Served(ref, error="no such name (FakeRegistry)", gone=True)
            else:
                out[ref] = Served(ref, found)
        return out


# --------------------------------------------------------------------------- the context


def context(
    cluster: FakeCluster,
    stores: Mapping[str, FakeStore] | None = None,
    *,
    journal_dir: Path,
    say: Callable[[str], None] | None = None,
    lease_period: float = lease.DEFAULT_PERIOD,
    views: Any = None,
    registry: FakeRegistry | None = None,
) -> Context:
    """A context of the fakes: the cluster, the stores (by default the cluster's), the
    journal under ``journal_dir``, the registry."""
    port = FakeStores(cluster.stores if stores is None else stores)

    @contextlib.contextmanager
    def open_stores() -> Iterator[FakeStores]:
        yield port

    @contextlib.contextmanager
    def open_views() -> Iterator[Any]:
        yield port if views is None else views

    return Context(
        cluster=cluster,
        open_stores=open_stores,
        open_views=open_views,
        journal_dir=journal_dir,
        scheme=Config().scheme,
        lease_period=lease_period,
        say=say or (lambda _: None),
        open_registry=lambda: registry if registry is not None else FakeRegistry(),
    )


def cli_context(
    cluster: FakeCluster,
    stores: Mapping[str, FakeStore] | None = None,
    *,
    views: Any = None,
    registry: FakeRegistry | None = None,
) -> Callable[..., Context]:
    """What ``pcmkimg.cli.main(argv, context=...)`` takes: the context the CLI makes of its
    options and configuration (``wiring.live_context``: the journal's directory, the scheme, the
    lease period, say, the pull display), with the fakes' ports."""

    def make(env: Any, progress: Callable[[Any], None] | None) -> Context:
        from pcmkimg import wiring

        live = wiring.live_context(env, progress)
        fake = context(
            cluster, stores, journal_dir=live.journal_dir, views=views, registry=registry
        )
        return records.replace(
            live,
            cluster=fake.cluster,
            open_stores=fake.open_stores,
            open_views=fake.open_views,
            open_registry=fake.open_registry,
        )

    return make
