"""What every command runs with: the context, built once by the CLI, and its two ports.

Every command is ``run(ctx, request) -> report`` in its workflow module. The context carries:

- the **cluster port** (:class:`ClusterPort`): every Pacemaker operation a workflow uses, as
  methods of one object; in production :class:`pcmkimg.adapters.pacemaker.Pacemaker` over a
  :class:`~pcmkimg.adapters.pacemaker.Runner`, in the unit tests ``tests.fakes.FakeCluster``;
- the **stores port**: the nodes' image stores, opened when a command first needs them
  (:attr:`Context.open_stores`: podman-py, for the commands that change a store;
  :attr:`Context.open_views`: read-only views on the standard library, for status and check);
- the **registry port** (:class:`RegistryPort`, ``outdated`` only): what digest a registry
  serves now, over skopeo (:attr:`Context.open_registry`);
- the journal's directory, ``say`` (progress for a person), and the settings (the naming
  scheme, the lease period).

Nothing here is module-global: a test builds a context of fakes and runs a command with it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pcmkimg.core import cib, lease, naming, plan
from pcmkimg.records import dataclass, field

if TYPE_CHECKING:
    from pcmkimg.adapters.journal import Journal


class HoldsPort(Protocol):
    """What keeps the restarts of replicas in place (see
    :class:`pcmkimg.adapters.pacemaker.Holds`)."""

    @property
    def placed(self) -> bool: ...

    def place(self, nodes: Sequence[str], bundle_id: str | None = None) -> None: ...

    def unban(self, node: str) -> None: ...

    def release(self, *, interrupted: bool = False) -> None: ...


class ClusterPort(Protocol):
    """Every Pacemaker operation a workflow uses (see
    :class:`pcmkimg.adapters.pacemaker.Pacemaker`)."""

    @property
    def offline(self) -> bool: ...

    def read_cluster(self) -> plan.Cluster: ...

    def query_cib(self) -> cib.Element: ...

    def status(self) -> cib.ClusterStatus: ...

    def update_cib(self, edit: Callable[[cib.Element], cib.CibChange]) -> cib.CibChange: ...

    def local_node(self) -> str: ...

    def cleanup(self, resource: str, node: str | None = None) -> None: ...

    def refresh(self, resource: str, node: str | None = None) -> None: ...

    def wait(self, timeout: float) -> None: ...

    def settle(self, timeout: float) -> float: ...

    def set_node_attribute(self, node: str, name: str, value: str) -> None: ...

    def delete_node_attribute(self, node: str, name: str) -> None: ...

    def holding(self, bundle_id: str, timeout: float) -> contextlib.AbstractContextManager[Any]: ...

    def restart_replica(
        self, bundle_id: str, node: str, timeout: float, *, holds: Any = None
    ) -> Any: ...

    def restart_replicas(
        self, bundle_ids: Sequence[str], node: str, timeout: float, *, holds: Any = None
    ) -> Any: ...

    def remove_own_bans(self, bundle_id: str, config: cib.Element | None = None) -> list[str]: ...


class StoresPort(Protocol):
    """The nodes' image stores (see :class:`pcmkimg.adapters.podman.Stores`): one store per
    node, and the same work on several nodes in parallel."""

    def get(self, node: str) -> Any: ...

    def each(self, nodes: Sequence[str], work: Callable[[Any], object]) -> dict[str, Any]: ...


class RegistryPort(Protocol):
    """What registries serve now (see :class:`pcmkimg.adapters.registry.Skopeo`): each
    reference asked once, in parallel, a deadline per registry; a failure is an answer."""

    def served(self, references: Sequence[str], timeout: float) -> dict[str, Any]: ...


def _quiet(_: str) -> None:
    pass


def _none() -> contextlib.AbstractContextManager[Any]:
    raise AssertionError("this context has no stores")


def _no_registry() -> RegistryPort:
    raise AssertionError("this context has no registry port")


@dataclass
class Context:
    """What a command runs with (see the module's text)."""

    cluster: ClusterPort
    open_stores: Callable[[], contextlib.AbstractContextManager[StoresPort]] = _none
    """Opens the nodes' stores for a command that changes them (closed at the block's end)."""
    open_views: Callable[[], contextlib.AbstractContextManager[Any]] = _none
    """Opens read-only views of the nodes' stores (status, check)."""
    journal_dir: Path = Path("/var/lib/pcmkimg")
    scheme: naming.Scheme = field(default_factory=naming.Scheme)
    lease_period: float = lease.DEFAULT_PERIOD
    say: plan.Say = _quiet
    progress: Callable[[Any], None] | None = None
    """Shows the pulls (pcmkimg.progress.PullDisplay); None: cached/retry/done lines via say."""
    open_registry: Callable[[], RegistryPort] = _no_registry
    """The registry port (``outdated``), made on first use."""

    def journal(self) -> Journal:
        """The update journal, a new run id (opened, its directory checked, on first use)."""
        from pcmkimg.adapters import journal

        return journal.open_journal(self.journal_dir)
