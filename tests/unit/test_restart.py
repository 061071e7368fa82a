"""The restart rules of pcmkimg.core.restart on fixture CIBs and crm_mon documents."""

from __future__ import annotations

import pytest

from pcmkimg.core import cib, restart
from pcmkimg.core.errors import BundleNotFoundError, RestartNoQuorumError, RestartRefusedError
from pcmkimg.records import replace
from tests import fixtures


def config(**meta: str) -> cib.Element:
    base = fixtures.cib("base.xml")
    for name, value in meta.items():
        base = cib.set_bundle_meta(base, "galera-bundle", name, value).new_cib
    return base


def mon(name: str = "mon-ok.xml") -> cib.ClusterStatus:
    return fixtures.status(name)


# --------------------------------------------------------------------------- check_restartable


def test_restartable_replica() -> None:
    replica = restart.check_restartable(config(), mon(), "galera-bundle", "controller-1")
    assert (replica.container_id, replica.node) == ("galera-bundle-podman-1", "controller-1")


@pytest.mark.parametrize(
    ("meta", "mon_file", "node", "error", "reason"),
    [
        (
            {"is-managed": "false"},
            "mon-ok.xml",
            "controller-1",
            RestartRefusedError,
            "unmanaged",
        ),
        (
            {"target-role": "Stopped"},
            "mon-ok.xml",
            "controller-1",
            RestartRefusedError,
            "disabled",
        ),
        ({}, "mon-standby.xml", "controller-2", RestartRefusedError, "in standby"),
        ({}, "mon-no-quorum.xml", "controller-1", RestartNoQuorumError, "no quorum"),
        ({}, "mon-ok.xml", "controller-9", RestartRefusedError, "no node 'controller-9'"),
        (
            {},
            "mon-failed-start.xml",
            "controller-1",
            RestartRefusedError,
            "replica has failed",
        ),
    ],
)
def test_restart_refusals(
    meta: dict[str, str], mon_file: str, node: str, error: type[Exception], reason: str
) -> None:
    with pytest.raises(error, match=reason) as info:
        restart.check_restartable(config(**meta), mon(mon_file), "galera-bundle", node)
    assert "refused" in str(info.value) and "fix:" in str(info.value)


def test_refused_in_maintenance_mode_and_for_unknown_bundle() -> None:
    maintenance = cib.set_cluster_property(config(), "maintenance-mode", "true").new_cib
    with pytest.raises(RestartRefusedError, match="maintenance mode"):
        restart.check_restartable(maintenance, mon(), "galera-bundle", "controller-1")
    with pytest.raises(BundleNotFoundError):
        restart.check_restartable(config(), mon(), "nope-bundle", "controller-1")


def test_a_refusal_is_of_the_refused_family() -> None:
    from pcmkimg.errors import Refused

    assert RestartRefusedError.family is Refused
    assert RestartNoQuorumError.family is Refused
    assert RestartRefusedError is RestartRefusedError


# --------------------------------------------------------------------------- new_failures


def galera_replica_1() -> tuple[cib.Bundle, cib.ReplicaStatus]:
    replica = mon("mon-ok.xml").replica_on("galera-bundle", "controller-1")
    assert replica is not None
    return cib.bundle(config(), "galera-bundle"), replica


def test_only_new_failures_of_this_replica_count() -> None:
    # A failure that was there before the restart is not new.
    bundle, replica = galera_replica_1()
    ok = mon("mon-ok.xml").failures
    failed = mon("mon-failed-start.xml").failures
    assert restart.new_failures(failed, failed, bundle, replica, "controller-1") == []
    fresh = restart.new_failures(ok, failed, bundle, replica, "controller-1")
    assert [f.op_key for f in fresh] == ["galera-bundle-podman-1_start_0"]
    assert restart.new_failures((), failed, bundle, replica, "controller-0") == []


def test_a_failure_is_identified_by_its_call_and_last_change() -> None:
    (failure,) = mon("mon-failed-start.xml").failures
    assert (failure.call_id, failure.last_rc_change) == ("2", "2026-11-30 04:44:59Z")
    assert failure.key == (
        "galera-bundle-podman-1_start_0",
        "controller-1",
        "2",
        "2026-11-30 04:44:59Z",
    )
    bundle, replica = galera_replica_1()
    # The same operation failing again (a new call) is a new failure; the same call is not.
    again = replace(failure, call_id="7", last_rc_change="2026-11-30 05:00:00Z")
    assert restart.new_failures([failure], [failure, again], bundle, replica, "controller-1") == [
        again
    ]


def test_new_failures_do_not_depend_on_the_order() -> None:
    bundle, replica = galera_replica_1()
    (start,) = mon("mon-failed-start.xml").failures
    degraded = mon("mon-degraded.xml").failures
    other = replace(start, node="controller-2", call_id="9")
    inner = replace(
        start,
        op_key="galera_monitor_10000",
        resource="galera",
        node="galera-bundle-1",
        call_id="3",
    )
    after = [*degraded, other, start, inner]
    expected = {start, inner}
    for order in (after, list(reversed(after)), after[1:] + after[:1]):
        found = restart.new_failures(degraded, order, bundle, replica, "controller-1")
        assert set(found) == expected and len(found) == 2
        before = [other, *reversed(degraded)]
        assert set(restart.new_failures(before, order, bundle, replica, "controller-1")) == expected
