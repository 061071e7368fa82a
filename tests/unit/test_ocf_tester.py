"""ocf toolkit: the real ocf-tester (resource-agents) against the example agent.

ocf-tester runs ``meta-data`` as user nobody and validates it with ``xmllint --valid`` against
ra-api-1.dtd, then walks the agent through validate-all, probes, start, stop and monitor.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

from tests.sandbox.require import need, need_tools

EXAMPLE = Path(__file__).resolve().parent / "ocf_example_agent" / "dummy"


def _ocf_tester(*args: str) -> subprocess.CompletedProcess[str]:
    need_tools("ocf-tester", "xmllint")
    need(os.path.exists("/usr/bin/python3"), "needs /usr/bin/python3 (the agent's interpreter)")
    need(os.path.isdir("/usr/lib/ocf"), "needs /usr/lib/ocf (resource-agents)")
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("OCF_", "HA_"))}
    return subprocess.run(
        ["ocf-tester", *args, str(EXAMPLE)],
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_example_agent_is_world_executable() -> None:
    mode = EXAMPLE.stat().st_mode
    assert mode & stat.S_IXOTH and mode & stat.S_IROTH
    assert EXAMPLE.read_text().startswith("#!/usr/bin/python3\n")


def test_ocf_tester_passes(tmp_path: Path) -> None:
    state = tmp_path / "dummy.state"
    result = _ocf_tester("-n", "dummy1", "-o", f"state={state}")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "passed all tests" in result.stdout
    assert not state.exists()  # the last step stops the resource


def test_ocf_tester_reports_missing_configuration(tmp_path: Path) -> None:
    result = _ocf_tester("-n", "dummy1")
    assert result.returncode != 0
    assert "Validation failed" in result.stdout
