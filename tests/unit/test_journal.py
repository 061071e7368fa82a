"""The update journal: private file and directory, JSON lines, history per service."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from pcmkimg.adapters import journal as J
from pcmkimg.adapters.errors import UnsafeStateDir


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
    with pytest.raises(UnsafeStateDir) as info:
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


# --------------------------------------------------------------------------- hostile state


def test_a_torn_last_line_does_not_swallow_the_next_record(tmp_path: Path) -> None:
    d = J.ensure_dir(tmp_path / "s")
    (d / J.FILE).write_bytes(b'{"run": "a", "event": "start"}\n{"run": "a", "event": "pu')
    J.open_journal(d, run="b").record("start", service="svc")
    assert [(e["run"], e["event"]) for e in J.history(d)] == [("a", "start"), ("b", "start")]
    J.open_journal(d, run="b").record("done", service="svc")  # no extra blank lines after
    assert (d / J.FILE).read_bytes().count(b"\n\n") == 0


def test_a_non_utf8_byte_skips_only_its_line(tmp_path: Path) -> None:
    d = J.ensure_dir(tmp_path / "s")
    jr = J.open_journal(d, run="a")
    jr.record("start", service="svc")
    with open(d / J.FILE, "ab") as f:
        f.write(b'{"run": "a", "event": "pull", "node": "n\xff1"}\n\xfe\xff garbage\n')
    jr.record("done", service="svc")
    entries = list(J.history(d, "svc"))
    assert [e["event"] for e in entries] == ["start", "pull", "done"]
    assert entries[1]["node"] == "n\ufffd1"


def test_a_short_write_is_completed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_write = os.write
    calls = []

    def one_byte(fd: int, data: bytes) -> int:
        calls.append(len(data))
        return real_write(fd, bytes(data[:1]))

    jr = J.open_journal(tmp_path / "s", run="r")
    monkeypatch.setattr(J.os, "write", one_byte)
    jr.record("start", service="svc")
    monkeypatch.undo()
    assert [e["event"] for e in J.history(tmp_path / "s")] == ["start"]
    assert len(calls) > 1


def test_a_symlinked_journal_directory_is_refused(tmp_path: Path) -> None:
    real = J.ensure_dir(tmp_path / "real")
    J.open_journal(real, run="r").record("start", service="svc")
    link = tmp_path / "link"
    link.symlink_to(real)
    with pytest.raises(UnsafeStateDir) as caught:
        J.open_journal(link)
    assert "symbolic link" in caught.value.message and str(link) in caught.value.message
    with pytest.raises(UnsafeStateDir):
        list(J.history(link))
    # A directory that turns into a link after the journal was opened: refused at the write.
    jr = J.open_journal(tmp_path / "later", run="r")
    (tmp_path / "later").rename(tmp_path / "moved")
    (tmp_path / "later").symlink_to(real)
    with pytest.raises(UnsafeStateDir):
        jr.record("x")
    assert [e["event"] for e in J.history(real)] == ["start"]


def test_history_refuses_a_directory_others_can_write(tmp_path: Path) -> None:
    d = J.ensure_dir(tmp_path / "s")
    J.open_journal(d, run="r").record("start")
    d.chmod(0o777)
    with pytest.raises(UnsafeStateDir) as caught:
        list(J.history(d))
    assert f"chmod 0700 {d}" in caught.value.fix
