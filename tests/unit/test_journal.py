"""The update journal: private file and directory, JSON lines, history per service."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from pcmkimg.adapters import journal as J


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def open_umask():  # type: ignore[no-untyped-def]
    """A umask that would leave everything world-readable: the journal must not care."""
    old = os.umask(0)
    yield
    os.umask(old)


def test_directory_0700_and_file_0600_whatever_the_umask(tmp_path: Path, open_umask) -> None:
    d = tmp_path / "var" / "lib" / "pcmkimg"
    jr = J.open_journal(d, run="r1")
    jr.record("start", service="svc", nodes=["a", "b"])
    assert mode(d) == 0o700
    assert jr.path == d / J.FILE
    assert mode(jr.path) == 0o600


def test_an_existing_file_that_is_too_open_is_made_0600(tmp_path: Path) -> None:
    d = J.ensure_dir(tmp_path / "state")
    (d / J.FILE).write_text("")
    (d / J.FILE).chmod(0o644)
    J.open_journal(d, run="r").record("x")
    assert mode(d / J.FILE) == 0o600


@pytest.mark.parametrize("bits", [0o770, 0o707, 0o777])
def test_a_directory_others_can_write_is_refused(tmp_path: Path, bits: int) -> None:
    d = tmp_path / "state"
    d.mkdir()
    d.chmod(bits)
    with pytest.raises(J.UnsafeStateDir) as info:
        J.open_journal(d)
    assert f"chmod 0700 {d}" in info.value.fix
    assert not (d / J.FILE).exists()


def test_a_symlinked_journal_file_is_not_followed(tmp_path: Path) -> None:
    d = J.ensure_dir(tmp_path / "state")
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    (d / J.FILE).symlink_to(victim)
    with pytest.raises(OSError):
        J.open_journal(d, run="r").record("x")
    assert victim.read_text() == "keep\n"


def test_records_are_json_lines_with_time_run_and_event(tmp_path: Path) -> None:
    jr = J.open_journal(tmp_path / "s", run="run-1")
    jr.record("retag", service="svc", node="n1", before=None, after="abc", moved=True)
    (line,) = (tmp_path / "s" / J.FILE).read_text().splitlines()
    entry = json.loads(line)
    assert {k: entry[k] for k in ("run", "event", "service", "node", "before", "moved")} == {
        "run": "run-1",
        "event": "retag",
        "service": "svc",
        "node": "n1",
        "before": None,
        "moved": True,
    }
    assert entry["time"][:2] == "20"


def test_default_run_ids_differ_per_process_and_time(tmp_path: Path) -> None:
    jr = J.open_journal(tmp_path / "s")
    assert jr.run.endswith(f"-{os.getpid()}")


def test_history_oldest_first_by_service_with_the_whole_run(tmp_path: Path) -> None:
    d = tmp_path / "s"
    a = J.open_journal(d, run="a")
    b = J.open_journal(d, run="b")
    a.record("start", service="svc")
    a.record("pull", node="n1", ok=True)  # names no service: still part of run a
    b.record("start", service="other")
    b.record("pull", node="n1", ok=True)
    a.record("done", service="svc")
    with open(d / J.FILE, "a") as f:
        f.write("not json\n[1, 2]\n")
    J.open_journal(d, run="c").record("x")
    every = list(J.history(d))
    assert [(e["run"], e["event"]) for e in every] == [
        ("a", "start"),
        ("a", "pull"),
        ("b", "start"),
        ("b", "pull"),
        ("a", "done"),
        ("c", "x"),
    ]
    assert [(e["run"], e["event"]) for e in J.history(d, "svc")] == [
        ("a", "start"),
        ("a", "pull"),
        ("a", "done"),
    ]
    assert [e["event"] for e in J.history(d, "other")] == ["start", "pull"]
    assert list(J.history(d, "nothing")) == []


def test_history_of_a_missing_journal_is_empty(tmp_path: Path) -> None:
    assert list(J.history(tmp_path / "none")) == []
