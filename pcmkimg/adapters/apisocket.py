"""One HTTP/1.0 request to a local podman API socket, with the interpreter's ``_socket`` only.

The guard's monitor runs every 30 seconds on every node, in a fresh interpreter: the
``socket`` module would cost it ``enum`` and ``selectors``, and anything of pcmkimg beyond
this module would cost it ``dataclasses`` and ``re``. So this module imports nothing but the
built-in ``_socket`` and ``time``. One monotonic deadline covers the whole exchange, and the
answer has a size limit: a socket that trickles bytes or never stops cannot keep the monitor
running until Pacemaker's action timeout (which would restart the replica).
"""

from __future__ import annotations

import _socket
import time

API = "/v4.0.0/libpod"
"""The libpod API path prefix (podman 4.0 and later answer it)."""

MAX_ANSWER = 4 * 1024 * 1024
"""The largest answer read, headers included: an image's inspect data is a few kB."""

_URL_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-~/:@")
"""What ``urllib.parse.quote(name, safe="/:@")`` leaves as it is."""


class NoAnswer(OSError):
    """The socket gave no complete answer: unreachable, too slow, or too large."""


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
    line, body). The status code is 0 when the answer has none. :class:`NoAnswer` when the
    socket does not answer in full within ``timeout`` seconds, or the answer exceeds ``limit``
    bytes."""
    deadline = time.monotonic() + timeout
    extra = "Content-Length: 0\r\n" if method == "POST" else ""
    data = (
        f"{method} {API}{target} HTTP/1.0\r\nHost: podman\r\nAccept: application/json\r\n"
        f"{extra}\r\n"
    ).encode()
    chunks = []
    size = 0
    try:
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    except OSError as err:
        raise NoAnswer(f"no socket: {err}") from err
    try:
        sock.settimeout(timeout)
        sock.connect(path)
        sock.sendall(data)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise NoAnswer(f"no complete answer within {timeout:g} s")
            sock.settimeout(left)
            chunk = sock.recv(65536)
            if not chunk:
                break
            size += len(chunk)
            if size > limit:
                raise NoAnswer(f"the answer exceeds {limit} bytes")
            chunks.append(chunk)
    except NoAnswer:
        raise
    except TimeoutError as err:
        raise NoAnswer(f"no complete answer within {timeout:g} s") from err
    except OSError as err:  # refused, missing, timed out (TimeoutError is an OSError)
        raise NoAnswer(str(err) or type(err).__name__) from err
    finally:
        sock.close()
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    status_line = head.split(b"\r\n", 1)[0].decode(errors="replace")
    parts = status_line.split()
    code = int(parts[1]) if len(parts) > 1 and parts[1].isascii() and parts[1].isdigit() else 0
    return code, status_line, body
