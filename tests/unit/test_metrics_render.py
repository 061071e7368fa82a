"""pcmkimg.core.metrics: the text exposition format (escaping, HELP and TYPE, one sample per
label set), the families made of a status document, and the journal's last updates; pure."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest

from pcmkimg.core import metrics as M

# --------------------------------------------------------------------------- the text format


def test_label_values_escape_backslash_quote_and_newline() -> None:
    assert M.escape_label('a\\b"c\nd') == 'a\\\\b\\"c\\nd'
    assert M.escape_label("plain é/x:1") == "plain é/x:1"
    fam = M.Family("pcmkimg_x", "x")
    fam.add(1, v='q"\\\n')
    line = M.render([fam]).splitlines()[-1]
    assert line == 'pcmkimg_x{v="q\\"\\\\\\n"} 1'


def test_help_escapes_backslash_and_newline_but_not_quotes() -> None:
    assert M.escape_help('a\\b\n"c"') == 'a\\\\b\\n"c"'
    fam = M.Family("pcmkimg_x", "two\nlines")
    fam.add(0)
    assert M.render([fam]).splitlines()[0] == "# HELP pcmkimg_x two\\nlines"


def test_each_family_has_help_then_type_then_its_samples() -> None:
    a = M.Family("pcmkimg_a", "A.")
    a.add(1, node="n1")
    a.add(0, node="n2")
    b = M.Family("pcmkimg_b", "B.")
    b.add(2.5)
    assert M.render([a, b]) == (
        "# HELP pcmkimg_a A.\n"
        "# TYPE pcmkimg_a gauge\n"
        'pcmkimg_a{node="n1"} 1\n'
        'pcmkimg_a{node="n2"} 0\n'
        "# HELP pcmkimg_b B.\n"
        "# TYPE pcmkimg_b gauge\n"
        "pcmkimg_b 2.5\n"
    )


def test_one_sample_per_label_set_and_no_empty_family() -> None:
    a = M.Family("pcmkimg_a", "A.")
    a.add(1, node="n1", service="s")
    a.add(7, node="n1", service="s")  # the same label set: the first value stays
    a.add(0, node="n1", service="t")
    empty = M.Family("pcmkimg_empty", "nothing")
    text = M.render([a, empty])
    assert text.count('pcmkimg_a{node="n1",service="s"}') == 1
    assert 'pcmkimg_a{node="n1",service="s"} 1' in text
    assert "pcmkimg_empty" not in text
    with pytest.raises(ValueError, match="twice"):
        M.render([a, M.Family("pcmkimg_a", "again")])


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1, "1"),
        (0.0, "0"),
        (True, "1"),
        (1.5, "1.5"),
        (1.7e9 + 0.25, "1700000000.25"),
        (float("nan"), "NaN"),
        (float("inf"), "+Inf"),
        (float("-inf"), "-Inf"),
    ],
)
def test_values_are_go_floats(value: float, text: str) -> None:
    assert M.format_value(float(value)) == text


def test_names_types_and_counters_follow_the_conventions() -> None:
    with pytest.raises(ValueError, match="metric name"):
        M.Family("pcmkimg-x", "x")
    with pytest.raises(ValueError, match="_total"):
        M.Family("pcmkimg_x", "x", type="counter")
    with pytest.raises(ValueError, match="metric type"):
        M.Family("pcmkimg_x", "x", type="info")
    with pytest.raises(ValueError, match="label name"):
        M.Family("pcmkimg_x", "x").add(1, **{"bad-label": "v"})


# --------------------------------------------------------------------------- the families

IMAGE = {
    "image_id": "c" * 64,
    "short_id": "c" * 12,
    "names": ["reg.example:8787/ns2/svc:1.1", "reg.example:8787/ns1/svc:1.1"],
    "digest": "sha256:" + "d" * 64,
    "created": None,
}


def _node(node: str, **over: Any) -> dict[str, Any]:
    row = {
        "node": node,
        "reachable": True,
        "error": None,
        "can_run": True,
        "floating": copy.deepcopy(IMAGE),
        "container": None,
        "drift": False,
        "role": "Started",
        "guard": "Started",
        "failures": [],
    }
    row.update(over)
    return row


def _failure(degraded: bool) -> dict[str, Any]:
    return {
        "operation": "monitor",
        "resource": "r",
        "exitcode": "190" if degraded else "1",
        "exitstatus": "x",
        "reason": "",
        "degraded": degraded,
    }


DOC = {
    "schema": "pcmkimg-status/1",
    "cluster": {"quorum": True, "dc": "n1"},
    "services": [
        {
            "service": "svc",
            "bundle": "svc-bundle",
            "floating": "cluster.common.tag/svc:pcmklatest",
            "guard": "wired",
            "interleave": True,
            "nodes": [
                _node("n1"),
                _node(
                    "n2",
                    drift=True,
                    role="Promoted",
                    failures=[_failure(False), _failure(True), _failure(False)],
                ),
                _node("n3", floating=None, role="Stopped", guard="Stopped", can_run=False),
                _node("n4", reachable=False, error="ssh: timeout", floating=None),
            ],
        }
    ],
}


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], str]:
    """name, labels -> value, of every sample line (the labels have no escaped quote here)."""
    out = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = re.fullmatch(r"([a-z_]+)(?:\{(.*)\})? (\S+)", line)
        assert m, line
        labels = frozenset(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
        out[(m.group(1), labels)] = m.group(3)
    return out


def _at(node: str) -> frozenset[tuple[str, str]]:
    return frozenset({("service", "svc"), ("bundle", "svc-bundle"), ("node", node)})


def test_the_families_of_a_status_document() -> None:
    text = M.text(DOC, lease_held=True)
    got = samples(text)
    info = _at("n1") | {
        ("image", "reg.example:8787/ns1/svc:1.1,reg.example:8787/ns2/svc:1.1"),
        ("digest", IMAGE["digest"]),
        ("image_id", "c" * 12),
    }
    assert got[("pcmkimg_image_info", frozenset(info))] == "1"
    assert got[("pcmkimg_drift", _at("n1"))] == "0"
    assert got[("pcmkimg_drift", _at("n2"))] == "1"
    assert got[("pcmkimg_replica_active", _at("n2"))] == "1"  # Promoted is active
    assert got[("pcmkimg_replica_active", _at("n3"))] == "0"
    assert got[("pcmkimg_guard_running", _at("n1"))] == "1"
    assert got[("pcmkimg_guard_running", _at("n3"))] == "0"
    assert got[("pcmkimg_replica_failed_operations", _at("n2"))] == "2"  # degraded excluded
    assert got[("pcmkimg_replica_failed_operations", _at("n1"))] == "0"
    assert got[("pcmkimg_floating_name_resolves", _at("n1"))] == "1"
    assert got[("pcmkimg_floating_name_resolves", _at("n3"))] == "0"
    assert got[("pcmkimg_bundle_can_run", _at("n3"))] == "0"
    assert not any(k[0] == "pcmkimg_image_info" and ("node", "n3") in k[1] for k in got)
    assert got[("pcmkimg_update_lease_held", frozenset())] == "1"
    svc = {
        ("service", "svc"),
        ("bundle", "svc-bundle"),
        ("floating", "cluster.common.tag/svc:pcmklatest"),
        ("guard", "wired"),
    }
    assert got[("pcmkimg_service_info", frozenset(svc))] == "1"
    assert "pcmkimg_last_update" not in text  # no journal entry: no sample, no HELP


def test_an_unread_node_has_node_up_0_and_nothing_else() -> None:
    got = samples(M.text(DOC, lease_held=False))
    assert got[("pcmkimg_node_up", frozenset({("node", "n4")}))] == "0"
    assert got[("pcmkimg_node_up", frozenset({("node", "n1")}))] == "1"
    assert [k for k in got if ("node", "n4") in k[1]] == [
        ("pcmkimg_node_up", frozenset({("node", "n4")}))
    ]
    assert got[("pcmkimg_update_lease_held", frozenset())] == "0"


OUTDATED = {
    "complete": True,
    "checked_at": 1_700_000_100.5,
    "services": [
        {
            "service": "svc",
            "bundle": "svc-bundle",
            "nodes": [
                {"node": "n1", "state": "outdated"},
                {"node": "n2", "state": "current"},
                {"node": "n3", "state": "unknown"},
            ],
        },
        {"service": "gone", "bundle": "gone-bundle", "nodes": [{"node": "n1", "state": "current"}]},
    ],
}


def test_the_recorded_outdated_check() -> None:
    got = samples(M.text(DOC, lease_held=False, outdated=OUTDATED))
    assert got[("pcmkimg_image_outdated", _at("n1"))] == "1"
    assert got[("pcmkimg_image_outdated", _at("n2"))] == "0"
    # unknown: no sample; a service no longer behind a floating name: none either
    assert [k for k in got if k[0] == "pcmkimg_image_outdated"] == [
        ("pcmkimg_image_outdated", _at("n1")),
        ("pcmkimg_image_outdated", _at("n2")),
    ]
    assert got[("pcmkimg_outdated_check_timestamp_seconds", frozenset())] == "1700000100.5"
    assert got[("pcmkimg_outdated_check_complete", frozenset())] == "1"
    # no check recorded: no sample, no HELP
    assert "outdated" not in M.text(DOC, lease_held=False)


def test_every_family_has_help_and_type_and_follows_the_naming_conventions() -> None:
    updates = {"svc": M.LastUpdate("svc", 1_700_000_000.0, "ok")}
    fams = M.families(DOC, lease_held=False, updates=updates, outdated=OUTDATED)
    text = M.render(fams)
    for fam in fams:
        assert fam.name.startswith("pcmkimg_") and fam.type == "gauge"
        assert not fam.name.endswith(("_total", "_count", "_sum", "_bucket"))
        assert f"# HELP {fam.name} " in text and f"# TYPE {fam.name} gauge" in text
        if fam.name.endswith("_info"):
            assert {v for _, v in fam.samples} == {1.0}
        labels = {k for ls, _ in fam.samples for k, _ in ls}
        assert labels <= {
            "service",
            "bundle",
            "node",
            "floating",
            "guard",
            "image",
            "digest",
            "image_id",
            "result",
        }


def test_the_last_update_per_service_with_one_sample_per_result() -> None:
    updates = {
        "svc": M.LastUpdate("svc", 1_700_000_123.0, "rolled-back"),
        "gone": M.LastUpdate("gone", 1.0, "ok"),  # no longer in the cluster: left out
    }
    got = samples(M.text(DOC, lease_held=False, updates=updates))
    assert (
        got[("pcmkimg_last_update_end_timestamp_seconds", frozenset({("service", "svc")}))]
        == "1700000123"
    )
    results = {
        dict(k[1])["result"]: v for k, v in got.items() if k[0] == "pcmkimg_last_update_result"
    }
    assert results == {
        "ok": "0",
        "failed": "0",
        "rolled-back": "1",
        "rollback-failed": "0",
        "unfinished": "0",
    }
    assert not any(("service", "gone") in k[1] for k in got)


# --------------------------------------------------------------------------- the journal


def _e(run: str, event: str, time: str = "2026-12-01T10:00:00+0100", **kw: Any) -> dict:
    return {"run": run, "event": event, "time": time, **kw}


def test_last_updates_from_the_journal() -> None:
    entries = [
        _e("r1", "start", service="svc"),
        _e("r1", "done", "2026-12-01T10:00:05+0100", service="svc"),
        _e("r2", "start", service="db"),
        _e("r2", "pull", "2026-12-01T10:01:00+0000", node="n1"),  # names no service
        _e("r2", "failed", service="db", node="n1"),
        _e("r2", "rolled-back", service="db", node="n1"),
        _e("r2", "aborted", "2026-12-01T10:02:00+0000", service="db"),
        _e("r3", "start", service="mq"),
        _e("r3", "rollback-failed", service="mq", node="n1"),
        _e("r3", "aborted", service="mq"),
        _e("r4", "start", service="web"),
        _e("r4", "aborted", "junk", service="web"),
        _e("r5", "start", service="cache", time="2026-12-01T11:00:00+0000"),
        _e("r6", "rollback", service="svc", node="n1"),  # a rollback run: not an update
        {"event": "start", "service": "x"},  # no run id: skipped
    ]
    got = M.last_updates(entries)
    assert got["svc"] == M.LastUpdate("svc", 1_796_115_605.0, "ok")
    assert got["db"] == M.LastUpdate("db", 1_796_119_320.0, "rolled-back")
    assert got["mq"].result == "rollback-failed"
    assert got["web"] == M.LastUpdate("web", 1_796_115_600.0, "failed")  # the last readable time
    assert got["cache"] == M.LastUpdate("cache", 1_796_122_800.0, "unfinished")
    assert "x" not in got


def test_a_later_update_replaces_the_earlier_one() -> None:
    entries = [
        _e("r1", "start", service="svc"),
        _e("r1", "aborted", service="svc"),
        _e("r2", "start", "2026-12-01T12:00:00+0000", service="svc"),
        _e("r2", "done", "2026-12-01T12:00:09+0000", service="svc"),
    ]
    assert M.last_updates(entries)["svc"] == M.LastUpdate("svc", 1_796_126_409.0, "ok")
