"""The update journal: JSON lines under /var/lib/pcmkimg/, one line per step.

The directory must be a real directory (not a symbolic link), owned by root (or by the user
running pcmkimg) and not writable by group or others; it is opened with ``O_NOFOLLOW`` and
checked on every write and read, and the file, opened relative to it with ``O_NOFOLLOW``, is
created 0600. A record starts on a line of its own even after a torn last line, and is written
whole. ``pcmkimg history`` reads it back, skipping lines that are not JSON objects (a torn line,
bytes that are not UTF-8).
"""

from __future__ import annotations

import json
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path

from pcmkimg.adapters.errors import UnsafeStateDir
from pcmkimg.records import dataclass

DEFAULT_DIR = Path("/var/lib/pcmkimg")
FILE = "journal.jsonl"


def _open_dir(path: Path) -> int:
    """The directory opened without following a symbolic link, after the ownership and mode
    checks: a file descriptor to open the journal relative to (the caller closes it)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if os.path.islink(path):
            raise UnsafeStateDir(
                f"state directory {path} is a symbolic link: pcmkimg does not follow it",
                f"give the real directory ({os.path.realpath(path)}) with --journal-dir, or "
                f"replace {path} by a directory owned by root with mode 0700",
            ) from exc
        if isinstance(exc, PermissionError):
            raise UnsafeStateDir(
                f"cannot use the state directory {path}: {exc.strerror}", "run pcmkimg as root"
            ) from exc
        raise
    try:
        st = os.fstat(fd)
        if st.st_uid not in (0, os.geteuid()) or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise UnsafeStateDir(
                f"state directory {path} is owned by uid {st.st_uid} with mode "
                f"{stat.S_IMODE(st.st_mode):o}: others could forge the journal",
                f"chown root:root {path} && chmod 0700 {path}",
            )
    except BaseException:
        os.close(fd)
        raise
    return fd


def _check_dir(path: Path) -> None:
    os.close(_open_dir(path))


def ensure_dir(path: Path) -> Path:
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    except PermissionError as exc:
        raise UnsafeStateDir(
            f"cannot use the state directory {path}: {exc.strerror}", "run pcmkimg as root"
        ) from exc
    _check_dir(path)
    return path


def _write_all(fd: int, data: bytes) -> None:
    """``os.write`` until every byte is written (it may write fewer than asked)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written <= 0:
            raise OSError(f"the journal took no bytes ({len(view)} left to write)")
        view = view[written:]


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
        dir_fd = _open_dir(self.path.parent)
        try:
            flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(self.path.name, flags, 0o600, dir_fd=dir_fd)
        finally:
            os.close(dir_fd)
        try:
            st = os.fstat(fd)
            if stat.S_IMODE(st.st_mode) != 0o600:
                os.fchmod(fd, 0o600)
            if st.st_size and os.pread(fd, 1, st.st_size - 1) != b"\n":
                data = b"\n" + data  # a torn last line: this record starts on a line of its own
            _write_all(fd, data)
        finally:
            os.close(fd)


def open_journal(directory: Path = DEFAULT_DIR, run: str | None = None) -> Journal:
    ensure_dir(directory)
    run = run or f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
    return Journal(directory / FILE, run)


def _read(directory: Path, name: str = FILE) -> bytes | None:
    """The journal's bytes (or another file's of the directory), None when there is none; the
    directory checked, no link followed."""
    try:
        dir_fd = _open_dir(directory)
    except FileNotFoundError:
        return None
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except PermissionError as exc:
        raise UnsafeStateDir(
            f"cannot read {directory / name}: {exc.strerror}", "run pcmkimg as root"
        ) from exc
    finally:
        os.close(dir_fd)
    with os.fdopen(fd, "rb") as src:
        return src.read()


def history(directory: Path = DEFAULT_DIR, service: str | None = None) -> Iterator[dict]:
    """Journal entries, oldest first; lines that are not JSON objects are skipped (bytes that
    are not UTF-8 are read as U+FFFD).

    With ``service``, the entries of every run that was about it, also those that do not name
    the service themselves (the pulls of an update, for one).
    """
    raw = _read(directory)
    if raw is None:
        return
    entries = []
    for line in raw.decode("utf-8", errors="replace").split("\n"):
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            entries.append(entry)
    runs = {e.get("run") for e in entries if e.get("service") == service} - {None}
    for entry in entries:
        if service is None or entry.get("service") == service or entry.get("run") in runs:
            yield entry


def write_state(directory: Path, name: str, doc: dict) -> Path:  # type: ignore[type-arg]
    """Replace ``directory/name`` with the JSON ``doc``, whole (a temporary file, mode 0600,
    flushed, then renamed over it), in the checked state directory; the path."""
    ensure_dir(directory)
    data = (json.dumps(doc, sort_keys=True) + "\n").encode()
    dir_fd = _open_dir(directory)
    tmp = f".{name}.{os.getpid()}.tmp"
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(tmp, flags, 0o600, dir_fd=dir_fd)
        try:
            os.fchmod(fd, 0o600)
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except OSError:
            pass
        raise
    finally:
        os.close(dir_fd)
    return directory / name


def read_state(directory: Path, name: str) -> dict | None:  # type: ignore[type-arg]
    """The JSON object :func:`write_state` left in ``directory/name``; None when there is
    none or it is not a JSON object."""
    raw = _read(directory, name)
    if raw is None:
        return None
    try:
        doc = json.loads(raw.decode("utf-8", errors="replace"))
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None
