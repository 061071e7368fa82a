"""Fail-don't-skip: what a test needs from the machine.

On a developer machine a missing prerequisite skips the test with the reason.
With ``CI=true`` it fails the test instead: a CI run that skipped the sandbox
tests proves nothing.
"""

from __future__ import annotations

import os
import shutil

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def need(condition: bool, reason: str) -> None:
    """Skip (or fail under CI) the calling test unless ``condition`` holds."""
    if condition:
        return
    if in_ci():
        pytest.fail(f"CI=true and a prerequisite is missing: {reason}", pytrace=False)
    pytest.skip(reason)


def need_root() -> None:
    need(os.geteuid() == 0, "needs root")


def need_tools(*names: str) -> None:
    missing = [n for n in names if shutil.which(n) is None]
    need(not missing, f"needs {', '.join(missing)} (run packaging/install-deps.sh)")
