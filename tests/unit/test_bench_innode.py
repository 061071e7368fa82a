"""The bench's in-node timing harness, run here on this machine's own processes."""

from __future__ import annotations

import pytest

from bench import innode
from tests.sandbox.proc import run


class Here:
    """A stand-in for the sandbox's Cluster that runs on this machine (no namespaces)."""

    def run(self, node, argv, **kw):  # type: ignore[no-untyped-def]
        assert node == "n1"
        return run(argv, **kw)


def test_every_case_is_timed_once_per_round() -> None:
    cases = {
        "true": innode.Case(["/bin/true"]),
        "env": innode.Case(["/bin/sh", "-c", 'test "$X" = 1'], {"X": "1"}),
        "false": innode.Case(["/bin/false"], expect=1),
    }
    times = innode.time_in_node(Here(), "n1", cases, 4)
    assert sorted(times) == ["env", "false", "true"]
    assert all(len(v) == 4 and all(t > 0 for t in v) for v in times.values())


def test_a_wrong_exit_code_is_an_error_naming_the_case() -> None:
    cases = {
        "ok": innode.Case(["/bin/true"]),
        "bad": innode.Case(["/bin/sh", "-c", "echo no >&2; exit 3"]),
    }
    with pytest.raises(innode.HarnessError, match=r"bad returned 3, expected 0: no"):
        innode.time_in_node(Here(), "n1", cases, 2)
