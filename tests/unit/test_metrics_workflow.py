"""workflows.metrics on the fakes of tests/fakes.py: status's one read of the cluster and the
stores, the lease, the journal, and the textfile written whole (nothing of pcmkimg patched)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from pcmkimg import cli, wiring
from pcmkimg.adapters import journal, textfile
from pcmkimg.adapters.errors import TextfileError
from pcmkimg.core import cib, lease
from pcmkimg.core.errors import StoreError
from pcmkimg.workflows import metrics
from tests import fakes
from tests.unit.test_metrics_render import samples

OLD = "a" * 64
NEW = "b" * 64
REAL_OLD = "reg.example:8787/ns1/mariadb:1.0"
REAL_NEW = "reg.example:8787/ns2/mariadb:1.1"


def _stores() -> dict[str, fakes.FakeStore]:
    return {
        n: fakes.FakeStore(
            n,
            {fakes.FLOATING: OLD, REAL_OLD: OLD, REAL_NEW: NEW},
            running={fakes.container_of(n): OLD},
        )
        for n in fakes.NODES
    }


def _at(node: str) -> frozenset[tuple[str, str]]:
    return frozenset({("service", "mariadb"), ("bundle", fakes.BUNDLE_ID), ("node", node)})


def _run(
    cl: fakes.FakeCluster, tmp_path: Path, textfile: Path | None = None
) -> metrics.MetricsReport:
    ctx = fakes.context(cl, journal_dir=tmp_path / "journal")
    return metrics.run(ctx, metrics.MetricsRequest(textfile))


def test_the_state_of_every_node_from_one_read_of_each_store(tmp_path: Path) -> None:
    stores = _stores()
    cl = fakes.FakeCluster(stores)
    # controller-1's floating name moved; its replica still runs the old image: drift
    stores["controller-1"].names[fakes.key(fakes.FLOATING)] = NEW
    stores["controller-2"].stop(fakes.container_of("controller-2"))
    cl.extra_failures = [
        cib.Failure(
            "galera-bundle-podman-2_start_0",
            "galera-bundle-podman-2",
            "start",
            0,
            "controller-2",
            1,
            "error",
            "pull failed",
        ),
        cib.Failure(
            "galera-bundle-podman-2_monitor_60000",
            "galera-bundle-podman-2",
            "monitor",
            60000,
            "controller-2",
            190,
            "degraded",
            "",
        ),
    ]
    got = samples(_run(cl, tmp_path).text)
    for store in stores.values():  # status's gather: one image list, one container list
        assert store.called("named_images") == [""] and store.called("containers") == [""]
        assert store.called("inspect") == []
    info = {("image", REAL_NEW), ("digest", ""), ("image_id", NEW[:12])}
    assert got[("pcmkimg_image_info", _at("controller-1") | info)] == "1"
    assert got[("pcmkimg_drift", _at("controller-1"))] == "1"
    assert got[("pcmkimg_drift", _at("controller-0"))] == "0"
    assert got[("pcmkimg_replica_active", _at("controller-0"))] == "1"
    assert got[("pcmkimg_replica_active", _at("controller-2"))] == "0"
    assert got[("pcmkimg_replica_failed_operations", _at("controller-2"))] == "1"
    assert got[("pcmkimg_floating_name_resolves", _at("controller-0"))] == "1"
    assert got[("pcmkimg_guard_running", _at("controller-0"))] == "0"  # base.xml: no guard
    assert got[("pcmkimg_update_lease_held", frozenset())] == "0"
    for node in fakes.NODES:
        assert got[("pcmkimg_node_up", frozenset({("node", node)}))] == "1"
    redis = frozenset({("service", "redis"), ("bundle", "redis-bundle"), ("node", "controller-0")})
    assert got[("pcmkimg_floating_name_resolves", redis)] == "0"
    assert cl.events == []  # read only


def test_a_node_whose_store_does_not_answer_is_down_and_has_no_other_metric(
    tmp_path: Path,
) -> None:
    stores = _stores()
    stores["controller-1"].fail(
        "named_images", StoreError("no answer", "start podman", node="controller-1")
    )
    got = samples(_run(fakes.FakeCluster(stores), tmp_path).text)
    assert got[("pcmkimg_node_up", frozenset({("node", "controller-1")}))] == "0"
    assert got[("pcmkimg_node_up", frozenset({("node", "controller-0")}))] == "1"
    about = [k for k in got if ("node", "controller-1") in k[1]]
    assert about == [("pcmkimg_node_up", frozenset({("node", "controller-1")}))]
    assert got[("pcmkimg_drift", _at("controller-0"))] == "0"


def _set_lease(cl: fakes.FakeCluster, value: str) -> None:
    cl.config = cib.set_ticket_attribute(cl.config, lease.TICKET, lease.ATTRIBUTE, value).new_cib


@pytest.mark.parametrize(
    "value",
    [lease.Lease("controller-1", 42, "t0k").encode(), "not a lease"],
    ids=["held", "unreadable"],
)
def test_a_held_or_unreadable_lease_is_held(tmp_path: Path, value: str) -> None:
    cl = fakes.FakeCluster(_stores())
    _set_lease(cl, value)
    got = samples(_run(cl, tmp_path).text)
    assert got[("pcmkimg_update_lease_held", frozenset())] == "1"


def test_the_last_update_of_each_service_from_the_journal(tmp_path: Path) -> None:
    cl = fakes.FakeCluster(_stores())
    jr = journal.open_journal(tmp_path / "journal", run="r1")
    jr.record("start", service="mariadb", bundle=fakes.BUNDLE_ID, target=REAL_NEW, nodes=[])
    jr.record("failed", service="mariadb", node="controller-0", error="x")
    jr.record("rolled-back", service="mariadb", node="controller-0")
    jr.record("aborted", service="mariadb", error="x")
    other = journal.open_journal(tmp_path / "journal", run="r2")
    other.record("start", service="ghost", bundle="ghost-bundle", target=REAL_NEW, nodes=[])
    other.record("done", service="ghost", summary="")
    text = _run(cl, tmp_path).text
    got = samples(text)
    svc = frozenset({("service", "mariadb")})
    end = float(got[("pcmkimg_last_update_end_timestamp_seconds", svc)])
    assert abs(end - os.path.getmtime(tmp_path / "journal" / journal.FILE)) < 2
    assert got[("pcmkimg_last_update_result", svc | {("result", "rolled-back")})] == "1"
    assert got[("pcmkimg_last_update_result", svc | {("result", "ok")})] == "0"
    assert "ghost" not in text  # not a service of the cluster


def test_the_textfile_is_replaced_whole_with_mode_0644(tmp_path: Path) -> None:
    out = tmp_path / "textfile"
    out.mkdir()
    old = out / "pcmkimg.prom"
    old.write_text("stale\n")
    os.chmod(old, 0o600)
    inode = old.stat().st_ino
    report = _run(fakes.FakeCluster(_stores()), tmp_path, out)
    assert report.path == old
    assert old.read_text() == report.text and "pcmkimg_node_up" in report.text
    st = old.stat()
    assert stat.S_IMODE(st.st_mode) == 0o644 and st.st_ino != inode  # a new file, renamed
    assert sorted(p.name for p in out.iterdir()) == ["pcmkimg.prom"]  # no temporary left


@pytest.mark.parametrize("kind", ["missing", "file"])
def test_a_bad_textfile_directory_is_bad_input_before_the_cluster_is_read(
    tmp_path: Path, kind: str
) -> None:
    bad = tmp_path / "nope"
    if kind == "file":
        bad.write_text("")
    cl = fakes.FakeCluster(_stores())

    def never() -> None:
        raise AssertionError("the cluster was read")

    cl.read_cluster = never  # type: ignore[method-assign,assignment]
    with pytest.raises(TextfileError) as info:
        _run(cl, tmp_path, bad)
    assert cli.exit_code(info.value) == cli.BAD_INPUT
    assert str(bad) in info.value.one_line() and "; fix: " in info.value.one_line()


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    out = tmp_path / "textfile"
    out.mkdir()
    (out / "pcmkimg.prom").mkdir()  # the rename over a directory fails
    with pytest.raises(TextfileError, match="cannot write pcmkimg.prom"):
        textfile.write_atomic(out, "pcmkimg.prom", "x 1\n")
    assert sorted(p.name for p in out.iterdir()) == ["pcmkimg.prom"]


def test_the_cli_refuses_a_missing_directory_in_one_line(capsys, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    conf = tmp_path / "pcmkimg.conf"
    conf.write_text("[nodes]\nn1 = unix:///nonexistent.sock\n")
    with pytest.raises(SystemExit) as info:
        cli.main(["--conf", str(conf), "metrics", "--textfile", str(tmp_path / "nope")])
    out, err = capsys.readouterr()
    assert info.value.code == cli.BAD_INPUT and out == ""
    (line,) = err.splitlines()
    assert line.startswith("pcmkimg: error: --textfile ") and "no such directory" in line


def test_metrics_is_an_offline_command() -> None:
    assert "metrics" in wiring.OFFLINE_COMMANDS
