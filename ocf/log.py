"""Logging as shell agents do it (``ocf_log`` in resource-agents' ocf-shellfuncs).

- to syslog when ``HA_LOGFACILITY`` is set and not ``none``;
- appended to ``HA_LOGFILE`` when set, as ``<date> <tag>:    <LEVEL>: <message>``;
- to stderr when stderr is a terminal, and also when neither of the above is configured
  (``ocf_log`` does the same, so that a message is never lost; Pacemaker logs an agent's stderr).

The tag is ``<agent>(<resource instance>)[<pid>]``. Debug messages are written only when
``HA_debug`` is on. Logging never raises: an unwritable log file is skipped.
"""

from __future__ import annotations

import os
import time

from ocf.env import DEFAULT_DATEFMT, Environment

TYPE_CHECKING = False  # no run-time import of typing, dataclasses or enum (see ocf.agent)
if TYPE_CHECKING:
    from dataclasses import dataclass, field
    from enum import Enum
    from typing import TextIO
else:
    from ocf._light import Enum, dataclass, field


class Level(str, Enum):
    """Log levels with the words ``ocf_log`` prints."""

    DEBUG = "DEBUG"
    INFO = "INFO"
    WARNING = "WARNING"
    ERROR = "ERROR"
    CRIT = "CRIT"


_FACILITIES = (
    "kern user mail daemon auth syslog lpr news uucp cron authpriv ftp "
    "local0 local1 local2 local3 local4 local5 local6 local7"
).split()


def facility_code(name: str) -> int:
    """The ``syslog`` module's code for a facility name (``daemon``, ``local0``, ...).

    Unknown names fall back to ``daemon``, where Pacemaker itself logs.
    """
    import syslog

    key = name.strip().lower()
    if key.startswith("log_"):
        key = key[4:]
    if key not in _FACILITIES:
        key = "daemon"
    code: int = getattr(syslog, f"LOG_{key.upper()}", syslog.LOG_DAEMON)
    return code


def _syslog_priority(level: Level) -> int:
    import syslog

    return {
        Level.DEBUG: syslog.LOG_DEBUG,
        Level.INFO: syslog.LOG_INFO,
        Level.WARNING: syslog.LOG_WARNING,
        Level.ERROR: syslog.LOG_ERR,
        Level.CRIT: syslog.LOG_CRIT,
    }[level]


@dataclass
class Logger:
    """Writes an agent's log messages to the destinations its environment asks for."""

    tag: str
    stderr: TextIO
    facility: str | None = None
    log_file: str | None = None
    debug_enabled: bool = False
    datefmt: str = DEFAULT_DATEFMT
    #: Also write to stderr when stderr is no terminal (set when nothing else is configured).
    stderr_always: bool = False
    _syslog_open: bool = field(default=False, repr=False)

    @classmethod
    def from_env(cls, agent_name: str, env: Environment, stderr: TextIO) -> Logger:
        instance = env.resource_instance
        tag = (
            f"{agent_name}({instance})[{os.getpid()}]"
            if instance
            else f"{agent_name}[{os.getpid()}]"
        )
        return cls(
            tag=tag,
            stderr=stderr,
            facility=env.log_facility,
            log_file=env.log_file,
            debug_enabled=env.debug,
            datefmt=env.datefmt,
            stderr_always=env.log_facility is None and env.log_file is None,
        )

    def debug(self, message: str) -> None:
        self.log(Level.DEBUG, message)

    def info(self, message: str) -> None:
        self.log(Level.INFO, message)

    def warning(self, message: str) -> None:
        self.log(Level.WARNING, message)

    def error(self, message: str) -> None:
        self.log(Level.ERROR, message)

    def crit(self, message: str) -> None:
        self.log(Level.CRIT, message)

    def log(self, level: Level, message: str, *, to_stderr: bool = True) -> None:
        """Write one message; ``to_stderr=False`` when stderr already has it (an exit reason)."""
        if level is Level.DEBUG and not self.debug_enabled:
            return
        text = f"{level.value}: {message}"
        if self.facility is not None:
            self._to_syslog(level, text)
        if self.log_file is not None:
            self._to_file(text)
        if to_stderr and (self.stderr_always or _isatty(self.stderr)):
            self._to_stream(self.stderr, f"{self.tag}: {text}")

    def _to_syslog(self, level: Level, text: str) -> None:
        try:
            import syslog

            if not self._syslog_open:
                syslog.openlog(self.tag, 0, facility_code(self.facility or "daemon"))
                self._syslog_open = True
            # syslog() refuses NUL characters.
            syslog.syslog(_syslog_priority(level), text.replace("\x00", "\\0"))
        except (OSError, ValueError):
            pass

    def _to_file(self, text: str) -> None:
        try:
            stamp = time.strftime(self.datefmt)
        except ValueError:
            stamp = time.strftime(DEFAULT_DATEFMT)
        lines = "".join(f"{stamp}{self.tag}:    {line}\n" for line in text.splitlines() or [""])
        try:
            # One write with O_APPEND, so that concurrent agents do not interleave within a line.
            fd = os.open(self.log_file or "", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, lines.encode("utf-8", "backslashreplace"))
            finally:
                os.close(fd)
        except OSError:
            pass

    @staticmethod
    def _to_stream(stream: TextIO, line: str) -> None:
        try:
            stream.write(line.rstrip("\n") + "\n")
            stream.flush()
        except (OSError, ValueError):
            pass


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, OSError, ValueError):
        return False
