"""OCF return codes and the exception handlers raise to return one."""

from __future__ import annotations

TYPE_CHECKING = False  # no run-time import of enum (see ocf.agent)
if TYPE_CHECKING:
    from enum import IntEnum
else:
    from ocf._light import IntEnum


class OCFRC(IntEnum):
    """Exit codes of an OCF resource agent (OCF 1.1, including Pacemaker's extensions)."""

    SUCCESS = 0
    ERR_GENERIC = 1
    ERR_ARGS = 2
    ERR_UNIMPLEMENTED = 3
    ERR_PERM = 4
    ERR_INSTALLED = 5
    ERR_CONFIGURED = 6
    NOT_RUNNING = 7
    RUNNING_MASTER = 8
    FAILED_MASTER = 9
    DEGRADED = 190
    DEGRADED_MASTER = 191


def coerce_rc(value: int) -> OCFRC | int:
    """``value`` as an :class:`OCFRC` when it is one, else the plain int (0..255)."""
    try:
        return OCFRC(value)
    except ValueError:
        return value


class OCFError(Exception):
    """Raised by a handler to end the action with ``rc`` and an exit reason.

    ``reason`` is printed as the ``ocf-exit-reason:`` line (Pacemaker shows it in
    ``crm_mon``); an empty reason prints none.
    """

    def __init__(self, rc: int, reason: str = "") -> None:
        if isinstance(rc, bool) or not isinstance(rc, int) or not 0 <= rc <= 255:
            raise ValueError(f"not an exit code: {rc!r}")
        super().__init__(rc, reason)
        self.rc: OCFRC | int = coerce_rc(rc)
        self.reason: str = reason

    def __str__(self) -> str:
        name = self.rc.name if isinstance(self.rc, OCFRC) else str(self.rc)
        return f"{name}: {self.reason}" if self.reason else name
