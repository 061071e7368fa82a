"""The update journal: JSON lines under /var/lib/pcmkimg/, one line per step.

The directory must be owned by root (or by the user running pcmkimg) and not
writable by group or others; the file is created 0600. ``pcmkimg history``
reads it back.
"""

from __future__ import annotations

import json
import os
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pcmkimg.errors import Refused

DEFAULT_DIR = Path("/var/lib/pcmkimg")
FILE = "journal.jsonl"


class UnsafeStateDir(Refused):
    """The state directory could be written by someone else."""


def _check_dir(path: Path) -> None:
    st = path.stat()
    if st.st_uid not in (0, os.geteuid()) or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise UnsafeStateDir(
            f"state directory {path} is owned by uid {st.st_uid} with mode "
            f"{stat.S_IMODE(st.st_mode):o}: others could forge the journal",
            f"chown root:root {path} && chmod 0700 {path}",
        )


def ensure_dir(path: Path) -> Path:
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        _check_dir(path)
    except PermissionError as exc:
        raise UnsafeStateDir(
            f"cannot use the state directory {path}: {exc.strerror}", "run pcmkimg as root"
        ) from exc
    return path


@dataclass(frozen=True)
class Journal:
    path: Path
    run: str

    def record(self, event: str, **fields: object) -> None:
        line: dict[str, object] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "run": self.run,
            "event": event,
        }
        line.update(fields)
        data = (json.dumps(line, sort_keys=True) + "\n").encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            if stat.S_IMODE(os.fstat(fd).st_mode) != 0o600:
                os.fchmod(fd, 0o600)
            os.write(fd, data)
        finally:
            os.close(fd)


def open_journal(directory: Path = DEFAULT_DIR, run: str | None = None) -> Journal:
    ensure_dir(directory)
    run = run or f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
    return Journal(directory / FILE, run)


def history(directory: Path = DEFAULT_DIR, service: str | None = None) -> Iterator[dict]:
    """Journal entries, oldest first; lines that are not JSON are skipped.

    With ``service``, the entries of every run that was about it, also those that do not name
    the service themselves (the pulls of an update, for one).
    """
    path = directory / FILE
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return
    except PermissionError as exc:
        raise UnsafeStateDir(
            f"cannot read the journal {path}: {exc.strerror}", "run pcmkimg as root"
        ) from exc
    entries = []
    for raw in lines:
        try:
            entry = json.loads(raw)
        except ValueError:
            continue
        if isinstance(entry, dict):
            entries.append(entry)
    runs = {e.get("run") for e in entries if e.get("service") == service} - {None}
    for entry in entries:
        if service is None or entry.get("service") == service or entry.get("run") in runs:
            yield entry
