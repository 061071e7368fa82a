"""The pull display: one rewritten line per node on a terminal, plain lines elsewhere.

The events are what podman 4.3.1's libpod pull stream sent for a real two-layer image pulled
from a local registry (``POST /libpod/images/pull``), as Store._pull_once reports them.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

from pcmkimg.adapters.journal import Journal
from pcmkimg.core.images import PullProgress
from pcmkimg.core.reference import parse
from pcmkimg.progress import PullDisplay
from pcmkimg.workflows.session import Session
from tests.fakes import FakeCluster, FakeStore, FakeStores

REF = "192.0.2.1:8787/rhosp/mariadb:17.1"
BLOB1 = "sha256:9f06e648b3b65d484f5f847792f2d66aeecbfc0a407031037698d107806524a9"
BLOB2 = "sha256:35217a944a4e0d75d4e66fb70ef2caf515726d41b1bab6a6dbb057ba3bbc5869"
CONFIG = "sha256:4ffc8ca19cd257f338baba7b81a3df5f4fbbfbf31d8ed8b674fb7192603c31d0"
IMAGE_ID = CONFIG.split(":")[1]
STREAM = [
    f"Trying to pull {REF}...",
    "Getting image source signatures",
    f"Copying blob {BLOB1}",
    f"Copying blob {BLOB2}",
    f"Copying config {CONFIG}",
    "Writing manifest to image destination",
    "Storing signatures",
]


def pull_events(node: str) -> list[PullProgress]:
    status = [PullProgress(node, REF, "status", text) for text in STREAM]
    return [*status, PullProgress(node, REF, "done", IMAGE_ID)]


class FakeTty(io.StringIO):
    def isatty(self) -> bool:
        return True


def screen(output: str) -> list[str]:
    """What a terminal shows after ``output``: enough of a VT100 for cursor-up and line-erase."""
    lines: list[str] = [""]
    row = 0
    for token in re.split(r"(\x1b\[\d*[AK]|\r|\n)", output):
        if not token:
            continue
        if token == "\n":
            row += 1
            if row == len(lines):
                lines.append("")
        elif token == "\r":
            pass  # only ever followed by an erase of the whole line here
        elif token.startswith("\x1b[") and token.endswith("A"):
            row -= int(token[2:-1] or 1)
            assert row >= 0, "the cursor went above the display"
        elif token == "\x1b[2K":
            lines[row] = ""
        else:
            assert "\x1b" not in token, f"unexpected escape {token!r}"
            lines[row] += token
    return [line for line in lines if line]


def test_a_terminal_gets_one_updating_line_per_node():
    tty = FakeTty()
    show = PullDisplay(tty, width=100)
    a, b = pull_events("controller-0"), pull_events("controller-1")
    # Interleaved, as two parallel pulls report.
    for i, event in enumerate(a[:4]):
        show(event)
        show(b[i])
    assert screen(tty.getvalue()) == [
        "controller-0: copying blob 2 35217a944a4e",
        "controller-1: copying blob 2 35217a944a4e",
    ]
    for event in a[4:]:
        show(event)
    show(b[4])
    assert screen(tty.getvalue()) == [
        "controller-0: done: 4ffc8ca19cd2 (2 blobs)",
        "controller-1: all 2 blobs copied; config",
    ]


def test_lines_never_wrap_on_a_narrow_terminal():
    tty = FakeTty()
    show = PullDisplay(tty, width=30)
    event = PullProgress("controller-0", REF, "retry", "registry unreachable; retry", 2)
    show(event)
    (line,) = screen(tty.getvalue())
    assert len(line) <= 29 and line.endswith("...")


def test_plain_lines_when_not_a_terminal():
    log = io.StringIO()
    show = PullDisplay(log)
    for event in pull_events("controller-0"):
        show(event)
    show(PullProgress("controller-2", REF, "cached", "sha256:abc is already here"))
    text = log.getvalue()
    assert "\x1b" not in text and "\r" not in text
    assert text.splitlines() == [
        "  controller-0: connecting to the registry",
        "  controller-0: reading the image's manifest",
        "  controller-0: copying blob 1 9f06e648b3b6",
        "  controller-0: copying blob 2 35217a944a4e",
        "  controller-0: all 2 blobs copied; config",
        "  controller-0: writing manifest",
        "  controller-0: storing signatures",
        "  controller-0: done: 4ffc8ca19cd2 (2 blobs)",
        "  controller-2: already here, nothing to copy",
    ]


def test_a_retry_starts_the_count_again():
    log = io.StringIO()
    show = PullDisplay(log, tty=False)
    events = pull_events("n1")
    for event in events[:3]:
        show(event)
    show(PullProgress("n1", REF, "retry", "registry unreachable; retrying in 1 s", 1))
    for event in events:
        show(event)
    assert log.getvalue().splitlines()[-1] == "  n1: done: 4ffc8ca19cd2 (2 blobs)"
    assert "  n1: retry 1: registry unreachable; retrying in 1 s" in log.getvalue().splitlines()


# --------------------------------------------------------------------------- the hookup


class PullingStore(FakeStore):
    """A node's store whose pull reports podman's stream, then succeeds (from the registry of
    the fake store)."""

    def __init__(self, node: str) -> None:
        super().__init__(node, {}, registry={REF: IMAGE_ID})

    def pull(self, ref, *, expected_digest=None, progress=None):  # type: ignore[no-untyped-def]
        for event in pull_events(self.node):
            progress(event)
        return super().pull(ref, expected_digest=expected_digest, progress=progress)


def session(tmp_path: Path, **kw) -> Session:  # type: ignore[no-untyped-def]
    stores = {n: PullingStore(n) for n in ("n1", "n2")}
    return Session(
        FakeCluster(stores),  # the pulls never ask the cluster
        FakeStores(stores),
        Journal(tmp_path / "journal.jsonl", "run-1"),
        **kw,
    )


def test_the_updater_sends_every_pull_event_to_its_display(tmp_path):
    said: list[str] = []
    log = io.StringIO()
    u = session(tmp_path, say=said.append, progress=PullDisplay(log, tty=False))
    assert u.pull_all(["n1", "n2"], parse(REF), None) == {"n1": IMAGE_ID, "n2": IMAGE_ID}
    assert said == [f"pulling {REF} on n1, n2"]
    lines = log.getvalue().splitlines()
    for node in ("n1", "n2"):
        assert f"  {node}: copying blob 2 35217a944a4e" in lines
        assert f"  {node}: done: 4ffc8ca19cd2 (2 blobs)" in lines


def test_without_a_display_the_updater_says_the_outcomes(tmp_path):
    said: list[str] = []
    u = session(tmp_path, say=said.append)
    u.pull_all(["n1"], parse(REF), None)
    assert said == [f"pulling {REF} on n1", f"  n1: done: {IMAGE_ID}"]
