"""The error types of pcmkimg, and the exit families they fall in.

Every failure kind has its own type. Each message says what went wrong and
carries the fix, so that the CLI can print it on one line and map the type to
an exit code in one place (``cli.py``) and the agent to an OCF code in one
place (``agent.py``).

Every kind is in one *family*, which says what the caller can do about it (and
which exit code the CLI gives it): ``BadInput``, ``Refused``, ``NoLease``,
``Unreachable``, ``NodeFailed`` or ``LeftBehind``. A kind names its family among
its bases, or has the family of its base: ``class InvalidName(ImageError,
BadInput)`` is bad input although every other ``ImageError`` is unreachable.
``kind.family`` is that family, whatever the order of the bases; a kind whose
bases disagree must name its family, and naming two is a ``TypeError``. A kind
without a family (``PcmkimgError`` itself) is a bug if it reaches the user.

The kinds are in one module per layer (:mod:`pcmkimg.core.errors`,
:mod:`pcmkimg.adapters.errors`, :mod:`pcmkimg.workflows.errors`; the lease's in
:mod:`pcmkimg.core.lease`), a kind only where a caller tells it apart; where none does, the
family itself is raised, with its message and fix.
"""

from __future__ import annotations

# typing is not imported at run time: the agent's monitor imports this module.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, ClassVar


class PcmkimgError(Exception):
    """Base of every error that pcmkimg raises on purpose."""

    family: ClassVar[type[PcmkimgError] | None] = None
    """The exit family of this kind (one of :data:`FAMILIES`), or None: not classified."""

    report: dict[str, Any] | None
    """What was done before the failure (a JSON object), shown by ``--json``; or None."""

    def __init__(self, message: str, fix: str = "", report: dict[str, Any] | None = None) -> None:
        self.message = message
        self.fix = fix
        self.report = report
        super().__init__(self.one_line())

    def __init_subclass__(cls, exit_family: bool = False, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if exit_family:
            cls.family = cls
            return
        bases = [b for b in cls.__bases__ if issubclass(b, PcmkimgError)]
        named = [b for b in bases if b.family is b]
        inherited = {b.family for b in bases}
        if len(named) > 1:
            raise TypeError(f"{cls.__qualname__} names two exit families: {named}")
        if not named and len(inherited) > 1:
            raise TypeError(f"{cls.__qualname__}: its bases are of different families, name one")
        cls.family = named[0] if named else inherited.pop()

    def one_line(self) -> str:
        text = " ".join(self.message.split())
        if self.fix:
            text += f"; fix: {' '.join(self.fix.split())}"
        return text


# --------------------------------------------------------------------------- the families


class BadInput(PcmkimgError, exit_family=True):
    """What the user gave is malformed, unknown or contradicts the cluster (exit 2)."""


class Refused(PcmkimgError, exit_family=True):
    """A precondition does not hold; nothing was changed (exit 3)."""


class NoLease(PcmkimgError, exit_family=True):
    """The update lease is not ours: another pcmkimg (or a person) holds it, ours was lost, or
    its value cannot be read (exit 4)."""


class Unreachable(PcmkimgError, exit_family=True):
    """A node, a registry or the cluster did not answer, or failed us (exit 5)."""


class NodeFailed(PcmkimgError, exit_family=True):
    """The update failed on a node, and was rolled back there (exit 6)."""


class LeftBehind(PcmkimgError, exit_family=True):
    """Something is left for a person to do by hand; the message says what (exit 7)."""


FAMILIES: tuple[type[PcmkimgError], ...] = (
    BadInput,
    Refused,
    NoLease,
    Unreachable,
    NodeFailed,
    LeftBehind,
)


class UsageError(BadInput):
    """The user asked for something malformed or impossible."""
