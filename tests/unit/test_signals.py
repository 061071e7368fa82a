"""SIGHUP and SIGQUIT are handled as SIGTERM (issue 12.6): real processes, real signals."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# The real CLI entry point with one extra command that holds a resource until a signal comes;
# its cleanup prints a line, so the test sees that the cleanup ran.
CLI = """
import sys, time, click
from pcmkimg import cli

@cli.cli.command("hold")
def hold() -> None:
    try:
        print("holding", flush=True)
        time.sleep(30)
    finally:
        print("cleanup ran", flush=True)

cli.main(["hold"])
"""


def spawn(code: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.parametrize(
    ("signum", "code", "said"),
    [
        (signal.SIGHUP, 129, "terminated by SIGHUP"),
        (signal.SIGQUIT, 131, "terminated by SIGQUIT"),
        (signal.SIGTERM, 143, "terminated;"),
    ],
)
def test_hangup_and_quit_run_every_cleanup_like_sigterm(signum: int, code: int, said: str) -> None:
    child = spawn(CLI)
    assert child.stdout is not None and child.stdout.readline() == "holding\n"
    child.send_signal(signum)
    out, err = child.communicate(timeout=30)
    assert child.returncode == code, err
    assert out == "cleanup ran\n"
    assert f"pcmkimg: error: {said}" in err and "cleaned up" in err


def test_hangup_stays_ignored_under_nohup() -> None:
    code = "import signal; signal.signal(signal.SIGHUP, signal.SIG_IGN)\n" + CLI
    child = spawn(code)
    assert child.stdout is not None and child.stdout.readline() == "holding\n"
    child.send_signal(signal.SIGHUP)
    time.sleep(0.5)
    assert child.poll() is None  # still holding
    child.send_signal(signal.SIGTERM)
    out, _ = child.communicate(timeout=30)
    assert child.returncode == 143 and out == "cleanup ran\n"
