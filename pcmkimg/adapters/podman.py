"""A node's image store, over the podman API (podman-py): the only door to podman.

:func:`connect` gives a :class:`Store` for one node: a ``unix://`` socket, or an ``ssh://`` URL
reached through our own tunnel (:mod:`pcmkimg.adapters.tunnel`). The store gives the primitives
of the store port (:class:`pcmkimg.core.store.StorePort`: inspect, tag, untag, list images and
containers, remove) over the podman API, and pulls and reads container events; the port builds
resolve, retag, restore and prune on the primitives. Every failure is a typed
:class:`ImageError` whose message names the node and the reference and carries the fix; the
normal "that name is not here" of :meth:`Store.resolve` is a :class:`Unresolved` result.

:func:`resolve_local` is the OCF agent's path: the local socket, else the ``podman`` command.
It lives in :mod:`pcmkimg.adapters.localstore` (standard library only, for the agent's
monitor); the types and errors live in :mod:`pcmkimg.core.images` and :mod:`pcmkimg.core.errors`.

podman-py is imported inside :func:`connect` only, so that importing this module stays cheap.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from types import TracebackType
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from pcmkimg.adapters.config import Config
from pcmkimg.adapters.signals import signals_held
from pcmkimg.core.errors import (
    DigestMismatch,
    ImageError,
    InvalidName,
    InvalidReference,
    NodeUnreachable,
    PullFailed,
    RegistryUnreachable,
    SocketDown,
    StoreError,
)
from pcmkimg.core.images import (
    Container,
    ImageInfo,
    Pulled,
    PullProgress,
    Resolved,
    containers_from,
    has_digest,
    image_info,
)
from pcmkimg.core.naming import DEFAULT_SCHEME, Scheme
from pcmkimg.core.prune import repository_of
from pcmkimg.core.pulls import PULL_FIXES, backoff_delays, classify_pull_error, pull_fix
from pcmkimg.core.reference import (
    Reference,
    parse,
)
from pcmkimg.core.store import StorePort
from pcmkimg.core.tagplan import TagOp
from pcmkimg.records import dataclass, field

# isort: off
# Reached as ``images.NAME`` by workflows/update.py, rollback.py and test_execute_paths.py
# (``import podman as images``) until the node step imports them from their homes (issue 30).
from pcmkimg.core.errors import AuthError as AuthError
from pcmkimg.core.images import Unresolved as Unresolved
from pcmkimg.core.images import downtime as downtime
from pcmkimg.core.tagplan import Retagged as Retagged
# isort: on

if TYPE_CHECKING:
    from podman import PodmanClient

    from pcmkimg.adapters.tunnel import Tunnel

DEFAULT_TIMEOUT = 120.0
"""Seconds to wait for one answer (or one line of a pull's progress) from a podman service."""


# ---------------------------------------------------------------------------------------------
# The store.


ProgressCallback = Callable[[PullProgress], None]


def _no_progress(_: PullProgress) -> None:
    pass


def _verify_all(_: str | None) -> bool:
    return True


class Store(StorePort):
    """One node's image store. Use :func:`connect` to get one; close it when done.

    ``scheme`` is the floating-name scheme; ``tls_verify`` tells whether TLS is verified for
    a registry (host[:port], or None), when a pull does not say.
    """

    def __init__(
        self,
        node: str,
        url: str,
        client: PodmanClient,
        *,
        tunnel: Tunnel | None = None,
        scheme: Scheme = DEFAULT_SCHEME,
        tls_verify: Callable[[str | None], bool] = _verify_all,
    ) -> None:
        self.node = node
        self.url = url
        self.client = client
        self._tunnel = tunnel
        self.scheme = scheme
        self.tls_verify = tls_verify

    # -- plumbing ------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the API client and stop the tunnel, if any. Safe to call twice."""
        try:
            self.client.close()
        finally:
            if self._tunnel is not None:
                self._tunnel.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @contextlib.contextmanager
    def _talking(self, ref: object = None) -> Iterator[None]:
        """Turn a lost connection to the podman service into NodeUnreachable, and any other
        refusal that the code inside did not handle (a 404 it expects, say) into StoreError."""
        from podman.errors import APIError

        try:
            yield
        except APIError as err:
            if err.response is None:
                raise self._unreachable(err, ref) from err
            raise StoreError(
                f"the podman API service refused: {err.explanation or err}",
                "run the same request with the podman command on the node to see the cause",
                node=self.node,
                ref=ref,
            ) from err
        except OSError as err:  # requests' ConnectionError, ReadTimeout, ... are OSErrors
            raise self._unreachable(err, ref) from err

    def _unreachable(self, err: BaseException, ref: object) -> NodeUnreachable:
        cause = err.__cause__ or err
        return NodeUnreachable(
            f"the podman API service at {self.url} did not answer: {cause}",
            NodeUnreachable.fix_for(self.url),
            node=self.node,
            ref=ref,
        )

    # -- the primitives of the port ----------------------------------------------------------

    def inspect(self, name: str) -> ImageInfo | None:
        from podman.errors import APIError

        with self._talking(name):
            try:
                return image_info(self.client.images.get(name).attrs)
            except APIError as err:
                if _status(err) == 404:
                    return None
                raise

    def apply(self, ops: Iterable[TagOp]) -> None:
        """The port's :meth:`~StorePort.apply`, with SIGINT, SIGTERM, SIGHUP and SIGQUIT held
        until the last operation is made: a plan interrupted half-way could leave an image
        named only by the hold tag (a swap's target, between its second and third move)."""
        with signals_held():
            super().apply(ops)

    def tag(self, image_id: str, ref: Reference) -> None:
        self._name_call("tag", image_id, ref)

    def untag(self, image_id: str, ref: Reference) -> None:
        self._name_call("untag", image_id, ref)

    def _name_call(self, verb: str, image_id: str, ref: Reference) -> None:
        """POST /images/ID/tag or /untag (podman-py has no untag); 201 or StoreError."""
        with self._talking(ref):
            response = self.client.api.post(
                f"/images/{image_id}/{verb}", params={"repo": ref.name, "tag": ref.tag}
            )
        if response.status_code != 201:
            raise StoreError(
                f"podman refused to {verb} image {image_id[:12]}: HTTP {response.status_code} "
                f"{response.text.strip()[:300]}",
                "check the podman service log on the node",
                node=self.node,
                ref=ref,
            )

    # -- reading -------------------------------------------------------------------------------

    def images(self) -> tuple[ImageInfo, ...]:
        """Every image of the store (no intermediate layers), sorted by ID."""
        with self._talking():
            ids = sorted({image.id for image in self.client.images.list()})
        found = (self.inspect(image_id) for image_id in ids)
        return tuple(image for image in found if image is not None)

    def named_images(self) -> tuple[ImageInfo, ...]:
        """Every image that has a name, with its names, in ONE call (``GET
        /libpod/images/json``): what status needs of a store, where an inspect per name would
        be a call (and on ssh nodes a round trip) per service."""
        with self._talking():
            response = self.client.api.get("/images/json", params={"all": False})
            response.raise_for_status()
            rows = response.json() or []
        found = (image_info({**row, "NamesHistory": row.get("History")}) for row in rows)
        return tuple(image for image in found if image.names)

    def containers(self, *, running_only: bool = False) -> tuple[Container, ...]:
        """The node's containers (all, or only the running ones) with their image IDs."""
        with self._talking():
            response = self.client.api.get("/containers/json", params={"all": not running_only})
            response.raise_for_status()
            rows = response.json() or []
        return containers_from(rows)

    def container_events(
        self, name: str, since: float, until: float
    ) -> tuple[tuple[float, str], ...]:
        """(epoch time, action) of the events of the containers named ``name`` between
        ``since`` and ``until`` (epoch seconds), oldest first: podman's event log, machine
        output (one JSON object a line)."""
        import json

        params = {
            "since": str(int(since)),
            "until": str(int(until) + 1),
            "stream": "false",
            "filters": json.dumps({"type": ["container"], "container": [name]}),
        }
        with self._talking(name):
            response = self.client.api.get("/events", params=params)
            response.raise_for_status()
            text = response.text
        found = []
        for line in text.splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if not isinstance(event, dict):
                continue
            when = event.get("timeNano")
            seconds = int(when) / 1e9 if when else float(event.get("time") or 0)
            found.append((seconds, str(event.get("Action") or event.get("status") or "")))
        return tuple(sorted(found))

    # -- pulling -------------------------------------------------------------------------------

    def pull(
        self,
        ref: Reference | str,
        *,
        expected_digest: str | None = None,
        progress: ProgressCallback | None = None,
        tls_verify: bool | None = None,
        retries: int = 3,
        backoff: float = 1.0,
    ) -> Pulled:
        """Pull ``ref`` into the store and return the image it names.

        ``NAME@D`` and ``NAME:TAG@D`` are pulled by the digest D (podman checks it), and no name
        is given to the result: pcmkimg creates or moves only the names of its own scheme. When
        the store already has D of that repository, the network is not used at all.
        ``NAME:TAG`` with ``expected_digest`` D is pulled by its tag, then refused with
        :class:`DigestMismatch`, naming both digests, when the image it names is not D (no
        network when the store's ``NAME:TAG`` already is D). ``tls_verify`` None means the
        registry's setting in the configuration (verified unless configured otherwise).
        Transient failures (registry down, timeouts, 5xx) are retried ``retries`` times with
        exponential backoff from ``backoff`` seconds. A failed pull leaves the store unchanged.
        """
        wanted = self._parse(ref)
        report = progress or _no_progress
        self._check_digests(wanted, expected_digest)
        digest = wanted.digest or expected_digest
        if tls_verify is None:
            tls_verify = self.tls_verify(wanted.domain)
        # By digest when the reference has one; else by the name the operator gave.
        source = wanted.with_tag(None) if wanted.digest else wanted
        cached = None
        if digest:
            cached = self.inspect(str(source))
            if cached is not None and not has_digest(cached, wanted.name, digest):
                cached = None
        attempts = 0
        if cached is not None:
            report(PullProgress(self.node, str(wanted), "cached", f"{digest} is already here"))
        else:
            delays = backoff_delays(retries, backoff)
            while True:
                attempts += 1
                try:
                    self._pull_once(source, tls_verify, report, attempts)
                    break
                except RegistryUnreachable as err:
                    if attempts > len(delays):
                        raise
                    delay = delays[attempts - 1]
                    report(
                        PullProgress(
                            self.node,
                            str(wanted),
                            "retry",
                            f"{err.message}; retrying in {delay:g} s",
                            attempts,
                        )
                    )
                    time.sleep(delay)
        image = self._require(str(source))
        if digest and not has_digest(image, wanted.name, digest):
            found = [d.split("@", 1)[1] for d in image.repo_digests if d.startswith(wanted.name)]
            raise DigestMismatch(
                f"{wanted.with_digest(None)} has digest {', '.join(found) or 'none'}, "
                f"not the expected {digest}",
                "check the digest given; the registry has another image under this tag "
                "(give NAME@DIGEST to pull exactly that image)",
                node=self.node,
                ref=wanted,
            )
        resolved = Resolved(self.node, str(source), image)
        report(PullProgress(self.node, str(wanted), "done", resolved.id, max(attempts, 1)))
        return Pulled(resolved, cached=cached is not None, attempts=attempts)

    def _check_digests(self, wanted: Reference, expected: str | None) -> None:
        if expected is None:
            return
        try:
            wanted.with_digest(expected)
        except InvalidReference as err:
            raise InvalidName(err.message, err.fix, node=self.node, ref=wanted) from err
        if wanted.digest is not None and wanted.digest != expected:
            raise InvalidName(
                f"the reference has digest {wanted.digest}, but {expected} is expected",
                "give one digest",
                node=self.node,
                ref=wanted,
            )

    def _pull_once(
        self, source: Reference, tls_verify: bool, report: ProgressCallback, attempt: int
    ) -> str:
        """One pull over the libpod API; its progress to ``report``; the image ID.

        ``compatMode=False`` asks for libpod's own stream, the same on podman 4 (which has no
        other) and 5 (whose Docker-compatible stream, podman-py's default, has no image ID and
        shortens the errors): ``{"stream": "Copying blob ..."}`` lines, then ``{"id": ...}`` or
        ``{"error": ...}``. What comes back is read by its shape, not by podman's version: a
        refusal before any stream (an HTTP error status) and Docker-style ``status`` records
        are understood too.
        """
        from podman.errors import APIError

        text = str(source)
        image_id = None
        with self._talking(text):
            try:
                # With stream=True podman-py returns an iterator of decoded dicts; its
                # annotation is the union of every mode.
                lines: Iterator[Any] = self.client.images.pull(  # type: ignore[assignment]
                    text, stream=True, decode=True, tls_verify=tls_verify, compatMode=False
                )
            except APIError as err:  # the service refused the pull before streaming
                if err.response is None:
                    raise  # no answer at all: _talking makes it NodeUnreachable
                raise self._pull_error(_refusal(err), source, _status(err)) from err
            for line in lines:
                if not isinstance(line, dict):
                    continue
                if line.get("error") or line.get("errorDetail"):
                    detail = line.get("errorDetail")
                    message = line.get("error") or (
                        detail.get("message") if isinstance(detail, dict) else detail
                    )
                    raise self._pull_error(str(message), source)
                said = line.get("stream") or line.get("status")
                if said:
                    # libpod: one line of text; Docker-style: a status about a layer "id".
                    about = f" {line['id']}" if line.get("status") and line.get("id") else ""
                    report(
                        PullProgress(self.node, text, "status", f"{said}".strip() + about, attempt)
                    )
                elif line.get("id"):
                    image_id = str(line["id"])
        if not image_id:
            raise PullFailed(
                "podman reported neither an image nor an error",
                PULL_FIXES[PullFailed],
                node=self.node,
                ref=source,
            )
        return image_id

    def _pull_error(self, message: str, source: Reference, status: int | None = None) -> ImageError:
        kind = classify_pull_error(message, status)
        fix = pull_fix(kind, message)
        return kind(f"pull failed: {message.strip()}", fix, node=self.node, ref=source)

    # -- removing ------------------------------------------------------------------------------

    def remove(self, image: ImageInfo) -> bool:
        """Remove an image without force: False when podman refuses (e.g. now in use, or it
        got another name meanwhile). The names in ``image`` other than its first go first
        (podman removes an image with several names only by force); then the image goes by
        its ID, so that podman refuses if a name that was not in ``image`` is on it now (no
        name but those the caller chose is ever taken off)."""
        from podman.errors import APIError

        names = [parse(n) for n in image.names if repository_of(n)]
        for extra in names[1:]:
            self._untag(self._require(image.id), extra)
        with self._talking(image.id):
            try:
                self.client.images.remove(image.id)
            except APIError as err:
                if err.response is None:
                    raise
                return _status(err) == 404
        return True


def _status(err: Exception) -> int | None:
    response = getattr(err, "response", None)
    return None if response is None else int(response.status_code)


def _refusal(err: Exception) -> str:
    """podman's own message in a refusal: the JSON body's ``message`` (podman-py keeps the
    whole body as the explanation when the body has no ``cause``), else the explanation."""
    response = getattr(err, "response", None)
    with contextlib.suppress(Exception):  # not JSON, or no message: the explanation then
        message = response.json().get("message")  # type: ignore[union-attr]
        if message:
            return str(message)
    return str(getattr(err, "explanation", None) or err)


def connect(
    node: str,
    url: str,
    *,
    config: Config | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    tunnel_timeout: float | None = None,
) -> Store:
    """Open the image store of ``node`` at ``url`` (``unix://PATH`` or ``ssh://...``).

    Raises NodeUnreachable (HostKeyRejected when ssh refuses the host key) when the podman
    service does not answer a ping.
    """
    from podman import PodmanClient

    from pcmkimg.adapters import tunnel as tunnel_mod

    config = config or Config()
    tunnel = None
    local_url = url
    if url.startswith("ssh://"):
        tunnel = tunnel_mod.open_for_node(
            node, url, config.ssh, tunnel_timeout or tunnel_mod.OPEN_TIMEOUT
        )
        local_url = tunnel.local_url
    elif not url.startswith("unix://"):
        raise NodeUnreachable(
            f"unsupported podman URL {url!r}",
            "use unix:///run/podman/podman.sock or ssh://USER@HOST/run/podman/podman.sock",
            node=node,
        )
    store = None
    try:
        client = PodmanClient(base_url=local_url, timeout=timeout)
        store = Store(
            node, url, client, tunnel=tunnel, scheme=config.scheme, tls_verify=config.tls_verify
        )
        with store._talking():
            if not client.ping():
                raise NodeUnreachable(
                    f"the podman API service at {url} did not answer its ping",
                    NodeUnreachable.fix_for(url),
                    node=node,
                )
    except BaseException as err:
        if store is not None:
            store.close()
        elif tunnel is not None:
            tunnel.close()
        if tunnel is None and type(err) is NodeUnreachable:  # a unix:// socket that is down
            raise SocketDown(err.detail, err.fix, node=node) from err
        raise
    return store


# --------------------------------------------------------------------------- stores


@dataclass
class Stores:
    """The image stores of the cluster nodes, opened on first use and closed together."""

    config: Config
    local_node: str | None
    opened: dict[str, Store] = field(default_factory=dict)

    def get(self, node: str) -> Store:
        if node not in self.opened:
            url = self.config.url_for(node, local_node=self.local_node)
            self.opened[node] = connect(node, url, config=self.config)
        return self.opened[node]

    def close(self) -> None:
        for store in self.opened.values():
            try:
                store.close()
            except Exception:  # closing is best effort; the process ends soon
                pass
        self.opened.clear()

    def each(self, nodes: Sequence[str], work: Callable[[Store], object]) -> dict:
        """``work`` on each node's store in parallel: node -> result or the error raised (see
        :func:`each`)."""
        return each(nodes, self.get, work)


EACH_AT_ONCE = 16
"""The most nodes :func:`each` works on at the same time."""

S = TypeVar("S")


def each(nodes: Sequence[str], get: Callable[[str], S], work: Callable[[S], object]) -> dict:
    """Run ``work`` on ``get(node)`` for each node in parallel, at most :data:`EACH_AT_ONCE`
    at a time: node -> result or the error raised, in the order of ``nodes``. Opening a node's
    store (``get``) is part of its work: its failure is that node's answer too.

    The work runs in daemon threads, and the caller waits for them interruptibly: Ctrl-C or a
    signal that raises (SIGTERM, see :mod:`pcmkimg.adapters.signals`) ends the wait at once
    instead of waiting for every pull; the threads left behind die with the process (a
    ``work`` that reports progress should stop doing so, see ``pull_all``). The one ``each``
    of the stores (:class:`Stores`) and of status's views
    (:class:`pcmkimg.adapters.storeview.StoreViews`).
    """
    if not nodes:
        return {}
    results: dict[str, object] = {}
    lock = threading.Lock()
    done = threading.Event()
    slots = threading.BoundedSemaphore(min(EACH_AT_ONCE, len(nodes)))

    def one(node: str) -> None:
        with slots:
            try:
                result: object = work(get(node))
            except BaseException as exc:  # that node's answer: no crash, no caller left waiting
                result = exc
        with lock:
            results[node] = result
            if len(results) == len(nodes):
                done.set()

    for node in nodes:
        threading.Thread(target=one, args=(node,), name=f"pcmkimg-{node}", daemon=True).start()
    done.wait()  # interruptible: a signal handler's exception ends it
    return {node: results[node] for node in nodes}


@contextmanager
def open_stores(config: Config, local_node: str | None) -> Iterator[Stores]:
    stores = Stores(config, local_node)
    try:
        yield stores
    finally:
        stores.close()
