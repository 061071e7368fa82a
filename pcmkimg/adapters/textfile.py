"""A file written whole into a directory another program reads (node_exporter's textfile
collector): a temporary file in the same directory, written, flushed to disk and made mode
0644, then renamed over the target. A reader sees the old file or the new one, never half of
one; the temporary name (``.NAME.XXXX.tmp``) is not one the collector reads (``*.prom``).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from pcmkimg.adapters.errors import TextfileError

MODE = 0o644


def check_dir(directory: Path) -> None:
    """Refuse a path that is not an existing directory we may write into."""
    if not directory.exists():
        raise TextfileError(
            f"--textfile {directory}: no such directory",
            "give node_exporter's --collector.textfile.directory (it must exist)",
        )
    if not directory.is_dir():
        raise TextfileError(
            f"--textfile {directory}: not a directory",
            "give node_exporter's --collector.textfile.directory",
        )
    if not os.access(directory, os.W_OK | os.X_OK):
        raise TextfileError(
            f"--textfile {directory}: the directory is not writable by this user",
            "run pcmkimg as root, or give a directory it may write",
        )


def write_atomic(directory: Path, name: str, text: str) -> Path:
    """Write ``text`` to ``directory/name`` atomically (see the module's text); the path."""
    check_dir(directory)
    target = directory / name
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise TextfileError(
            f"--textfile {directory}: cannot create a file there: {exc.strerror}",
            "give a directory pcmkimg may write",
        ) from exc
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(text.encode())
            out.flush()
            os.fchmod(out.fileno(), MODE)
            os.fsync(out.fileno())
        os.replace(tmp, target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise TextfileError(
            f"--textfile {directory}: cannot write {name}: {exc.strerror or exc}",
            "free space or fix the directory, then run it again",
        ) from exc
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):  # the rename itself on disk (best effort)
        dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    return target
