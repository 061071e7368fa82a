"""The local node's image store, with the standard library only: the agent's path.

The OCF agent's monitor runs every 30 seconds on every cluster node, next to the bundle's own
podman monitor, and must cost a fraction of it. This module resolves a name in the local store
through the podman API socket (the one standard-library client,
:func:`pcmkimg.adapters.apisocket.request`, whose failures :func:`api_request` turns into the
store's typed errors) or, when the socket does not answer, the ``podman`` command. It imports
no podman-py, no configuration, no reference parser. It reads, with one exception:
:func:`tag_local` gives a vanished floating name back to an image (the guard's heal), the same
two ways. :mod:`pcmkimg.adapters.podman` re-exports the reading part; use it from there
everywhere else.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

from pcmkimg import PODMAN_SOCKET
from pcmkimg.adapters import apisocket
from pcmkimg.adapters.errors import AnswerTooLarge, AnswerTooSlow
from pcmkimg.core.errors import (
    ImageError,
    NodeUnreachable,
    PodmanCommandFailed,
    StoreError,
    UnexpectedAnswer,
)
from pcmkimg.core.images import (
    ImageInfo,
    Resolved,
    Unresolved,
    image_info,
    inspect_answer,
    parse_created,
)

# typing is not imported at run time: it would cost every monitor a few milliseconds.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import subprocess
    from typing import Callable, TypeVar

    from pcmkimg.core.images import Resolution

    T = TypeVar("T")

LOCAL_URL = PODMAN_SOCKET
"""The podman API socket of the local node (as :data:`pcmkimg.adapters.config.LOCAL_URL`)."""


# ---------------------------------------------------------------------------------------------
# The two ways to the store: the API socket, else the podman command.


def _local(url: str, over_socket: Callable[[str], T], with_cli: Callable[[], T]) -> T:
    """``over_socket(path)`` on the API socket of a ``unix://`` URL, else ``with_cli()``.

    The bundle's own agent uses the podman command, so a stopped API service must not fail us:
    when the socket does not answer, the command does the same.
    """
    if url.startswith("unix://"):
        try:
            return over_socket(url[len("unix://") :])
        except NodeUnreachable:
            pass
    return with_cli()


MAX_ANSWER = apisocket.MAX_ANSWER
"""The most bytes an answer of the API socket may have (the client's own cap)."""


def api_request(
    path: str, method: str, target: str, *, node: str, ref: str, timeout: float
) -> tuple[int, str, bytes]:
    """:func:`pcmkimg.adapters.apisocket.request` (one deadline over the whole exchange, the
    size cap), its failures as the store's errors: AnswerTooSlow (a NodeUnreachable: the
    caller may fall back to the podman command), AnswerTooLarge, NodeUnreachable when the
    socket does not answer."""
    try:
        return apisocket.request(path, method, target, timeout=timeout)
    except apisocket.TooLarge as err:
        raise AnswerTooLarge(
            f"the podman API socket {path} answered more than {MAX_ANSWER} bytes",
            "check the podman service on the node (podman system service); "
            "restart it if it misbehaves",
            node=node,
            ref=ref,
        ) from err
    except apisocket.TooSlow as err:
        raise AnswerTooSlow(
            f"the podman API socket {path} did not answer within {timeout:g} s",
            "check the podman service on the node (podman system service): it is stuck or "
            "overloaded; restart it",
            node=node,
            ref=ref,
        ) from err
    except apisocket.NoAnswer as err:
        raise NodeUnreachable(
            f"the podman API socket {path} does not answer: {err}",
            NodeUnreachable.fix_for(f"unix://{path}"),
            node=node,
            ref=ref,
        ) from err


def _podman(
    argv: list[str], *, node: str, ref: str, timeout: float
) -> subprocess.CompletedProcess[str]:
    """Run a podman command (an argv, no shell; ``LC_ALL=C``, so that its errors can be matched)."""
    import subprocess

    try:
        return subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env={**os.environ, "LC_ALL": "C"},
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        raise PodmanCommandFailed(
            f"cannot run {argv[0]}: {err}",
            "install podman, or check that its storage is not locked",
            node=node,
            ref=ref,
        ) from err


def _said(text: str) -> str:
    return " ".join(text.split())


def _exited(
    what: str, proc: subprocess.CompletedProcess[str], *, node: str, ref: str
) -> PodmanCommandFailed:
    return PodmanCommandFailed(
        f"'{what}' exited {proc.returncode}: {_said(proc.stderr)[-500:]}",
        "run the same podman command on the node to see the cause",
        node=node,
        ref=ref,
    )


def _api_said(body: bytes) -> str:
    """What an error answer of the API says: its ``message``, else its text, on one line."""
    try:
        data = json.loads(body)
        if isinstance(data, dict) and data.get("message"):
            return _said(str(data["message"]))
    except ValueError:
        pass
    return _said(body.decode(errors="replace"))


# ---------------------------------------------------------------------------------------------
# Resolving a name.


def resolve_with_cli(
    floating: str,
    *,
    node: str = "local",
    podman_command: Sequence[str] = ("podman",),
    timeout: float = 30.0,
) -> Resolution:
    """Resolve ``floating`` with ``podman image inspect`` (no API service needed)."""
    argv = [*podman_command, "image", "inspect", "--format", "json", "--", floating]
    proc = _podman(argv, node=node, ref=floating, timeout=timeout)
    if proc.returncode != 0:
        said = _said(proc.stderr)
        if "image not known" in said or "no such image" in said.lower():
            return Unresolved(node, floating)
        raise _exited("podman image inspect", proc, node=node, ref=floating)
    try:
        data = json.loads(proc.stdout)
        return Resolved(node, floating, image_info(data[0]))
    except (ValueError, LookupError, TypeError, AttributeError) as err:
        raise PodmanCommandFailed(
            f"cannot read the output of 'podman image inspect': {err}",
            "check the podman version on the node",
            node=node,
            ref=floating,
        ) from err


def inspect_over_socket(
    path: str, name: str, *, node: str = "local", timeout: float = 10.0
) -> ImageInfo | None:
    """``GET /libpod/images/NAME/json`` on a local API socket, with the standard library only.

    The agent's monitor runs every few seconds on every node: this keeps it free of podman-py's
    import cost. None when no image has the name; NodeUnreachable when the socket does not
    answer; StoreError on any other answer.
    """
    code, status_line, body = api_request(
        path, "GET", apisocket.image_target(name), node=node, ref=name, timeout=timeout
    )
    try:
        return inspect_answer(code, body)
    except UnexpectedAnswer:
        raise StoreError(
            f"unexpected answer from {path}: {status_line or 'nothing'}",
            "check the podman service on the node (podman system service)",
            node=node,
            ref=name,
        ) from None


def resolve_local(
    floating: str,
    url: str = LOCAL_URL,
    *,
    node: str = "local",
    podman_command: Sequence[str] = ("podman",),
    timeout: float = 10.0,
) -> Resolution:
    """Resolve on the local node: through the API socket at ``url``, else the podman command.

    ``floating`` may be an image ID too.
    """

    def over_socket(path: str) -> Resolution:
        found = inspect_over_socket(path, floating, node=node, timeout=timeout)
        return Resolved(node, floating, found) if found else Unresolved(node, floating)

    def with_cli() -> Resolution:
        return resolve_with_cli(floating, node=node, podman_command=podman_command, timeout=timeout)

    return _local(url, over_socket, with_cli)


# ---------------------------------------------------------------------------------------------
# The images that running containers of a name run (the name may be gone from the store).


def _run_as(rows: object, name: str) -> tuple[str, ...]:
    """The image IDs of the listed containers created from ``name``, sorted, each once."""
    if not isinstance(rows, list):
        raise ValueError("not a list of containers")
    found = set()
    for row in rows:
        if isinstance(row, dict) and row.get("Image") == name and row.get("ImageID"):
            found.add(str(row["ImageID"]).removeprefix("sha256:"))
    return tuple(sorted(found))


def running_images(
    name: str,
    url: str = LOCAL_URL,
    *,
    node: str = "local",
    podman_command: Sequence[str] = ("podman",),
    timeout: float = 10.0,
) -> tuple[str, ...]:
    """The IDs of the images that the running containers created from ``name`` run.

    A container keeps the name it was created from after the name left its image, so this
    finds the image a bundle replica runs even when its floating name is gone. Through the API
    socket (``GET /libpod/containers/json``), else ``podman ps --format json``.
    """

    def over_socket(path: str) -> tuple[str, ...]:
        code, status_line, body = api_request(
            path, "GET", "/containers/json", node=node, ref=name, timeout=timeout
        )
        try:
            if code != 200:
                raise ValueError(status_line or "nothing")
            return _run_as(json.loads(body), name)
        except ValueError as err:
            raise StoreError(
                f"unexpected answer from {path} to a container list: {err}",
                "check the podman service on the node (podman system service)",
                node=node,
                ref=name,
            ) from err

    def with_cli() -> tuple[str, ...]:
        argv = [*podman_command, "ps", "--format", "json"]
        proc = _podman(argv, node=node, ref=name, timeout=timeout)
        if proc.returncode != 0:
            raise _exited("podman ps", proc, node=node, ref=name)
        try:
            return _run_as(json.loads(proc.stdout or "[]"), name)
        except ValueError as err:
            raise PodmanCommandFailed(
                f"cannot read the output of 'podman ps': {err}",
                "check the podman version on the node",
                node=node,
                ref=name,
            ) from err

    return _local(url, over_socket, with_cli)


# ---------------------------------------------------------------------------------------------
# Giving a name to an image: the guard's heal, the only write here.


def _repo_and_tag(name: str, node: str) -> tuple[str, str]:
    """``reg:5000/ns/img:1.0`` -> (``reg:5000/ns/img``, ``1.0``); refused without a tag."""
    repo, sep, tag = name.rpartition(":")
    if not sep or not repo or not tag or "/" in tag or "@" in name:
        raise StoreError(
            f"{name} is not a name with a tag: there is nothing to tag an image with",
            "give the full name, REPOSITORY:TAG",
            node=node,
            ref=name,
        )
    return repo, tag


def tag_local(
    image_id: str,
    name: str,
    url: str = LOCAL_URL,
    *,
    node: str = "local",
    podman_command: Sequence[str] = ("podman",),
    timeout: float = 10.0,
) -> None:
    """Give ``name`` (REPOSITORY:TAG) to the image ``image_id`` in the local store.

    Through the API socket at ``url`` (``POST /libpod/images/ID/tag?repo=R&tag=T``, 201), else
    ``podman tag ID NAME``. podman moves the name from any image that holds it. StoreError or
    PodmanCommandFailed when podman refuses.
    """
    repo, tag = _repo_and_tag(name, node)

    def over_socket(path: str) -> None:
        query = f"repo={apisocket.quote(repo)}&tag={apisocket.quote(tag)}"
        code, status_line, body = api_request(
            path,
            "POST",
            f"/images/{apisocket.quote(image_id)}/tag?{query}",
            node=node,
            ref=name,
            timeout=timeout,
        )
        if code != 201:
            answer = f"HTTP {code}" if code else f"no HTTP answer ({status_line or 'nothing'})"
            raise StoreError(
                f"podman refused the tag: {answer}: {_api_said(body)[:300]}",
                "check the podman service log on the node",
                node=node,
                ref=name,
            )

    def with_cli() -> None:
        proc = _podman(
            [*podman_command, "tag", image_id, name], node=node, ref=name, timeout=timeout
        )
        if proc.returncode != 0:
            raise _exited("podman tag", proc, node=node, ref=name)

    _local(url, over_socket, with_cli)


__all__ = [
    "LOCAL_URL",
    "MAX_ANSWER",
    "api_request",
    "AnswerTooLarge",
    "AnswerTooSlow",
    "ImageError",
    "ImageInfo",
    "NodeUnreachable",
    "PodmanCommandFailed",
    "Resolved",
    "StoreError",
    "Unresolved",
    "image_info",
    "inspect_over_socket",
    "parse_created",
    "resolve_local",
    "resolve_with_cli",
    "running_images",
    "tag_local",
]
