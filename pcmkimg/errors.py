"""The error types of pcmkimg.

Every failure kind has its own type. Each message says what went wrong and
carries the fix, so that the CLI can print it on one line and map the type to
an exit code in one place (``cli.py``) and the agent to an OCF code in one
place (``agent.py``).
"""

from __future__ import annotations


class PcmkimgError(Exception):
    """Base of every error that pcmkimg raises on purpose."""

    def __init__(self, message: str, fix: str = "") -> None:
        self.message = message
        self.fix = fix
        super().__init__(self.one_line())

    def one_line(self) -> str:
        text = " ".join(self.message.split())
        if self.fix:
            text += f"; fix: {' '.join(self.fix.split())}"
        return text


class UsageError(PcmkimgError):
    """The user asked for something malformed or impossible."""
