"""An interruption during the parallel pulls ends the wait at once (issue 12.7): a real
process, real signals; the live counterpart with a registry that stalls is
tests/integration/test_pull_cancel_live.py."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def spawn(code: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


# Stores.each over three "pulls" of 5 s each, under the CLI's signal handling.
PULLS = """
import sys, time
from pcmkimg.adapters import podman, signals
from pcmkimg.adapters.config import Config

stores = podman.Stores(Config(), None)
stores.get = lambda node: node  # no store needed: the work below stands for a pull
def pull(node):
    time.sleep(5)
    return node
try:
    with signals.sigterm_raises():
        print("pulling", flush=True)
        stores.each(["a", "b", "c"], pull)
except (KeyboardInterrupt, signals.Terminated) as exc:
    print(f"stopped: {type(exc).__name__}", flush=True)
    sys.exit(1)
print("finished", flush=True)
"""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_an_interruption_during_the_pulls_ends_the_wait_at_once(signum: int) -> None:
    child = spawn(PULLS)
    assert child.stdout is not None and child.stdout.readline() == "pulling\n"
    time.sleep(0.3)
    sent = time.monotonic()
    child.send_signal(signum)
    out, err = child.communicate(timeout=30)
    took = time.monotonic() - sent
    assert out.startswith("stopped: "), err
    assert took < 1.0, f"the process needed {took:.1f}s to exit after the signal"
