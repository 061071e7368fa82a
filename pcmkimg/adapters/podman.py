"""A node's image store, over the podman API (podman-py): the only door to podman.

:func:`connect` gives a :class:`Store` for one node: a ``unix://`` socket, or an ``ssh://`` URL
reached through our own tunnel (:mod:`pcmkimg.adapters.tunnel`). The store resolves floating names,
pulls, moves floating names, prunes and lists containers. Every failure is a typed
:class:`ImageError` whose message names the node and the reference and carries the fix; the
normal "that name is not here" of :meth:`Store.resolve` is a :class:`Unresolved` result.

:func:`resolve_local` is the OCF agent's path: the local socket, else the ``podman`` command.
It lives in :mod:`pcmkimg.adapters.localstore` (standard library only, for the agent's
monitor) with the types and errors it uses; they are re-exported here.

podman-py is imported inside :func:`connect` only, so that importing this module stays cheap.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from types import TracebackType
from typing import TYPE_CHECKING, Any, Callable, Union

from pcmkimg.adapters.config import Config
from pcmkimg.adapters.localstore import (
    _unreachable_fix,
    inspect_over_socket,
    resolve_local,
    resolve_with_cli,
)
from pcmkimg.core import commands as cmd
from pcmkimg.core import naming
from pcmkimg.core.images import (
    _FIXES,
    AuthError,
    Container,
    DigestMismatch,
    HostKeyRejected,
    ImageAbsent,
    ImageError,
    ImageInfo,
    ImageNotFound,
    InvalidName,
    NodesUnreachable,
    NodeUnreachable,
    PodmanCommandFailed,
    Pruned,
    Pulled,
    PullFailed,
    PullProgress,
    RegistryUnreachable,
    Resolved,
    Retagged,
    StoreError,
    TLSError,
    Unresolved,
    _repository,
    backoff_delays,
    classify_pull_error,
    downtime,
    has_digest,
    image_info,
    parse_created,
)
from pcmkimg.core.reference import InvalidReference, Reference, parse

if TYPE_CHECKING:
    from podman import PodmanClient

    from pcmkimg.adapters.tunnel import Tunnel

Resolution = Union[Resolved, Unresolved]

HOLD_TAG = "pcmkhold"
"""A short-lived tag that keeps an image named while its only name moves (see retag)."""

_IMAGE_ID = re.compile(r"[0-9a-f]{64}")

DEFAULT_TIMEOUT = 120.0
"""Seconds to wait for one answer (or one line of a pull's progress) from a podman service."""


# ---------------------------------------------------------------------------------------------
# The store.


ProgressCallback = Callable[[PullProgress], None]


def _no_progress(_: PullProgress) -> None:
    pass


class Store:
    """One node's image store. Use :func:`connect` to get one; close it when done."""

    def __init__(
        self,
        node: str,
        url: str,
        client: PodmanClient,
        *,
        tunnel: Tunnel | None = None,
        config: Config | None = None,
    ) -> None:
        self.node = node
        self.url = url
        self.client = client
        self._tunnel = tunnel
        self.config = config or Config()

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
            _unreachable_fix(self.url),
            node=self.node,
            ref=ref,
        )

    def _parse(self, text: Reference | str) -> Reference:
        if isinstance(text, Reference):
            return text
        try:
            return parse(text)
        except InvalidReference as err:
            raise InvalidName(err.message, err.fix, node=self.node, ref=text) from err

    def _inspect(self, name: str) -> ImageInfo | None:
        from podman.errors import APIError

        with self._talking(name):
            try:
                return image_info(self.client.images.get(name).attrs)
            except APIError as err:
                if _status(err) == 404:
                    return None
                raise

    def _require(self, name: str) -> ImageInfo:
        found = self._inspect(name)
        if found is None:
            raise ImageAbsent(
                "the image is not in this node's store",
                f"pull it onto {self.node} first ({cmd.shown(cmd.podman_pull())} there)",
                node=self.node,
                ref=name,
            )
        return found

    def _tag(self, image_id: str, ref: Reference) -> None:
        """Give ``ref`` to the image (podman moves it from any image that holds it)."""
        self._name_call("tag", image_id, ref)

    def _untag(self, image: ImageInfo, ref: Reference, *, last_ok: bool = False) -> None:
        """Take ``ref`` off the image; refused if it is the image's only name (unless
        ``last_ok``: a hold name taken off an image that had no name before)."""
        if not last_ok and not [n for n in image.names if n != str(ref)]:
            raise StoreError(
                f"refusing to take the only name off image {image.id[:12]}",
                "give the image another name first",
                node=self.node,
                ref=ref,
            )
        self._name_call("untag", image.id, ref)

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

    def resolve(self, floating: Reference | str) -> Resolution:
        """The image that ``floating`` names on this node, or Unresolved when none does."""
        name = str(self._parse(floating))
        found = self._inspect(name)
        if found is None:
            return Unresolved(self.node, name)
        return Resolved(self.node, name, found)

    def images(self) -> tuple[ImageInfo, ...]:
        """Every image of the store (no intermediate layers), sorted by ID."""
        with self._talking():
            ids = sorted({image.id for image in self.client.images.list()})
        found = (self._inspect(image_id) for image_id in ids)
        return tuple(image for image in found if image is not None)

    def containers(self, *, running_only: bool = False) -> tuple[Container, ...]:
        """The node's containers (all, or only the running ones) with their image IDs."""
        with self._talking():
            response = self.client.api.get("/containers/json", params={"all": not running_only})
            response.raise_for_status()
            rows = response.json() or []
        return tuple(
            Container(
                name=(row.get("Names") or [""])[0],
                id=row.get("Id", ""),
                image=row.get("Image", ""),
                image_id=row.get("ImageID", ""),
                state=str(row.get("State", "")),
            )
            for row in rows
        )

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
            tls_verify = self.config.tls_verify(wanted.domain)
        # By digest when the reference has one; else by the name the operator gave.
        source = wanted.with_tag(None) if wanted.digest else wanted
        cached = None
        if digest:
            cached = self._inspect(str(source))
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
        from podman.errors import APIError

        text = str(source)
        image_id = None
        try:
            with self._talking(text):
                # With stream=True podman-py returns an iterator of decoded dicts; its
                # annotation is the union of every mode.
                lines: Iterator[Any] = self.client.images.pull(  # type: ignore[assignment]
                    text, stream=True, decode=True, tls_verify=tls_verify
                )
                for line in lines:
                    if not isinstance(line, dict):
                        continue
                    if line.get("error"):
                        raise self._pull_error(str(line["error"]), source)
                    if line.get("stream"):
                        report(
                            PullProgress(
                                self.node, text, "status", str(line["stream"]).strip(), attempt
                            )
                        )
                    if line.get("id"):
                        image_id = str(line["id"])
        except APIError as err:  # the service refused the request before streaming
            raise self._pull_error(str(err.explanation or err), source) from err
        if not image_id:
            raise PullFailed(
                "podman reported neither an image nor an error",
                _FIXES[PullFailed],
                node=self.node,
                ref=source,
            )
        return image_id

    def _pull_error(self, message: str, source: Reference) -> ImageError:
        kind = classify_pull_error(message)
        return kind(f"pull failed: {message.strip()}", _FIXES[kind], node=self.node, ref=source)

    # -- naming --------------------------------------------------------------------------------

    def rollback_for(self, floating: Reference) -> Reference:
        """The default rollback name of a floating name: ``<prefix>/<service>:<rollback_tag>``."""
        scheme = self.config.scheme
        found = naming.classify(floating, scheme)
        service = found.service if found else floating.last_component
        return naming.rollback_name(service, scheme)

    def retag(
        self,
        floating: Reference | str,
        image: Reference | str,
        *,
        rollback: Reference | str | None = None,
    ) -> Retagged:
        """Point ``floating`` at ``image`` (a name, or an image ID); keep the old image as
        ``rollback``.

        The floating name moves in one podman call, so it never disappears. The old image gets
        the rollback name first (default: the scheme's rollback name of the service). No image
        is removed, and no image is left without a name on the way, except an older image whose
        only name was the rollback name (reported as ``released_id``). Running it again changes
        nothing. :meth:`restore` undoes it exactly.
        """
        name, back = self._scheme_names(floating, rollback)
        target = self._target(image)
        current = self._inspect(str(name))
        holder = self._inspect(str(back))
        before = holder.id if holder is not None else None
        if current is not None and current.id == target.id:
            return Retagged(
                self.node,
                str(name),
                current.id,
                target.id,
                moved=False,
                rollback_name=str(back),
                rollback_before=before,
            )
        released = None
        if current is not None and (holder is None or holder.id != current.id):
            only_name = holder is not None and set(holder.names) <= {str(back)}
            swap = holder is not None and holder.id == target.id
            with self._held(target.id if only_name and swap else None, back):
                self._tag(current.id, back)
                self._tag(target.id, name)
            if only_name and not swap and holder is not None:
                released = holder.id
        else:
            self._tag(target.id, name)
        return Retagged(
            self.node,
            str(name),
            current.id if current else None,
            target.id,
            moved=True,
            rollback=str(back) if current else None,
            released_id=released,
            rollback_name=str(back),
            rollback_before=before,
        )

    def restore(self, done: Retagged) -> None:
        """Put the floating and the rollback name back where they were before ``done``.

        The image the floating name moved to keeps a hold name meanwhile, so that no image is
        left without a name on the way (an image that had no name before has none after).
        Raises ImageAbsent when the floating name named no image before: there is nothing to
        go back to (the caller says what then).
        """
        if not done.moved:
            return
        name, back = self._scheme_names(done.floating, done.rollback_name)
        if done.old_id is None:
            raise ImageAbsent(
                f"{name} named no image here before",
                "there is nothing to go back to",
                node=self.node,
                ref=name,
            )
        now = self._inspect(str(name))
        with self._held(now.id if now is not None and now.id != done.old_id else None, back):
            self._tag(done.old_id, name)
            if done.rollback_before is not None:
                self._tag(done.rollback_before, back)
            else:
                holder = self._inspect(str(back))
                if holder is not None:
                    self._untag(holder, back)

    @contextlib.contextmanager
    def _held(self, image_id: str | None, back: Reference) -> Iterator[None]:
        """Keep ``image_id`` named (``back`` with the hold tag) while names move around it."""
        if image_id is None:
            yield
            return
        hold = back.with_tag(HOLD_TAG)
        self._tag(image_id, hold)
        yield
        self._untag(self._require(str(hold)), hold, last_ok=True)

    def _scheme_names(
        self, floating: Reference | str, rollback: Reference | str | None
    ) -> tuple[Reference, Reference]:
        name = self._parse(floating)
        if name.tag is None or name.digest is not None:
            raise InvalidName(
                "a floating name needs a tag and no digest",
                "give it as PREFIX/SERVICE:TAG, e.g. cluster.common.tag/mariadb:pcmklatest",
                node=self.node,
                ref=name,
            )
        back = self._parse(rollback) if rollback is not None else self.rollback_for(name)
        if back.tag is None or back.digest is not None or back == name:
            raise InvalidName(
                f"rollback name {back} must have a tag, no digest, and differ from {name}",
                "give a rollback name such as cluster.common.tag/mariadb:pcmkprevious",
                node=self.node,
                ref=back,
            )
        return name, back

    def _target(self, image: Reference | str) -> ImageInfo:
        """The image named by a reference, or by its ID (64 hex digits)."""
        if isinstance(image, str) and _IMAGE_ID.fullmatch(image):
            return self._require(image)
        return self._require(str(self._parse(image)))

    # -- pruning -------------------------------------------------------------------------------

    def prune(self, service: str, *, keep: int = 1) -> Pruned:
        """Remove old images of ``service``; keep the ``keep`` newest others.

        The images of a service are those that hold or held its floating or rollback name, and
        every image with a name (now or before) in a repository of theirs. Images that hold the
        floating or rollback name, or that any container uses, are never removed.
        """
        scheme = self.config.scheme
        try:
            own = {
                str(naming.floating_name(service, scheme)),
                str(naming.rollback_name(service, scheme)),
            }
        except InvalidReference as err:
            raise InvalidName(err.message, err.fix, node=self.node, ref=service) from err
        own_repos = {_repository(n) for n in own}
        images = self.images()
        in_use = {c.image_id for c in self.containers()}

        def repos(image: ImageInfo) -> set[str | None]:
            return {_repository(n) for n in (*image.names, *image.names_history)}

        related = set(own_repos)
        for image in images:
            if repos(image) & own_repos:
                related |= repos(image)
        related.discard(None)
        mine = [image for image in images if repos(image) & related]
        protected = [i for i in mine if own & set(i.names) or i.id in in_use]
        rest = sorted(
            (i for i in mine if i not in protected),
            key=lambda i: (i.created or datetime.min.replace(tzinfo=timezone.utc), i.id),
            reverse=True,
        )
        kept, removed = list(rest[: max(0, keep)]), []
        for image in rest[max(0, keep) :]:
            if self._remove(image):
                removed.append(image.id)
            else:
                kept.append(image)
        return Pruned(
            self.node,
            service,
            removed=tuple(removed),
            kept=tuple(i.id for i in kept),
            protected=tuple(i.id for i in protected),
        )

    def _remove(self, image: ImageInfo) -> bool:
        """Remove an image without force: False when podman refuses (e.g. now in use)."""
        from podman.errors import APIError

        names = [parse(n) for n in image.names if _repository(n)]
        for extra in names[1:]:
            self._untag(self._require(image.id), extra)
        with self._talking(image.id):
            try:
                self.client.images.remove(str(names[0]) if names else image.id)
            except APIError as err:
                if err.response is None:
                    raise
                return _status(err) == 404
        return True


def _status(err: Exception) -> int | None:
    response = getattr(err, "response", None)
    return None if response is None else int(response.status_code)


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
        ssh = config.ssh
        try:
            tunnel = tunnel_mod.open_tunnel(
                url,
                known_hosts=ssh.known_hosts,
                identity_file=ssh.identity_file,
                connect_timeout=ssh.connect_timeout,
                timeout=tunnel_timeout or tunnel_mod.OPEN_TIMEOUT,
            )
        except tunnel_mod.TunnelFailed as err:
            kind = HostKeyRejected if err.host_key else NodeUnreachable
            raise kind(err.message, err.fix, node=node) from err
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
        store = Store(node, url, client, tunnel=tunnel, config=config)
        with store._talking():
            if not client.ping():
                raise NodeUnreachable(
                    f"the podman API service at {url} did not answer its ping",
                    _unreachable_fix(url),
                    node=node,
                )
    except BaseException:
        if store is not None:
            store.close()
        elif tunnel is not None:
            tunnel.close()
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
        """Run ``work`` on each node's store in parallel: node -> result or the error raised."""

        def one(node: str) -> object:
            try:
                return work(self.get(node))
            except Exception as exc:  # one node's failure is that node's answer, not a crash
                return exc

        if not nodes:
            return {}
        with ThreadPoolExecutor(max_workers=min(8, len(nodes))) as pool:
            return dict(zip(nodes, pool.map(one, nodes)))


@contextmanager
def open_stores(config: Config, local_node: str | None) -> Iterator[Stores]:
    stores = Stores(config, local_node)
    try:
        yield stores
    finally:
        stores.close()


__all__ = [
    "AuthError",
    "Container",
    "DigestMismatch",
    "HostKeyRejected",
    "ImageAbsent",
    "ImageError",
    "ImageInfo",
    "ImageNotFound",
    "InvalidName",
    "NodeUnreachable",
    "NodesUnreachable",
    "PodmanCommandFailed",
    "Pruned",
    "PullFailed",
    "PullProgress",
    "Pulled",
    "RegistryUnreachable",
    "Resolution",
    "Resolved",
    "Retagged",
    "Store",
    "StoreError",
    "TLSError",
    "Unresolved",
    "backoff_delays",
    "classify_pull_error",
    "connect",
    "downtime",
    "image_info",
    "inspect_over_socket",
    "parse_created",
    "resolve_local",
    "resolve_with_cli",
]
