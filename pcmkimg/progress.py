"""What a pull is doing on each node, for the person watching ``pcmkimg update``.

Pure: :class:`PullDisplay` takes :class:`pcmkimg.adapters.podman.PullProgress` events and
writes to a stream (stderr in the CLI, so that ``--json`` keeps stdout one document). On a
terminal each node has one line, rewritten in place as its pull goes on; on anything else (a
log file, a pipe) it writes one plain line per step.

What podman says: the libpod pull stream of podman 4.3 (``POST /libpod/images/pull``) carries
only the text lines of ``podman pull`` without a terminal ("Trying to pull REF...", "Copying
blob sha256:...", "Copying config sha256:...", "Writing manifest to image destination"). It has
no byte counts and no line when a blob is finished (layers are copied in parallel and each is
named once, when it starts; a blob already in the store is named too). So the display shows
per node the blob being copied and how many have been started, and "all N copied" once podman
moves on to the image config, which it copies after the last layer.
"""

from __future__ import annotations

import shutil
import threading
from typing import TextIO

from pcmkimg.core.images import PullProgress
from pcmkimg.records import dataclass

_CLEAR_LINE = "\r\x1b[2K"


def _up(lines: int) -> str:
    return f"\x1b[{lines}A" if lines else ""


def short(digest: str) -> str:
    """``sha256:0123456789abcdef...`` or a 64-hex image ID -> ``0123456789ab``; else as is."""
    hexpart = digest.removeprefix("sha256:")
    if len(hexpart) == 64 and all(c in "0123456789abcdef" for c in hexpart):
        return hexpart[:12]
    return digest


@dataclass
class NodePull:
    """The state of one node's pull, as far as podman tells it."""

    node: str
    ref: str = ""
    step: str = "waiting"
    blobs: int = 0
    blob: str = ""
    attempt: int = 1
    finished: bool = False

    def update(self, event: PullProgress) -> None:
        self.ref = event.ref
        self.attempt = event.attempt
        text = " ".join(event.text.split())
        if event.kind == "cached":
            self.step, self.finished = "already here, nothing to copy", True
        elif event.kind == "done":
            blobs = f" ({self.blobs} blob{'s' if self.blobs != 1 else ''})" if self.blobs else ""
            self.step, self.finished = f"done: {short(text)}{blobs}", True
        elif event.kind == "retry":
            self.step = f"retry {event.attempt}: {text}"
        elif text.startswith("Trying to pull"):
            self.blobs, self.blob, self.step = 0, "", "connecting to the registry"
        elif text.startswith("Copying blob"):
            self.blobs += 1
            self.blob = short(text.split()[2]) if len(text.split()) > 2 else ""
            self.step = f"copying blob {self.blobs} {self.blob}".rstrip()
        elif text.startswith("Copying config"):
            self.step = f"all {self.blobs} blob{'s' if self.blobs != 1 else ''} copied; config"
        elif text.startswith("Writing manifest"):
            self.step = "writing manifest"
        elif text.startswith("Storing signatures"):
            self.step = "storing signatures"
        elif text.startswith("Getting image source signatures"):
            self.step = "reading the image's manifest"
        elif text:
            self.step = text

    def line(self) -> str:
        return f"{self.node}: {self.step}"


class PullDisplay:
    """A :data:`pcmkimg.adapters.podman.ProgressCallback`: every node's pull on ``stream``.

    ``tty`` None means ``stream.isatty()``. ``width`` (terminal columns; None: the terminal's)
    cuts lines so that they never wrap, which would break the rewriting. Safe to call from
    several threads (the pulls run in parallel).
    """

    def __init__(self, stream: TextIO, *, tty: bool | None = None, width: int | None = None):
        self.stream = stream
        self.tty = stream.isatty() if tty is None else tty
        self.width = max(20, width or shutil.get_terminal_size().columns)
        self.nodes: dict[str, NodePull] = {}
        self._drawn = 0
        self._last: dict[str, str] = {}
        self._lock = threading.Lock()

    def __call__(self, event: PullProgress) -> None:
        with self._lock:
            state = self.nodes.setdefault(event.node, NodePull(event.node))
            state.update(event)
            if self.tty:
                self._redraw()
            else:
                self._plain(state)
            self.stream.flush()

    def _fit(self, text: str) -> str:
        limit = self.width - 1
        return text if len(text) <= limit else text[: limit - 3] + "..."

    def _redraw(self) -> None:
        out = [_up(self._drawn)]
        for state in self.nodes.values():
            out.append(f"{_CLEAR_LINE}{self._fit(state.line())}\n")
        self.stream.write("".join(out))
        self._drawn = len(self.nodes)

    def _plain(self, state: NodePull) -> None:
        line = state.line()
        if self._last.get(state.node) != line:
            self._last[state.node] = line
            self.stream.write(f"  {line}\n")
