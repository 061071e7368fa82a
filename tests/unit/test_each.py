"""The one ``each`` (pcmkimg.adapters.podman.each) of the stores and of status's views: every
node's answer in the order asked, a failure as that node's answer, a bounded number at once."""

from __future__ import annotations

import threading
import time

import pytest

from pcmkimg.adapters import podman, storeview
from pcmkimg.adapters.config import Config
from pcmkimg.adapters.errors import NodeNotConfigured


def test_each_answers_every_node_in_order_a_failure_as_its_answer() -> None:
    def get(node: str) -> str:
        if node == "down":
            raise podman.NodeUnreachable("no answer", "start it", node=node)
        return node

    def work(store: str) -> object:
        if store == "bad":
            raise ValueError("bad answer")
        time.sleep(0.01 if store == "a" else 0)
        return store.upper()

    found = podman.each(["a", "down", "bad", "b"], get, work)
    assert list(found) == ["a", "down", "bad", "b"]
    assert found["a"] == "A" and found["b"] == "B"
    assert isinstance(found["down"], podman.NodeUnreachable)
    assert isinstance(found["bad"], ValueError)
    assert podman.each([], get, work) == {}


def test_each_runs_at_most_its_limit_at_once() -> None:
    lock = threading.Lock()
    running = [0, 0]  # now, most

    def work(node: str) -> str:
        with lock:
            running[0] += 1
            running[1] = max(running[1], running[0])
        time.sleep(0.05)
        with lock:
            running[0] -= 1
        return node

    nodes = [f"n{i}" for i in range(podman.EACH_AT_ONCE + 4)]
    assert podman.each(nodes, str, work) == {n: n for n in nodes}
    assert 1 < running[1] <= podman.EACH_AT_ONCE


@pytest.mark.parametrize("kind", ["stores", "views"])
def test_stores_and_views_share_it(kind: str) -> None:
    """Both open a node's store inside the one ``each``: a node that cannot be opened (here:
    no URL configured) is that node's answer."""
    opened: dict = {"a": "a"}
    if kind == "stores":
        many: podman.Stores | storeview.StoreViews = podman.Stores(Config(), None, opened=opened)
    else:
        many = storeview.StoreViews(Config(), lambda: None, opened=opened)
    found = many.each(["a", "elsewhere"], lambda store: f"{store}!")
    assert found["a"] == "a!" and isinstance(found["elsewhere"], NodeNotConfigured)
