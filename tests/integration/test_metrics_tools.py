"""``pcmkimg metrics`` against the real tools of Debian's packages: ``promtool check metrics``
(package prometheus) finds no problem in its output, and a real ``prometheus-node-exporter``
(package prometheus-node-exporter) serves the textfile it wrote, scraped over HTTP on
127.0.0.1. The textfile comes from the workflow on the fakes of tests/fakes.py, and, in the
live test, from ``pcmkimg metrics --textfile`` run on a node of the sandbox cluster."""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from pcmkimg.adapters import journal
from pcmkimg.core import metrics as M
from pcmkimg.core.storeerrors import StoreError
from pcmkimg.workflows import metrics
from tests import fakes
from tests.sandbox.fixtures import guarded_bundle
from tests.sandbox.require import need_tools

PROMTOOL = "promtool"
NODE_EXPORTER = "prometheus-node-exporter"
OLD = "a" * 64
NEW = "b" * 64
REAL_OLD = "reg.example:8787/ns1/mariadb:1.0"
REAL_NEW = "reg.example:8787/ns2/mariadb:1.1"


# --------------------------------------------------------------------------- helpers


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def node_exporter(directory: Path) -> Iterator[str]:
    """A real node_exporter with only the textfile collector on ``directory``, on a free port
    of 127.0.0.1: yields its /metrics URL once it answers; ended (by its pid) afterwards."""
    need_tools(NODE_EXPORTER)
    for _ in range(3):  # another process may take the free port in between
        port = _free_port()
        proc = subprocess.Popen(
            [
                NODE_EXPORTER,
                "--collector.disable-defaults",
                "--collector.textfile",
                f"--collector.textfile.directory={directory}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        url = f"http://127.0.0.1:{port}/metrics"
        try:
            deadline = time.monotonic() + 10
            while proc.poll() is None and time.monotonic() < deadline:
                try:
                    with urllib.request.urlopen(url, timeout=2) as answer:
                        if answer.status == 200:
                            break
                except (urllib.error.URLError, ConnectionError):
                    time.sleep(0.02)
            else:
                if proc.poll() is None:
                    pytest.fail(f"{NODE_EXPORTER} did not answer on {url} within 10s")
                continue  # it exited (the port was taken): another port
            yield url
            return
        finally:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            if proc.stderr is not None:
                proc.stderr.close()
    pytest.fail(f"{NODE_EXPORTER} did not start on a free port")


def scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as answer:
        assert answer.status == 200
        return answer.read().decode()


_SAMPLE = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"n": "\n"}.get(m.group(1), m.group(1)), value)


def parse(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """name -> [(labels, value)] of the sample lines (label values unescaped)."""
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.fullmatch(line)
        assert m, line
        labels = {k: _unescape(v) for k, v in _LABEL.findall(m.group(2) or "")}
        out.setdefault(m.group(1), []).append((labels, float(m.group(3))))
    return out


def value(found: dict, name: str, **labels: str) -> float:
    """The value of the one sample of ``name`` whose labels include ``labels``."""
    hits = [v for ls, v in found.get(name, []) if labels.items() <= ls.items()]
    assert len(hits) == 1, (name, labels, found.get(name))
    return hits[0]


def promtool_check(text: str) -> subprocess.CompletedProcess[str]:
    need_tools(PROMTOOL)
    return subprocess.run(
        [PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60
    )


# --------------------------------------------------------------------------- on the fakes


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A textfile written by the workflow on the fakes: drift on controller-1, a store that
    does not answer on controller-2, a held lease, an update in the journal."""
    base = tmp_path_factory.mktemp("metrics")
    stores = {
        n: fakes.FakeStore(
            n,
            {fakes.FLOATING: OLD, REAL_OLD: OLD, REAL_NEW: NEW},
            running={fakes.container_of(n): OLD},
        )
        for n in fakes.NODES
    }
    stores["controller-1"].names[fakes.key(fakes.FLOATING)] = NEW
    stores["controller-2"].fail("named_images", StoreError("no answer", "", node="controller-2"))
    cl = fakes.FakeCluster(stores)
    jr = journal.open_journal(base / "journal", run="r1")
    jr.record("start", service="mariadb", bundle=fakes.BUNDLE_ID, target=REAL_NEW, nodes=[])
    jr.record("done", service="mariadb", summary="")
    # an outdated check recorded: controller-0 behind, controller-1 current
    journal.write_state(
        base / "journal",
        "outdated.json",
        {
            "complete": True,
            "checked_at": 1_700_000_000,
            "services": [
                {
                    "service": "mariadb",
                    "bundle": fakes.BUNDLE_ID,
                    "nodes": [
                        {"node": "controller-0", "state": "outdated"},
                        {"node": "controller-1", "state": "current"},
                    ],
                }
            ],
        },
    )
    out = base / "textfile"
    out.mkdir()
    ctx = fakes.context(cl, journal_dir=base / "journal")
    report = metrics.run(ctx, metrics.MetricsRequest(out))
    assert report.path == out / M.FILE_NAME
    return out, report.text


def test_promtool_finds_no_problem_in_the_output(made: tuple[Path, str]) -> None:
    _, text = made
    checked = promtool_check(text)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout == "" and checked.stderr == ""


def test_promtool_would_say_so(made: tuple[Path, str]) -> None:
    """The check is not blind: a counter without _total is a problem to promtool."""
    bad = "# HELP pcmkimg_x x\n# TYPE pcmkimg_x counter\npcmkimg_x 1\n"
    checked = promtool_check(bad)
    assert checked.returncode != 0 and "_total" in checked.stdout + checked.stderr


def test_node_exporter_serves_the_textfile_with_its_labels(made: tuple[Path, str]) -> None:
    directory, _ = made
    with node_exporter(directory) as url:
        found = parse(scrape(url))
    assert value(found, "node_textfile_scrape_error") == 0
    assert value(found, "node_textfile_mtime_seconds", file=str(directory / M.FILE_NAME)) > 0
    at = {"service": "mariadb", "bundle": fakes.BUNDLE_ID}
    assert (
        value(
            found,
            "pcmkimg_image_info",
            **at,
            node="controller-1",
            image=REAL_NEW,
            digest="",
            image_id=NEW[:12],
        )
        == 1
    )
    assert value(found, "pcmkimg_image_info", **at, node="controller-0", image=REAL_OLD) == 1
    assert value(found, "pcmkimg_drift", **at, node="controller-1") == 1
    assert value(found, "pcmkimg_drift", **at, node="controller-0") == 0
    assert value(found, "pcmkimg_replica_active", **at, node="controller-0") == 1
    assert value(found, "pcmkimg_node_up", node="controller-2") == 0
    assert value(found, "pcmkimg_node_up", node="controller-0") == 1
    assert not [
        ls
        for name, rows in found.items()
        if name != "pcmkimg_node_up"
        for ls, _ in rows
        if ls.get("node") == "controller-2"
    ]
    assert value(found, "pcmkimg_update_lease_held") == 0
    assert value(found, "pcmkimg_last_update_result", service="mariadb", result="ok") == 1
    assert value(found, "pcmkimg_last_update_result", service="mariadb", result="failed") == 0
    assert value(found, "pcmkimg_last_update_end_timestamp_seconds", service="mariadb") > 1e9
    assert value(found, "pcmkimg_image_outdated", **at, node="controller-0") == 1
    assert value(found, "pcmkimg_image_outdated", **at, node="controller-1") == 0
    assert value(found, "pcmkimg_outdated_check_complete") == 1


def test_escaped_label_values_survive_promtool_and_node_exporter(tmp_path: Path) -> None:
    odd = 'a "quoted" \\ back\nslash'
    fam = M.Family("pcmkimg_escape_test_info", "Escaping\\ check\nacross lines.")
    fam.add(1, image=odd)
    text = M.render([fam])
    checked = promtool_check(text)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    (tmp_path / M.FILE_NAME).write_text(text)
    with node_exporter(tmp_path) as url:
        found = parse(scrape(url))
    assert value(found, "node_textfile_scrape_error") == 0
    assert found["pcmkimg_escape_test_info"] == [({"image": odd}, 1.0)]


# --------------------------------------------------------------------------- live

BUNDLE = "metricsvc-bundle"
SERVICE = "metricsvc"
FLOATING = "cluster.common.tag/metricsvc:pcmklatest"

guarded = guarded_bundle(BUNDLE, FLOATING)


def test_pcmkimg_metrics_on_a_node_scraped_by_node_exporter(guarded, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    need_tools(PROMTOOL, NODE_EXPORTER)
    sb = guarded
    cl = sb.cluster
    jdir = tmp_path / "journal"
    jdir.mkdir(mode=0o700)
    jr = journal.open_journal(jdir, run="live")
    jr.record("start", service=SERVICE, bundle=BUNDLE, target=sb.ref("ns1/svc:1.0"), nodes=[])
    jr.record("done", service=SERVICE, summary="")
    out = tmp_path / "textfile"
    out.mkdir()
    proc = cl.pcmkimg(
        "controller-0", "--journal-dir", str(jdir), "metrics", "--textfile", str(out), check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout == ""
    prom = out / M.FILE_NAME
    assert oct(prom.stat().st_mode & 0o777) == "0o644"
    assert sorted(os.listdir(out)) == [M.FILE_NAME]
    checked = promtool_check(prom.read_text())
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout == "" and checked.stderr == ""
    with node_exporter(out) as url:
        found = parse(scrape(url))
    assert value(found, "node_textfile_scrape_error") == 0
    at = {"service": SERVICE, "bundle": BUNDLE}
    image_id = sb.images["ns1/svc:1.0"]
    for node in cl.names:
        assert value(found, "pcmkimg_node_up", node=node) == 1
        info = value(
            found,
            "pcmkimg_image_info",
            **at,
            node=node,
            image_id=image_id.removeprefix("sha256:")[:12],
        )
        assert info == 1
        assert value(found, "pcmkimg_drift", **at, node=node) == 0
        assert value(found, "pcmkimg_replica_active", **at, node=node) == 1
        assert value(found, "pcmkimg_guard_running", **at, node=node) == 1
        assert value(found, "pcmkimg_floating_name_resolves", **at, node=node) == 1
        assert value(found, "pcmkimg_replica_failed_operations", **at, node=node) == 0
    (labels,) = [
        ls
        for ls, _ in found["pcmkimg_image_info"]
        if ls["node"] == "controller-0" and ls["service"] == SERVICE
    ]
    assert sb.ref("ns1/svc:1.0") in labels["image"].split(",")
    assert labels["digest"].startswith("sha256:")
    assert value(found, "pcmkimg_last_update_result", service=SERVICE, result="ok") == 1
    svc = {"service": SERVICE, "bundle": BUNDLE, "floating": FLOATING, "guard": "wired"}
    assert value(found, "pcmkimg_service_info", **svc) == 1
