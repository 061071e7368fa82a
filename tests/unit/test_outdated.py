"""``pcmkimg outdated``: the pure judgement (core/outdated.py), the workflow and the CLI on the
fakes of tests/fakes.py (a FakeRegistry as the registry port), the record (node attributes, the
state file, the metrics), and the skopeo adapter with a scripted ``run`` argument (real skopeo
against a real registry: tests/integration/test_metrics_tools.py)."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from pcmkimg import cli
from pcmkimg.adapters import journal, registry
from pcmkimg.adapters.config import parse as parse_conf
from pcmkimg.core import outdated as O
from pcmkimg.core.errors import StoreError
from pcmkimg.workflows import outdated
from tests import fakes
from tests.helpers import jsonschema
from tests.unit.test_metrics_render import samples

SCHEMA = Path(__file__).resolve().parents[2] / "pcmkimg" / "outdated_schema.json"
OLD, NEW = "a" * 64, "b" * 64
REPO = "reg.example:8787/ns1/mariadb"
REAL = f"{REPO}:1.0"
D_OLD = "sha256:" + "1" * 64
D_NEW = "sha256:" + "2" * 64
REDIS = "reg.example:8787/ns1/redis:6"
D_REDIS = "sha256:" + "3" * 64


def _stores() -> dict[str, fakes.FakeStore]:
    """Every node runs OLD behind mariadb's and redis's floating names, pulled as REAL and
    REDIS (digests D_OLD and D_REDIS)."""
    stores = {}
    for n in fakes.NODES:
        st = fakes.FakeStore(
            n,
            {
                fakes.FLOATING: OLD,
                REAL: OLD,
                "cluster.common.tag/redis:pcmklatest": NEW,
                REDIS: NEW,
            },
            running={fakes.container_of(n): OLD},
        )
        st.repo_digests = {
            OLD: (f"{REPO}@{D_OLD}",),
            NEW: (f"reg.example:8787/ns1/redis@{D_REDIS}",),
        }
        stores[n] = st
    return stores


def _run(
    tmp_path: Path,
    serves: dict,
    stores: dict | None = None,
    **req: object,
) -> tuple[outdated.OutdatedReport, fakes.FakeCluster, fakes.FakeRegistry]:
    cl = fakes.FakeCluster(stores or _stores())
    reg = fakes.FakeRegistry(serves)
    ctx = fakes.context(cl, journal_dir=tmp_path / "state", registry=reg)
    request = outdated.OutdatedRequest(**{"services": ("mariadb", "redis"), **req})  # type: ignore[arg-type]
    return outdated.run(ctx, request), cl, reg


def _node(doc: dict, service: str, node: str) -> dict:
    (s,) = [s for s in doc["services"] if s["service"] == service]
    return next(n for n in s["nodes"] if n["node"] == node)


def _validate(doc: dict) -> None:
    jsonschema().validate(doc, json.loads(SCHEMA.read_text()))


# --------------------------------------------------------------------------- core


def test_the_served_digest_is_the_sha256_of_the_raw_manifest_and_a_lists_instances() -> None:
    raw = b'{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json"}'
    got = O.served(REAL, raw)
    assert got.digest == "sha256:" + hashlib.sha256(raw).hexdigest()
    assert got.instances == () and got.error is None
    index = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": [{"digest": D_OLD, "platform": {"architecture": "amd64"}}],
        }
    ).encode()
    listed = O.served(REAL, index)
    assert listed.instances == (D_OLD,)
    assert listed.digests == {listed.digest, D_OLD}


def test_judge_every_state() -> None:
    has = O.NodeImage("n", (REAL,), (f"{REPO}@{D_OLD}",), OLD)
    assert O.judge(has, {REAL: O.Served(REAL, D_OLD)})["state"] == "current"
    row = O.judge(has, {REAL: O.Served(REAL, D_NEW)})
    assert row["state"] == "outdated"
    assert row["checks"] == [
        {
            "reference": REAL,
            "node_digests": [D_OLD],
            "registry_digest": D_NEW,
            "state": "outdated",
            "error": None,
        }
    ]
    # a manifest list: the node's digest is one of its instances (podman records both)
    listed = O.Served(REAL, D_NEW, instances=(D_OLD,))
    assert O.judge(has, {REAL: listed})["state"] == "current"
    down = O.Served(REAL, error="the registry reg.example:8787 could not be asked: refused")
    assert O.judge(has, {REAL: down})["state"] == "unknown"
    # another repository's digest does not count
    other = O.NodeImage("n", (REAL,), (f"reg.example:8787/ns2/mariadb@{D_NEW}",), OLD)
    assert O.judge(other, {REAL: O.Served(REAL, D_NEW)})["state"] == "outdated"
    # pulled by digest only, or a local name: nothing to ask
    assert O.judge(O.NodeImage("n", (), (f"{REPO}@{D_OLD}",), OLD), {})["state"] == "untracked"
    assert O.judge(O.NodeImage("n", ("localhost/x:1",), (), OLD), {})["state"] == "untracked"
    assert O.judge(O.NodeImage("n"), {})["state"] == "missing"
    assert O.judge(O.NodeImage("n", error="no answer"), {})["state"] == "unreachable"
    assert O.references([has, O.NodeImage("m", ("localhost/x:1", REAL, f"{REPO}@{D_OLD}"))]) == [
        REAL
    ]


def test_the_attribute_never_meets_a_guards_default_attribute() -> None:
    from pcmkimg.core import naming

    assert O.attribute_name("mariadb") == "pcmkimg-outdated:mariadb"
    # a service name is a path component: it can't hold the ':'
    assert O.attribute_name("x") != naming.attribute_name("outdated-x")


# --------------------------------------------------------------------------- the workflow


def test_a_node_behind_is_named_and_each_name_is_asked_once(tmp_path: Path) -> None:
    stores = _stores()
    # controller-2 already has the new image under REAL (pulled and retagged)
    stores["controller-2"].names[fakes.key(fakes.FLOATING)] = "c" * 64
    stores["controller-2"].names[fakes.key(REAL)] = "c" * 64
    stores["controller-2"].repo_digests["c" * 64] = (f"{REPO}@{D_NEW}",)
    report, cl, reg = _run(tmp_path, {REAL: D_NEW, REDIS: D_REDIS}, stores, timeout=7.0)
    assert reg.calls == [((REAL, REDIS), 7.0)]  # once each, whatever the number of nodes
    doc = report.doc
    _validate(doc)
    assert doc["outdated"] is True and doc["complete"] is True
    (maria,) = [s for s in doc["services"] if s["service"] == "mariadb"]
    assert maria["outdated"] == ["controller-0", "controller-1"]
    assert _node(doc, "mariadb", "controller-2")["state"] == "current"
    assert {n["state"] for n in _node_rows(doc, "redis")} == {"current"}
    row = _node(doc, "mariadb", "controller-0")
    assert row["names"] == [REAL] and row["image_id"] == OLD
    assert row["checks"][0]["node_digests"] == [D_OLD]
    assert row["checks"][0]["registry_digest"] == D_NEW
    text = "\n".join(report.lines())
    assert f"controller-0: {REAL} OUTDATED: has {D_OLD[:19]}" in text
    assert text.endswith("an update is available on: controller-0, controller-1")
    assert cl.kinds("attribute", "cib") == []  # without --record nothing is written
    assert not (tmp_path / "state").exists()


def _node_rows(doc: dict, service: str) -> list[dict]:
    (s,) = [s for s in doc["services"] if s["service"] == service]
    return s["nodes"]


def test_a_registry_down_and_a_name_gone_are_lines_not_tracebacks(tmp_path: Path) -> None:
    down = O.Served(REAL, error="the registry reg.example:8787 could not be asked: refused")
    report, _, _ = _run(tmp_path, {REAL: down})  # REDIS: gone
    doc = report.doc
    _validate(doc)
    assert doc["complete"] is False and doc["outdated"] is False
    assert {n["state"] for n in _node_rows(doc, "mariadb")} == {"unknown"}
    assert O.failed_lines(doc) == [
        f"{REAL}: the registry reg.example:8787 could not be asked: refused",
        f"{REDIS}: no such name (FakeRegistry)",
    ]
    assert [r["gone"] for r in doc["references"]] == [False, True]


def test_an_unreachable_store_and_a_missing_name_are_states(tmp_path: Path) -> None:
    stores = _stores()
    stores["controller-1"].fail("named_images", StoreError("no answer", "", node="controller-1"))
    del stores["controller-2"].names[fakes.key(fakes.FLOATING)]
    report, _, reg = _run(tmp_path, {REAL: D_OLD, REDIS: D_REDIS}, stores)
    _validate(report.doc)
    assert _node(report.doc, "mariadb", "controller-1")["state"] == "unreachable"
    assert _node(report.doc, "mariadb", "controller-2")["state"] == "missing"
    assert _node(report.doc, "mariadb", "controller-0")["state"] == "current"
    assert report.doc["complete"] and not report.doc["outdated"]


def test_no_name_to_ask_asks_no_registry(tmp_path: Path) -> None:
    stores = {n: fakes.FakeStore(n, {fakes.FLOATING: OLD}) for n in fakes.NODES}
    report, _, reg = _run(tmp_path, {}, stores, services=("mariadb",))
    assert reg.calls == []
    assert {n["state"] for n in _node_rows(report.doc, "mariadb")} == {"untracked"}
    assert report.doc["complete"] and not report.doc["outdated"]


def test_record_writes_the_attributes_the_state_file_and_the_metrics(tmp_path: Path) -> None:
    stores = _stores()
    stores["controller-1"].fail("named_images", StoreError("no answer", "", node="controller-1"))
    out = tmp_path / "textfile"
    out.mkdir()
    report, cl, _ = _run(tmp_path, {REAL: D_NEW, REDIS: D_REDIS}, stores, record=True, textfile=out)
    assert report.record_errors == []
    attrs = {(e[1], e[2]): e[3] for e in cl.kinds("attribute")}
    assert attrs == {
        ("controller-0", "pcmkimg-outdated:mariadb"): "outdated",
        ("controller-2", "pcmkimg-outdated:mariadb"): "outdated",
        ("controller-0", "pcmkimg-outdated:redis"): "current",
        ("controller-2", "pcmkimg-outdated:redis"): "current",
    }  # controller-1's store was not read: no attribute written for it
    path = tmp_path / "state" / O.RECORD_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    recorded = journal.read_state(tmp_path / "state", O.RECORD_FILE)
    assert recorded is not None
    _validate(recorded)
    assert recorded["checked_at"] > 1e9
    got = samples((out / "pcmkimg.prom").read_text())

    def at(service: str, bundle: str, node: str) -> frozenset:
        return frozenset({("service", service), ("bundle", bundle), ("node", node)})

    assert got[("pcmkimg_image_outdated", at("mariadb", fakes.BUNDLE_ID, "controller-0"))] == "1"
    assert got[("pcmkimg_image_outdated", at("redis", "redis-bundle", "controller-2"))] == "0"
    assert ("pcmkimg_image_outdated", at("mariadb", fakes.BUNDLE_ID, "controller-1")) not in got
    assert got[("pcmkimg_outdated_check_complete", frozenset())] == "1"
    assert float(got[("pcmkimg_outdated_check_timestamp_seconds", frozenset())]) > 1e9


def test_metrics_reads_the_recorded_check(tmp_path: Path) -> None:
    from pcmkimg.workflows import metrics

    _run(tmp_path, {REAL: D_NEW}, record=True)  # REDIS gone: incomplete
    cl = fakes.FakeCluster(_stores())
    text = metrics.run(fakes.context(cl, journal_dir=tmp_path / "state"), metrics.MetricsRequest())
    got = samples(text.text)
    key = frozenset({("service", "mariadb"), ("bundle", fakes.BUNDLE_ID), ("node", "controller-0")})
    assert got[("pcmkimg_image_outdated", key)] == "1"
    assert got[("pcmkimg_outdated_check_complete", frozenset())] == "0"
    # redis's state is unknown: no sample for it
    assert not [k for k in got if k[0] == "pcmkimg_image_outdated" and ("service", "redis") in k[1]]


def test_a_failed_attribute_is_a_line_and_the_rest_is_recorded(tmp_path: Path) -> None:
    from pcmkimg.adapters.errors import ToolError

    class Failing(fakes.FakeCluster):
        def set_node_attribute(self, node: str, name: str, value: str) -> None:
            if node == "controller-1":
                raise ToolError("crm_attribute failed (rc 102)", "check the cluster")
            super().set_node_attribute(node, name, value)

    cl = Failing(_stores())
    ctx = fakes.context(cl, journal_dir=tmp_path / "s", registry=fakes.FakeRegistry({REAL: D_OLD}))
    report = outdated.run(ctx, outdated.OutdatedRequest(("mariadb",), record=True))
    (line,) = report.record_errors
    assert line.startswith("controller-1: attribute pcmkimg-outdated:mariadb: crm_attribute failed")
    assert len(cl.kinds("attribute")) == 2
    assert (tmp_path / "s" / O.RECORD_FILE).exists()


# --------------------------------------------------------------------------- the CLI


def _cli(capsys, tmp_path: Path, serves: dict, *args: str, stores=None):  # type: ignore[no-untyped-def]
    cl = fakes.FakeCluster(stores or _stores())
    conf = tmp_path / "pcmkimg.conf"
    conf.write_text("")
    make = fakes.cli_context(cl, registry=fakes.FakeRegistry(serves))
    argv = ["--conf", str(conf), "--journal-dir", str(tmp_path / "state"), *args]
    with pytest.raises(SystemExit) as info:
        cli.main(argv, context=make)
    out, err = capsys.readouterr()
    return info.value.code, out, err, cl


def test_exit_0_when_every_node_is_current(capsys, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    code, out, err, _ = _cli(capsys, tmp_path, {REAL: D_OLD}, "outdated", "mariadb")
    assert code == cli.OK == 0, err
    assert f"controller-0: {REAL} current ({D_OLD[:19]})" in out and err == ""


def test_exit_10_when_an_update_is_available(capsys, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    code, out, err, _ = _cli(capsys, tmp_path, {REAL: D_NEW}, "--json", "outdated", "mariadb")
    assert code == cli.OUTDATED == 10, err
    doc = json.loads(out)
    _validate(doc)
    assert doc["services"][0]["outdated"] == list(fakes.NODES)


def test_exit_11_and_one_line_when_a_registry_could_not_be_asked(capsys, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    down = O.Served(REAL, error="the registry reg.example:8787 could not be asked: refused")
    code, out, err, _ = _cli(capsys, tmp_path, {REAL: down, REDIS: D_NEW}, "outdated")
    # incomplete wins over an update being available (redis): the answer is partial
    assert code == cli.REGISTRY_UNASKED == 11
    assert err.splitlines() == [
        f"pcmkimg: {REAL}: the registry reg.example:8787 could not be asked: refused"
    ]
    assert "Traceback" not in out + err


def test_record_with_the_configured_textfile_dir(capsys, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out_dir = tmp_path / "prom"
    out_dir.mkdir()
    cl = fakes.FakeCluster(_stores())
    conf = tmp_path / "pcmkimg.conf"
    conf.write_text(f"[metrics]\ntextfile_dir = {out_dir}\n")
    make = fakes.cli_context(cl, registry=fakes.FakeRegistry({REAL: D_NEW}))
    argv = ["--conf", str(conf), "--journal-dir", str(tmp_path / "s"), "outdated", "--record"]
    with pytest.raises(SystemExit) as info:
        cli.main([*argv, "mariadb"], context=make)
    assert info.value.code == cli.OUTDATED
    assert "pcmkimg_image_outdated{" in (out_dir / "pcmkimg.prom").read_text()
    assert len(cl.kinds("attribute")) == 3


def test_usage_errors(capsys, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    code, _, err, _ = _cli(capsys, tmp_path, {}, "outdated", "--textfile", str(tmp_path))
    assert code == cli.BAD_INPUT and "--textfile goes with --record" in err
    code, _, err, _ = _cli(capsys, tmp_path, {}, "outdated", "nosuch")
    assert code == cli.BAD_INPUT and "nosuch" in err
    cib = tmp_path / "cib.xml"
    cib.write_text("<cib/>")
    code, _, err, _ = _cli(capsys, tmp_path, {}, "outdated", "--record", "--cib-file", str(cib))
    assert code == cli.BAD_INPUT and "not on a saved CIB" in err


def test_the_exit_codes_do_not_clash_with_the_others() -> None:
    others = {cli.OK, cli.INTERNAL, *cli.FAMILY_CODES.values(), *cli.SIGNAL_CODES.values()}
    assert {cli.OUTDATED, cli.REGISTRY_UNASKED}.isdisjoint(others)
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert "| 10 | `outdated`:" in readme and "| 11 | `outdated`:" in readme


def test_the_schema_rejects_what_it_does_not_document(tmp_path: Path) -> None:
    js = jsonschema()
    schema = json.loads(SCHEMA.read_text())
    js.Draft202012Validator.check_schema(schema)
    assert schema["$id"] == O.SCHEMA_ID
    report, _, _ = _run(tmp_path, {REAL: D_NEW, REDIS: D_REDIS})
    for change in (
        lambda d: d.update(schema="pcmkimg-outdated/2"),
        lambda d: d["services"][0]["nodes"][0].update(state="stale"),
        lambda d: d["services"][0]["nodes"][0].update(extra=1),
        lambda d: d["references"][0].update(digest="md5:x"),
        lambda d: d.pop("complete"),
    ):
        bad = json.loads(json.dumps(report.doc))
        change(bad)
        with pytest.raises(js.ValidationError):
            js.validate(bad, schema)


def test_the_metrics_textfile_dir_of_the_configuration() -> None:
    assert parse_conf("[metrics]\ntextfile_dir = /srv/prom\n").textfile_dir == Path("/srv/prom")
    assert parse_conf("").textfile_dir is None
    with pytest.raises(Exception, match="not an absolute path"):
        parse_conf("[metrics]\ntextfile_dir = prom\n")


# --------------------------------------------------------------------------- the skopeo adapter


class Script:
    """The ``run`` of :class:`registry.Skopeo`: answers by reference, records argv and timeout."""

    def __init__(self, answers: dict[str, object]) -> None:
        self.answers = answers
        self.calls: list[tuple[list[str], float]] = []

    def __call__(self, argv: list[str], **kw: object) -> subprocess.CompletedProcess[bytes]:
        assert "shell" not in kw and kw["env"]["LC_ALL"] == "C"  # type: ignore[index]
        self.calls.append((argv, kw["timeout"]))  # type: ignore[arg-type]
        found = self.answers[argv[-1].removeprefix("docker://")]
        if isinstance(found, BaseException):
            raise found
        rc, out, err = found  # type: ignore[misc]
        return subprocess.CompletedProcess(argv, rc, out, err)


def test_skopeo_asks_once_per_reference_with_the_registrys_tls_setting() -> None:
    conf = parse_conf("[registries]\nreg.example:8787 = tls_verify=false\n")
    raw = b'{"schemaVersion":2}'
    other = "quay.example/ns/x:1"
    script = Script({REAL: (0, raw, b""), other: (0, raw, b"")})
    got = registry.Skopeo(conf, run=script).served([REAL, other, REAL], 5.0)
    assert got[REAL].digest == "sha256:" + hashlib.sha256(raw).hexdigest()
    argvs = sorted(argv for argv, _ in script.calls)
    assert argvs == [
        ["skopeo", "inspect", "--raw", "--tls-verify=false", "docker://" + REAL],
        ["skopeo", "inspect", "--raw", "docker://" + other],
    ]
    assert all(0 < t <= 5.0 for _, t in script.calls)


def test_skopeo_failures_are_lines() -> None:
    refused = (
        b'time="2026-12-02T01:00:00Z" level=fatal msg="Error parsing image name '
        b'\\"docker://reg.example:8787/ns1/mariadb:1.0\\": pinging container registry '
        b'reg.example:8787: dial tcp: connect: connection refused"\n'
    )
    gone = b'time="x" level=fatal msg="Error reading manifest 1.0 in x: manifest unknown"\n'
    script = Script(
        {
            REAL: (1, b"", refused),
            REDIS: (1, b"", gone),
            "slow.example/x:1": subprocess.TimeoutExpired(["skopeo"], 5.0),
        }
    )
    got = registry.Skopeo(run=script).served([REAL, REDIS, "slow.example/x:1"], 5.0)
    assert got[REAL].error == (
        "the registry reg.example:8787 could not be asked: pinging container registry "
        "reg.example:8787: dial tcp: connect: connection refused"
    )
    assert not got[REAL].gone
    assert got[REDIS].gone and "no longer serves it" in (got[REDIS].error or "")
    assert got["slow.example/x:1"].error == (
        "the registry slow.example could not be asked in time (deadline 5s)"
    )


def test_a_registry_past_its_deadline_is_not_asked_again() -> None:
    now = [100.0]
    script = Script({REAL: (0, b"{}", b"")})
    sk = registry.Skopeo(run=script, clock=lambda: now[0])
    assert sk._ask(REAL, deadline=99.0).error == (
        "the registry reg.example:8787 could not be asked in time (deadline passed)"
    )
    assert script.calls == []


def test_skopeo_missing_is_one_error() -> None:
    script = Script({REAL: FileNotFoundError("skopeo")})
    with pytest.raises(registry.SkopeoMissing, match="skopeo is not installed"):
        registry.Skopeo(run=script).served([REAL], 5.0)
    assert cli.exit_code(registry.SkopeoMissing("x")) == cli.UNREACHABLE


def test_the_units_are_valid(tmp_path: Path) -> None:
    """``systemd-analyze verify`` of the shipped units (Debian's systemd on both platforms);
    and what they say: daily, randomized, not enabled by the package, the check recorded."""
    units = Path(__file__).resolve().parents[2] / "packaging" / "systemd"
    service = (units / "pcmkimg-outdated.service").read_text()
    timer = (units / "pcmkimg-outdated.timer").read_text()
    assert "ExecStart=/usr/bin/pcmkimg outdated --record\n" in service
    assert "SuccessExitStatus=10\n" in service
    assert "OnCalendar=daily\n" in timer and "RandomizedDelaySec=" in timer
    assert "Persistent=true\n" in timer and "WantedBy=timers.target" in timer
    # verify resolves ExecStart: a stand-in pcmkimg under a root of our own
    root = tmp_path / "root"
    (root / "usr/bin").mkdir(parents=True)
    exe = root / "usr/bin/pcmkimg"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    for name in ("pcmkimg-outdated.service", "pcmkimg-outdated.timer"):
        (tmp_path / name).write_text(
            (units / name).read_text().replace("/usr/bin/pcmkimg", str(exe))
        )
    proc = subprocess.run(
        [
            "systemd-analyze",
            "verify",
            "--man=no",
            str(tmp_path / "pcmkimg-outdated.timer"),
            str(tmp_path / "pcmkimg-outdated.service"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "SYSTEMD_LOG_LEVEL": "warning"},
    )
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr


def test_a_record_failure_is_exit_5_and_one_json_document(capsys, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from pcmkimg.adapters.errors import ToolError

    class Failing(fakes.FakeCluster):
        def set_node_attribute(self, node: str, name: str, value: str) -> None:
            raise ToolError("crm_attribute failed (rc 102)", "check the cluster")

    cl = Failing(_stores())
    conf = tmp_path / "pcmkimg.conf"
    conf.write_text("")
    make = fakes.cli_context(cl, registry=fakes.FakeRegistry({REAL: D_NEW}))
    argv = ["--json", "--conf", str(conf), "--journal-dir", str(tmp_path / "s")]
    with pytest.raises(SystemExit) as info:
        cli.main([*argv, "outdated", "--record", "mariadb"], context=make)
    out, err = capsys.readouterr()
    assert info.value.code == cli.UNREACHABLE == 5
    doc = json.loads(out)  # one document: the error, the check as its report
    assert doc["exit_code"] == 5 and "could not be recorded on 3 node(s)" in doc["error"]
    _validate(doc["report"])
    assert len(err.splitlines()) == 4 and "Traceback" not in err
