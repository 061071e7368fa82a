"""The podman API client: one HTTP/1.0 request to a unix socket, with ``_socket`` and ``time`` only.

Every reader of a podman store on the standard library goes through :func:`request`: the guard
(:mod:`pcmkimg.agent`), the local store (:mod:`pcmkimg.adapters.localstore`, which turns
:class:`NoAnswer` into pcmkimg's typed store errors) and status's read-only views
(:mod:`pcmkimg.adapters.storeview`, over the local socket or our ssh tunnel's). The reading of
an answer is the core's (:func:`pcmkimg.core.images.inspect_answer`,
:func:`~pcmkimg.core.images.containers_from`).

The guard's monitor runs every 30 seconds on every node, in a fresh interpreter: the
``socket`` module would cost it ``enum`` and ``selectors``, and anything of pcmkimg beyond
this module would cost it ``dataclasses`` and ``re``. So this module imports nothing but the
built-in ``_socket`` and ``time``. One monotonic deadline covers the whole exchange (connecting,
sending, every read), and the answer has a size limit: a socket that trickles bytes or never
stops cannot keep the monitor running until Pacemaker's action timeout (which would restart the
replica).
"""

from __future__ import annotations

import _socket
import time

API = "/v4.0.0/libpod"
"""The libpod API path prefix (podman 4.0 and later answer it)."""

MAX_ANSWER = 8 * 1024 * 1024
"""The largest answer read, headers included: an image's inspect data is a few kB, a store's
image or container list a few kB a row."""

_URL_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-~/:@")
"""What ``urllib.parse.quote(name, safe="/:@")`` leaves as it is."""


class NoAnswer(OSError):
    """The socket gave no complete answer: unreachable (this class), too slow or too large
    (the subclasses)."""


class TooSlow(NoAnswer):
    """The whole answer did not come within the deadline."""


class TooLarge(NoAnswer):
    """The answer exceeds the size limit."""


def quote(name: str) -> str:
    """``name`` as a URL path segment, percent-encoded as ``quote(name, safe="/:@")`` does it."""
    return "".join(chr(b) if b in _URL_SAFE else f"%{b:02X}" for b in name.encode())


def image_target(name: str) -> str:
    """The API path that inspects the image ``name`` (a name or an image ID)."""
    return f"/images/{quote(name)}/json"


def request(
    path: str, method: str, target: str, *, timeout: float = 10.0, limit: int = MAX_ANSWER
) -> tuple[int, str, bytes]:
    """``METHOD /v4.0.0/libpod<target>`` on the unix socket ``path``: (status code, status
    line, body). The status code is 0 when the answer has none. ``target`` is a path with its
    query, its names quoted (:func:`quote`).

    ``timeout`` is one deadline over the whole exchange: :class:`TooSlow` past it. An answer of
    more than ``limit`` bytes is :class:`TooLarge`; :class:`NoAnswer` when the socket does not
    answer (missing, refused, closed).
    """
    deadline = time.monotonic() + timeout
    extra = "Content-Length: 0\r\n" if method == "POST" else ""
    data = (
        f"{method} {API}{target} HTTP/1.0\r\nHost: podman\r\nAccept: application/json\r\n"
        f"{extra}\r\n"
    ).encode()

    def left() -> float:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TooSlow(f"no complete answer within {timeout:g} s")
        return remaining

    chunks = []
    size = 0
    try:
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    except OSError as err:
        raise NoAnswer(f"no socket: {err}") from err
    try:
        sock.settimeout(left())
        sock.connect(path)
        sock.settimeout(left())
        sock.sendall(data)
        while True:
            sock.settimeout(left())
            chunk = sock.recv(65536)
            if not chunk:
                break
            size += len(chunk)
            if size > limit:
                raise TooLarge(f"the answer exceeds {limit} bytes")
            chunks.append(chunk)
    except NoAnswer:
        raise
    except TimeoutError as err:  # _socket.timeout
        raise TooSlow(f"no complete answer within {timeout:g} s") from err
    except OSError as err:  # missing, refused, reset
        raise NoAnswer(str(err) or type(err).__name__) from err
    finally:
        sock.close()
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    status_line = head.split(b"\r\n", 1)[0].decode(errors="replace")
    parts = status_line.split()
    code = int(parts[1]) if len(parts) > 1 and parts[1].isascii() and parts[1].isdigit() else 0
    return code, status_line, body
