"""``guard add`` and ``guard remove`` (pcmkimg.workflows.guard) with the Pacemaker adapter
replaced: which CIB changes they make, and under which lease."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from pcmkimg.adapters import lease, pacemaker
from pcmkimg.core import cib as C
from pcmkimg.core import naming, plan
from pcmkimg.workflows import guard
from tests import fixtures

BUNDLE = "haproxy-bundle"
FLOATING = "cluster.common.tag/haproxy:pcmklatest"


class Recorder:
    """The CIB in memory; every change and wait, and whether the update lease was held."""

    def __init__(self) -> None:
        self.cib = fixtures.cib("base.xml")
        self.leased = False
        self.events: list[tuple[str, bool]] = []

    @contextmanager
    def held(self, runner: object, *args: object, **kw: object) -> Iterator[None]:
        assert not self.leased, "the lease taken twice"
        self.leased = True
        try:
            yield None
        finally:
            self.leased = False

    def update_cib(self, runner: object, edit, **kw: object) -> C.CibChange:  # type: ignore[no-untyped-def]
        change = edit(self.cib)
        if not change.empty:
            self.cib = change.new_cib
            self.events.append((change.description, self.leased))
        return change

    def wait(self, runner: object, timeout: float) -> None:
        self.events.append(("wait", self.leased))


@pytest.fixture
def rec(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    r = Recorder()
    monkeypatch.setattr(lease, "held", r.held)
    monkeypatch.setattr(pacemaker, "query_cib", lambda runner: r.cib)
    monkeypatch.setattr(pacemaker, "update_cib", r.update_cib)
    monkeypatch.setattr(pacemaker, "wait", r.wait)
    monkeypatch.setattr(guard, "missing_on", lambda runner, bundle: [])
    return r


def test_guard_add_and_remove_change_the_cib_only_under_the_update_lease(rec: Recorder) -> None:
    """Issue 12.3: like every other command that changes the CIB or a store."""
    runner = object()
    changed, _ = guard.add(runner, BUNDLE, None, naming.Scheme(), 60, lambda text: None)  # type: ignore[arg-type]
    assert changed
    removed = guard.remove(runner, BUNDLE)  # type: ignore[arg-type]
    assert not removed.empty
    assert len(rec.events) >= 3
    assert [what for what, leased in rec.events if not leased] == []
    assert C.bundle(rec.cib, BUNDLE).guard is None


def test_a_refused_guard_add_undoes_its_clone_under_the_lease(
    rec: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(guard, "missing_on", lambda runner, bundle: ["controller-1"])
    monkeypatch.setattr(pacemaker, "cleanup", lambda runner, rsc, node: None)
    with pytest.raises(plan.PreflightFailed):
        guard.add(object(), BUNDLE, None, naming.Scheme(), 60, lambda text: None)  # type: ignore[arg-type]
    assert C.bundle(rec.cib, BUNDLE).guard is None
    assert [what for what, leased in rec.events if not leased] == []


def test_a_renamed_guard_that_cannot_start_keeps_its_former_name_wired(
    rec: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The new name is missing on a node: the guard gets its former name back and is wired
    again as it was, after it runs again (so that no replica restarts)."""
    rec.cib = C.add_guard(rec.cib, BUNDLE, FLOATING).new_cib
    answers = iter([["controller-1"], []])  # the new name fails there; the former one runs
    monkeypatch.setattr(guard, "missing_on", lambda runner, bundle: next(answers))
    cleaned: list[tuple[str, str]] = []
    monkeypatch.setattr(pacemaker, "cleanup", lambda runner, rsc, node: cleaned.append((rsc, node)))
    other = "cluster.common.tag/haproxy2:pcmklatest"
    with pytest.raises(plan.PreflightFailed) as refused:
        guard.add(object(), BUNDLE, other, naming.Scheme(), 60, lambda text: None)  # type: ignore[arg-type]
    assert f"the guard keeps {FLOATING}" in refused.value.message
    final = C.bundle(rec.cib, BUNDLE)
    assert final.guard is not None and final.guard.image == FLOATING and final.guard_wired
    kinds = [what.split()[0] for what, _ in rec.events]
    assert kinds == ["drop", "add", "wait", "add", "wait", "add"]
    assert cleaned == [(f"{BUNDLE}-guard", "controller-1")]  # else it stays off there


def test_the_dry_run_of_a_rename_prints_the_steps_that_restart_no_replica(rec: Recorder) -> None:
    rec.cib = C.add_guard(rec.cib, BUNDLE, FLOATING).new_cib
    other = "cluster.common.tag/haproxy2:pcmklatest"
    cmds = guard.dry_run(object(), BUNDLE, other, naming.Scheme())  # type: ignore[arg-type]
    ids = C.guard_ids(BUNDLE)
    assert cmds[:4] == [
        ["cibadmin", "--delete", "--xpath", f"//constraints/*[@id='{ids['order']}']"],
        ["cibadmin", "--delete", "--xpath", f"//constraints/*[@id='{ids['colocation']}']"],
        ["pcs", "resource", "update", ids["primitive"], f"image={other}"],
        ["crm_resource", "--wait"],
    ]
    assert [c[:3] for c in cmds[4:]] == [
        ["pcs", "resource", "bundle"],
        ["pcs", "constraint", "order"],
        ["pcs", "constraint", "colocation"],
    ]


def test_nothing_to_do_takes_no_lease_and_moves_nothing(
    rec: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """guard remove without a guard, guard add of a guard wired as asked, and a bundle that
    does not exist: answered from the CIB as read; no lease is taken, the CIB does not move
    (taking the lease writes it twice)."""
    taken: list[str] = []

    @contextmanager
    def held(runner: object, *args: object, **kw: object) -> Iterator[None]:
        taken.append("lease")
        yield None

    monkeypatch.setattr(lease, "held", held)
    runner = object()
    assert guard.remove(runner, BUNDLE).empty  # type: ignore[arg-type]
    with pytest.raises(C.BundleNotFoundError):
        guard.add(runner, "no-such-bundle", None, naming.Scheme(), 60, lambda text: None)  # type: ignore[arg-type]
    assert taken == []
    guard.add(runner, BUNDLE, None, naming.Scheme(), 60, lambda text: None)  # type: ignore[arg-type]
    assert taken == ["lease"]
    wired = rec.cib
    assert guard.add(runner, BUNDLE, None, naming.Scheme(), 60, lambda text: None) == (  # type: ignore[arg-type]
        False,
        "",
    )
    assert taken == ["lease"] and rec.cib is wired
