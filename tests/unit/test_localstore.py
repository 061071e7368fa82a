"""The agent's read path over the podman API socket: one deadline over the whole exchange and a
cap on the answer's size, against a real unix socket served by a thread in tmp_path."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pcmkimg.adapters import localstore
from pcmkimg.adapters.errors import AnswerTooLarge, AnswerTooSlow
from pcmkimg.core.errors import ImageError, NodeUnreachable, StoreError

Serve = Callable[[socket.socket, threading.Event], None]


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[[Serve], str]]:
    """Serve a unix socket in tmp_path with a handler per connection; yields a starter that
    returns the socket's path. Every thread is stopped at the end."""
    stop = threading.Event()
    threads: list[threading.Thread] = []
    listeners: list[socket.socket] = []

    def start(handler: Serve) -> str:
        path = str(tmp_path / f"s{len(listeners)}.sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        listener.listen(4)
        listener.settimeout(0.1)
        listeners.append(listener)

        def loop() -> None:
            while not stop.is_set():
                try:
                    conn, _ = listener.accept()
                except OSError:
                    continue
                with conn:
                    try:
                        conn.recv(65536)  # the request
                        handler(conn, stop)
                    except OSError:
                        pass  # the client gave up: what the tests want

        thread = threading.Thread(target=loop, daemon=True)
        thread.start()
        threads.append(thread)
        return path

    yield start
    stop.set()
    for thread in threads:
        thread.join(5)
    for listener in listeners:
        listener.close()


IMAGE = {"Id": "a" * 64, "RepoTags": ["reg.example.com/ns/svc:1"], "Digest": "sha256:" + "b" * 64}
ANSWER = b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n" + json.dumps(IMAGE).encode()


def trickle(data: bytes, every: float) -> Serve:
    def handler(conn: socket.socket, stop: threading.Event) -> None:
        for i in range(len(data)):
            if stop.wait(every):
                return
            conn.sendall(data[i : i + 1])

    return handler


def test_a_socket_that_trickles_one_byte_at_a_time_ends_at_the_deadline(serve) -> None:
    # One byte every 50 ms: each recv gets its byte well within a per-recv timeout, the whole
    # answer would take about 4 s. The deadline is 0.6 s for the whole exchange.
    path = serve(trickle(ANSWER, 0.05))
    start = time.monotonic()
    try:
        localstore.inspect_over_socket(path, "reg.example.com/ns/svc:1", node="n1", timeout=0.6)
    except ImageError as err:
        caught: BaseException | None = err
    else:
        caught = None
    took = time.monotonic() - start
    assert took < 1.2, f"the exchange took {took:.1f} s, past its 0.6 s deadline"
    assert isinstance(caught, AnswerTooSlow), caught
    assert isinstance(caught, NodeUnreachable)  # so the agent falls back to the podman command
    assert "0.6" in caught.message and path in caught.message and caught.fix
    assert caught.node == "n1"


def test_past_the_deadline_the_podman_command_answers(serve, tmp_path: Path) -> None:
    path = serve(trickle(ANSWER, 0.05))
    podman = tmp_path / "podman"
    podman.write_text(f"#!/bin/sh\necho '{json.dumps([IMAGE])}'\n")
    podman.chmod(0o755)
    start = time.monotonic()
    found = localstore.resolve_local(
        "reg.example.com/ns/svc:1",
        f"unix://{path}",
        node="n1",
        podman_command=(str(podman),),
        timeout=0.5,
    )
    took = time.monotonic() - start
    assert took < 1.5, took
    assert isinstance(found, localstore.Resolved) and found.id == "a" * 64


def test_an_answer_past_the_size_cap_is_refused(serve) -> None:
    def flood(conn: socket.socket, stop: threading.Event) -> None:
        conn.sendall(b"HTTP/1.0 200 OK\r\n\r\n[")
        chunk = b'"x",' * 16384
        while not stop.is_set():
            conn.sendall(chunk)

    path = serve(flood)
    start = time.monotonic()
    with pytest.raises(AnswerTooLarge) as caught:
        localstore.running_images("reg/ns/svc:1", f"unix://{path}", node="n1", timeout=5)
    assert time.monotonic() - start < 5
    assert isinstance(caught.value, StoreError)
    assert str(localstore.MAX_ANSWER) in caught.value.message and caught.value.fix


def test_a_whole_answer_in_small_pieces_within_the_deadline_is_read(serve) -> None:
    path = serve(trickle(ANSWER, 0.0005))
    found = localstore.inspect_over_socket(path, "reg.example.com/ns/svc:1", timeout=5)
    assert found is not None and found.id == "a" * 64


def test_status_views_read_through_the_same_client(serve) -> None:
    """storeview's reads have the same deadline and size cap, and the same errors."""
    from pcmkimg.adapters import storeview

    slow = storeview.StoreView("n1", "unix://slow", serve(trickle(ANSWER, 0.05)), timeout=0.5)
    start = time.monotonic()
    with pytest.raises(AnswerTooSlow) as late:
        slow.named_images()
    assert time.monotonic() - start < 1.5
    assert late.value.node == "n1"

    def flood(conn: socket.socket, stop: threading.Event) -> None:
        conn.sendall(b"HTTP/1.0 200 OK\r\n\r\n[")
        while not stop.is_set():
            conn.sendall(b'{"Id": "x"},' * 8192)

    large = storeview.StoreView("n1", "unix://large", serve(flood), timeout=5)
    with pytest.raises(AnswerTooLarge):
        large.containers()


def test_status_reads_the_local_sockets_early_and_each_answer_once(serve, tmp_path: Path) -> None:
    """status and check start reading the stores behind local sockets with the configuration
    (storeview.read_early): the first ask of each list takes that answer, a later ask reads
    afresh; a node behind ssh is not read early; a socket that is down is the same SocketDown
    as a late read's."""
    from pcmkimg.adapters import storeview
    from pcmkimg.adapters.config import Config
    from pcmkimg.core.errors import SocketDown

    served: list[int] = []

    def listing(conn: socket.socket, stop: threading.Event) -> None:
        served.append(1)
        conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n[]")

    nodes = {
        "n1": f"unix://{serve(listing)}",
        "n2": "ssh://root@n2.example.com/run/podman/podman.sock",
        "n3": f"unix://{tmp_path}/nobody.sock",
    }
    early = storeview.read_early(Config(nodes=nodes))
    assert sorted(early) == ["n1", "n3"]
    deadline = time.monotonic() + 5
    while len(served) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(served) == 2  # both lists, before anyone asked
    with storeview.open_views(Config(nodes=nodes), lambda: None, early) as views:
        view = views.get("n1")
        assert view is early["n1"]
        assert view.named_images() == () and view.containers(running_only=True) == ()
        assert len(served) == 2
        view.named_images()
        assert len(served) == 3
        with pytest.raises(SocketDown) as down:
            views.get("n3").named_images()
        assert down.value.node == "n3"


def test_the_client_refuses_past_its_cap_and_its_deadline_with_its_own_kinds(serve) -> None:
    from pcmkimg.adapters import apisocket

    with pytest.raises(apisocket.TooSlow):
        apisocket.request(serve(trickle(ANSWER, 0.05)), "GET", "/_ping", timeout=0.3)
    with pytest.raises(apisocket.TooLarge):
        apisocket.request(serve(trickle(ANSWER, 0.0)), "GET", "/_ping", limit=len(ANSWER) - 1)
    code, status_line, body = apisocket.request(serve(trickle(ANSWER, 0.0)), "GET", "/_ping")
    assert (code, status_line, json.loads(body)) == (200, "HTTP/1.0 200 OK", IMAGE)
