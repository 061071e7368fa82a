"""``pcmkimg metrics`` against the real tools of Debian's packages: ``promtool check metrics``
(package prometheus) finds no problem in its output, and a real ``prometheus-node-exporter``
(package prometheus-node-exporter) serves the textfile it wrote, scraped over HTTP on
127.0.0.1. The textfile comes from the workflow on the fakes of tests/fakes.py, and, in the
live test, from ``pcmkimg metrics --textfile`` run on a node of the sandbox cluster."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from pcmkimg.adapters import journal
from pcmkimg.core import metrics as M
from pcmkimg.core.cib.xml import parse_crm_mon
from pcmkimg.core.errors import StoreError
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


# --------------------------------------------------------------------------- live: outdated
#
# The same bundle, against the sandbox's real registry and real skopeo (run by pcmkimg on the
# node, through the node's registries.conf): a name of its own (outdated/svc:1.0, a copy of
# ns1/svc:1.0, so that no other test's image moves), then a manifest list pushed under it.


def _skopeo(*args: str) -> bytes:
    return subprocess.run(
        ["skopeo", *args], capture_output=True, check=True, timeout=120, stdin=subprocess.DEVNULL
    ).stdout


def _outdated(cl, *args: str):  # type: ignore[no-untyped-def]
    proc = cl.pcmkimg("controller-0", "--json", "outdated", *args, SERVICE, check=False)
    doc = json.loads(proc.stdout)
    return proc, doc


def _checks(doc: dict, ref: str) -> dict[str, dict]:
    """node -> its check of ``ref``."""
    (svc,) = doc["services"]
    return {n["node"]: next(c for c in n["checks"] if c["reference"] == ref) for n in svc["nodes"]}


@contextlib.contextmanager
def registry_stopped(sb) -> Iterator[None]:  # type: ignore[no-untyped-def]
    """The sandbox's registry stopped (its pid), then started again on its port and storage."""
    from tests.sandbox import registry as sandbox_registry
    from tests.sandbox.proc import tcp_open
    from tests.sandbox.state import load

    state = load(sb.name)
    assert state is not None
    port = int(state.info["registry_port"])
    os.kill(int(state.info["registry_pid"]), signal.SIGTERM)
    deadline = time.monotonic() + 20
    while tcp_open(port) and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        assert not tcp_open(port)
        yield
    finally:
        sandbox_registry.start(state, port)


def test_outdated_against_the_real_registry_recorded_for_crm_mon_and_promtool(  # type: ignore[no-untyped-def]
    guarded, tmp_path: Path
) -> None:
    need_tools(PROMTOOL)
    sb = guarded
    cl = sb.cluster
    ref = sb.ref("outdated/svc:1.0")
    old_id = sb.images["ns1/svc:1.0"].removeprefix("sha256:")
    insecure = ("--src-tls-verify=false", "--dest-tls-verify=false")
    _skopeo("copy", "-q", *insecure, f"docker://{sb.ref('ns1/svc:1.0')}", f"docker://{ref}")
    cl.seed(ref)  # every node: the image behind the floating name gets the name and its digest
    old_digest = (
        "sha256:"
        + hashlib.sha256(
            _skopeo("inspect", "--raw", "--tls-verify=false", f"docker://{ref}")
        ).hexdigest()
    )
    try:
        proc, doc = _outdated(cl)
        assert proc.returncode == 0, proc.stderr
        assert {c["state"] for c in _checks(doc, ref).values()} == {"current"}
        assert {tuple(c["node_digests"]) for c in _checks(doc, ref).values()} == {(old_digest,)}

        # A new image under the same tag: a manifest list (podman manifest push --all).
        short = Path(tempfile.mkdtemp(prefix="ol", dir="/tmp"))  # podman: runroot < 50 chars
        store = ["podman", "--root", str(short / "s"), "--runroot", str(short / "r")]

        def run(argv: list[str]) -> None:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
            assert done.returncode == 0, (argv, done.stderr)

        run([*store, "manifest", "create", "localhost/outdated-list:1"])
        run(
            [
                *store,
                "manifest",
                "add",
                "--tls-verify=false",
                "localhost/outdated-list:1",
                f"docker://{sb.ref('ns2/svc:1.1')}",
            ]
        )
        run(
            [
                *store,
                "manifest",
                "push",
                "--all",
                "--tls-verify=false",
                "localhost/outdated-list:1",
                f"docker://{ref}",
            ]
        )
        subprocess.run([*store, "system", "reset", "--force"], capture_output=True, timeout=60)
        shutil.rmtree(short, ignore_errors=True)
        raw = _skopeo("inspect", "--raw", "--tls-verify=false", f"docker://{ref}")
        assert b'"manifests"' in raw
        new_digest = "sha256:" + hashlib.sha256(raw).hexdigest()

        proc, doc = _outdated(cl)
        assert proc.returncode == 10, proc.stdout + proc.stderr
        checks = _checks(doc, ref)
        assert {c["state"] for c in checks.values()} == {"outdated"}
        assert {c["registry_digest"] for c in checks.values()} == {new_digest}
        assert doc["services"][0]["outdated"] == list(cl.names)
        (asked,) = [r for r in doc["references"] if r["reference"] == ref]  # once
        assert asked["digest"] == new_digest

        # controller-2 pulls the list and its floating name moves onto it (no restart):
        # podman records the list's digest there, on podman 4.3 and 5.4 alike.
        cl.seed(ref, FLOATING, nodes=["controller-2"])
        out = tmp_path / "textfile"
        out.mkdir()
        jdir = tmp_path / "state"
        proc = cl.pcmkimg(
            "controller-0",
            "--json",
            "--journal-dir",
            str(jdir),
            "outdated",
            "--record",
            "--textfile",
            str(out),
            SERVICE,
            check=False,
        )
        assert proc.returncode == 10, proc.stdout + proc.stderr
        doc = json.loads(proc.stdout)
        states = {n["node"]: n["state"] for n in doc["services"][0]["nodes"]}
        assert states == {
            "controller-0": "outdated",
            "controller-1": "outdated",
            "controller-2": "current",
        }
        assert new_digest in _checks(doc, ref)["controller-2"]["node_digests"]
        # crm_mon -A: the attribute per node, as the cluster shows it
        mon = cl.run("controller-1", ["crm_mon", "-1", "-A", "--output-as=xml"], timeout=60)
        tree = parse_crm_mon(mon.stdout.encode())
        shown = {
            node.get("name"): attr.get("value")
            for node in tree.iterfind("node_attributes/node")
            for attr in node.iterfind("attribute")
            if attr.get("name") == f"pcmkimg-outdated:{SERVICE}"
        }
        assert shown == states
        text = (out / M.FILE_NAME).read_text()
        checked = promtool_check(text)
        assert checked.returncode == 0, checked.stdout + checked.stderr
        found = parse(text)
        at = {"service": SERVICE, "bundle": BUNDLE}
        assert value(found, "pcmkimg_image_outdated", **at, node="controller-0") == 1
        assert value(found, "pcmkimg_image_outdated", **at, node="controller-2") == 0
        assert value(found, "pcmkimg_outdated_check_complete") == 1

        # The registry stopped: exit 11, one line per name, no traceback; recorded as unknown.
        with registry_stopped(sb):
            proc = cl.pcmkimg(
                "controller-0",
                "--journal-dir",
                str(jdir),
                "outdated",
                "--record",
                "--timeout",
                "10",
                SERVICE,
                check=False,
            )
        assert proc.returncode == 11, proc.stdout + proc.stderr
        lines = proc.stderr.splitlines()
        assert f"pcmkimg: {ref}: the registry {sb.registry} could not be asked: " in "\n".join(
            lines
        ), proc.stderr
        assert all(line.startswith("pcmkimg: ") for line in lines), proc.stderr
        assert "Traceback" not in proc.stdout + proc.stderr
        recorded = json.loads((jdir / "outdated.json").read_text())
        assert recorded["complete"] is False
    finally:  # the floating names back on the old image; the test's name gone everywhere
        cl.podman("controller-2", "tag", old_id, FLOATING)
        for node in cl.names:  # on controller-2 the name went to the list's image with its pull
            cl.podman(node, "rmi", ref, check=False)
