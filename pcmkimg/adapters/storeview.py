"""Read-only views of the nodes' image stores, for ``status`` and ``check``.

What status needs of a store is two lists: the images with their names (``GET
/libpod/images/json``) and the running containers (``GET /libpod/containers/json``), one call
each per node, whatever the number of services. They go over the node's API socket with the
standard library (the one client, :mod:`pcmkimg.adapters.apisocket`, through
:func:`pcmkimg.adapters.localstore.api_request`: one deadline over the whole exchange, a size
cap), through our own ssh tunnel for an ``ssh://`` node, so that status never imports
podman-py (about 130 ms of a ``pcmkimg status`` that should take a fraction of ``pcs
status``). A short floating name (no registry part) is resolved with one inspect, which applies
podman's own lookup. The views run in parallel through the stores' one
:func:`~pcmkimg.adapters.podman.each`. The nodes behind a local socket start reading their two
lists as soon as the configuration is read (:func:`read_early`), while status reads the cluster.
"""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from pcmkimg.adapters.config import Config
from pcmkimg.adapters.early import Early
from pcmkimg.adapters.localstore import api_request, inspect_over_socket
from pcmkimg.adapters.podman import each
from pcmkimg.core.errors import NodeUnreachable, SocketDown, StoreError
from pcmkimg.core.images import (
    Container,
    ImageInfo,
    Resolved,
    Unresolved,
    containers_from,
    image_info,
)
from pcmkimg.core.store import Resolution
from pcmkimg.records import dataclass, field

if TYPE_CHECKING:
    from pcmkimg.adapters.tunnel import Tunnel

TIMEOUT = 30.0
"""Seconds for one whole answer of a node's API service."""
IMAGES = "/images/json"
RUNNING = "/containers/json?all=false"
"""The two lists status reads of each node's store (:meth:`StoreView.read_early`)."""


@dataclass
class StoreView:
    """One node's store, read-only: the named images, the containers, a name's image."""

    node: str
    url: str
    socket: str
    tunnel: Tunnel | None = None
    timeout: float = TIMEOUT
    _early: dict[str, Early[Any]] = field(default_factory=dict, repr=False)

    def read_early(self) -> None:
        """Start reading the named images and the running containers now, each in a thread:
        the first to ask for either gets that answer (or its error); later asks read afresh."""
        for target in (IMAGES, RUNNING):
            work = functools.partial(self._read, target)
            self._early[target] = Early(work, f"pcmkimg-{self.node}-early")

    def _get(self, target: str) -> Any:
        early = self._early.pop(target, None)
        answer = None if early is None else early.take()
        return self._read(target) if answer is None else answer

    def _read(self, target: str) -> Any:
        try:
            code, status_line, body = api_request(
                self.socket, "GET", target, node=self.node, ref=target, timeout=self.timeout
            )
        except NodeUnreachable as err:
            if self.tunnel is None and type(err) is NodeUnreachable:  # a local socket, down
                raise SocketDown(err.detail, err.fix, node=self.node) from err
            raise
        try:
            data = json.loads(body) if code == 200 else None
        except ValueError:
            data = None
        if data is None:
            raise StoreError(
                f"unexpected answer from the podman API service at {self.url}: "
                f"{status_line or 'nothing'}",
                "check the podman service on the node (podman system service)",
                node=self.node,
            )
        return data

    def named_images(self) -> tuple[ImageInfo, ...]:
        """Every image that has a name, with its names, in one call."""
        rows = self._get(IMAGES) or []
        found = (image_info({**row, "NamesHistory": row.get("History")}) for row in rows)
        return tuple(image for image in found if image.names)

    def containers(self, *, running_only: bool = False) -> tuple[Container, ...]:
        rows = self._get(RUNNING if running_only else "/containers/json?all=true") or []
        return containers_from(rows)

    def resolve(self, floating: str) -> Resolution:
        """One inspect: podman's own lookup of ``floating`` (for a short name)."""
        found = inspect_over_socket(self.socket, floating, node=self.node, timeout=self.timeout)
        if found is None:
            return Unresolved(self.node, floating)
        return Resolved(self.node, floating, found)

    def close(self) -> None:
        if self.tunnel is not None:
            self.tunnel.close()


def open_view(node: str, url: str, config: Config) -> StoreView:
    """The view of ``node``'s store at ``url`` (``unix://PATH``, or ``ssh://`` through a tunnel)."""
    if url.startswith("unix://"):
        return StoreView(node, url, url[len("unix://") :])
    if not url.startswith("ssh://"):
        raise NodeUnreachable(
            f"unsupported podman URL {url!r}",
            "use unix:///run/podman/podman.sock or ssh://USER@HOST/run/podman/podman.sock",
            node=node,
        )
    from pcmkimg.adapters import tunnel as tunnel_mod

    tunnel = tunnel_mod.open_for_node(node, url, config.ssh)
    return StoreView(node, url, tunnel.local_url[len("unix://") :], tunnel)


@dataclass
class StoreViews:
    """The nodes' store views, opened on first use, closed together. ``local_node`` is asked
    only for a node the configuration does not list (it costs a Pacemaker tool call)."""

    config: Config
    local_node: Callable[[], str | None]
    opened: dict[str, StoreView] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def get(self, node: str) -> StoreView:
        with self._lock:
            if node in self.opened:
                return self.opened[node]
        local = None if node in self.config.nodes else self.local_node()
        view = open_view(node, self.config.url_for(node, local_node=local), self.config)
        with self._lock:
            self.opened[node] = view
        return view

    def each(self, nodes: Sequence[str], work: Callable[[StoreView], object]) -> dict:
        """``work`` on each node's view in parallel: node -> result or the error raised (see
        :func:`pcmkimg.adapters.podman.each`)."""
        return each(nodes, self.get, work)

    def close(self) -> None:
        for view in self.opened.values():
            try:
                view.close()
            except Exception:  # closing is best effort; the process ends soon
                pass
        self.opened.clear()


def read_early(config: Config) -> dict[str, StoreView]:
    """The views of the configured nodes behind a local socket (``unix://``), each reading its
    two lists from now on (:meth:`StoreView.read_early`), for status and check to find when
    they know the nodes: the answers of a node they do not ask are left unread. A node behind
    ssh is not read early: its tunnel (a process, a connection) opens only for a node asked."""
    found = {}
    for node, url in config.nodes.items():
        if url.startswith("unix://"):
            view = open_view(node, url, config)
            view.read_early()
            found[node] = view
    return found


@contextmanager
def open_views(
    config: Config,
    local_node: Callable[[], str | None],
    early: Mapping[str, StoreView] | None = None,
) -> Iterator[StoreViews]:
    """The nodes' views, opened on first use (``early``: views already reading, from
    :func:`read_early`), closed together."""
    views = StoreViews(config, _once(local_node), opened=dict(early or {}))
    try:
        yield views
    finally:
        views.close()


def _once(ask: Callable[[], str | None]) -> Callable[[], str | None]:
    lock = threading.Lock()
    answer: list[str | None] = []

    def once() -> str | None:
        with lock:
            if not answer:
                answer.append(ask())
            return answer[0]

    return once
