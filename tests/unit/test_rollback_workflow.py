"""``pcmkimg rollback`` (workflows.rollback) around its node step, with fakes, no cluster.

The node step itself (retag, restart, verify, roll back) is the update's and is tested in
``test_execute_paths``; here: what the rollback does before it (leftover bans, the lease) and
how it reports a failure of it.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from pcmkimg.adapters import lease as leasing
from pcmkimg.adapters import pacemaker, signals
from pcmkimg.adapters import podman as images
from pcmkimg.adapters.config import Config
from pcmkimg.adapters.journal import Journal, history
from pcmkimg.core import cib, plan
from pcmkimg.core.images import HOLD_TAG, TagOp
from pcmkimg.core.reference import Reference, parse
from pcmkimg.core.store import StorePort
from pcmkimg.errors import PcmkimgError
from pcmkimg.workflows import rollback as rb
from pcmkimg.workflows import update as execute
from tests import fixtures

NODE = "controller-1"
BUNDLE_ID = "galera-bundle"
SCHEME = Config().scheme
FLOATING = "cluster.common.tag/mariadb:pcmklatest"
BACK = "cluster.common.tag/mariadb:pcmkprevious"
HOLD = f"cluster.common.tag/mariadb:{HOLD_TAG}"
LEFT_BAN = f"cli-ban-{BUNDLE_ID}-on-{NODE}"
CURRENT_ID = "c" * 64
PREVIOUS_ID = "p" * 64
RUNNER = pacemaker.Runner()
TIMEOUT = 7.0


def key(name: Reference | str) -> str:
    return str(parse(str(name)))


class Store(StorePort):
    """A node's store over a dict (names -> image IDs): the port's own retag/restore rules
    on its primitives. ``crash_after`` tag operations, the process "dies" (a BaseException
    nothing catches, as a kill -9 would end it)."""

    def __init__(self, names: dict[str, str]) -> None:
        self.node = NODE
        self.scheme = SCHEME
        self.names = {key(n): i for n, i in names.items()}
        self.ops = 0
        self.crash_after: int | None = None

    def _op(self) -> None:
        if self.crash_after is not None and self.ops == self.crash_after:
            raise SystemExit("killed")
        self.ops += 1

    def inspect(self, name: str) -> images.ImageInfo | None:
        image_id = name if name in self.names.values() else self.names.get(key(name))
        if image_id is None:
            return None
        named = tuple(sorted(n for n, i in self.names.items() if i == image_id))
        return images.ImageInfo(image_id, None, (), named)

    def tag(self, image_id: str, ref: Reference) -> None:
        self._op()
        self.names[key(ref)] = image_id

    def untag(self, image_id: str, ref: Reference) -> None:
        self._op()
        assert self.names.pop(key(ref)) == image_id

    def images(self) -> tuple[images.ImageInfo, ...]:
        raise AssertionError("not used")

    def containers(self, *, running_only: bool = False) -> tuple[images.Container, ...]:
        raise AssertionError("not used")

    def remove(self, image: images.ImageInfo) -> bool:
        raise AssertionError("not used")


class Fakes:
    """The cluster, the lease and the node step, as events in order."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, bans: list[str]) -> None:
        self.events: list[tuple[str, ...]] = []
        self.bans = bans
        self.failure: PcmkimgError | None = None
        self.config = fixtures.cib("base.xml")
        self.mon = fixtures.mon("mon-ok.xml")
        monkeypatch.setattr(pacemaker, "read_cluster", self.read_cluster)
        monkeypatch.setattr(pacemaker, "remove_own_bans", self.remove_own_bans)
        monkeypatch.setattr(pacemaker, "settle", self.settle)
        monkeypatch.setattr(leasing, "held", self.held)
        fake_step = self.update_node
        monkeypatch.setattr(
            execute.Updater, "update_node", lambda updater, *args: fake_step(updater, *args)
        )

    def read_cluster(self, runner: pacemaker.Runner) -> plan.Cluster:
        assert runner is RUNNER
        self.events.append(("read",))
        return plan.Cluster(self.config, self.mon, cib.cluster_status(self.mon))

    def remove_own_bans(
        self, runner: pacemaker.Runner, resource: str, config: cib.Element | None = None
    ) -> list[str]:
        assert (runner, resource, config) == (RUNNER, BUNDLE_ID, self.config)
        self.events.append(("remove_own_bans",))
        removed, self.bans = self.bans, []
        return removed

    def settle(self, runner: pacemaker.Runner, timeout: float) -> float:
        assert (runner, timeout) == (RUNNER, TIMEOUT)
        self.events.append(("settle",))
        return 0.0

    @contextlib.contextmanager
    def held(self, runner: pacemaker.Runner, **_: object) -> Iterator[None]:
        self.events.append(("lease",))
        try:
            yield None
        finally:
            self.events.append(("release",))

    def update_node(  # type: ignore[no-untyped-def]
        self, updater, bundle, res, ref, target_id, restart
    ) -> execute.NodeResult:
        """The update's node step, as far as the rollback sees it: done, or UpdateFailed
        caused by ``failure`` (with the fix the update gives it)."""
        self.events.append(("update_node", target_id[:1]))
        assert updater.baseline is not None
        if self.failure is None:
            updater.stores.get(res.node).retag(bundle.ref, target_id)
            res.result = "ok"
            return res
        try:
            raise self.failure
        except PcmkimgError as exc:
            started = isinstance(exc, pacemaker.RestartFailedError)
            raise execute.UpdateFailed(
                f"update of mariadb failed on {NODE} and was rolled back: {exc.message}",
                "REF does not run here: ..." if started else exc.fix,
            ) from exc


def run(tmp_path: Path, store: Store) -> tuple[plan.BundleRef, execute.NodeResult, str]:
    stores = images.Stores(Config(), None, opened={NODE: store})  # type: ignore[dict-item]
    jrnl = Journal(tmp_path / "journal.jsonl", "run-1")
    return rb.rollback(RUNNER, stores, jrnl, SCHEME, "mariadb", NODE, TIMEOUT, lambda _: None)


def before_swap() -> Store:
    return Store({FLOATING: CURRENT_ID, BACK: PREVIOUS_ID, "reg.example.com/m:1": CURRENT_ID})


# --------------------------------------------------------------------------- leftover bans


def test_a_ban_a_killed_restart_left_is_removed_under_the_lease_and_the_cluster_settles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fakes = Fakes(monkeypatch, [LEFT_BAN])
    fakes.failure = pacemaker.RestartFailedError("stop it here", "x")  # the node step: no retag
    with pytest.raises(execute.UpdateFailed):
        run(tmp_path, before_swap())
    assert fakes.events == [
        ("read",),  # find the bundle, before the lease
        ("lease",),
        ("read",),  # under the lease: the leftover bans of this read
        ("remove_own_bans",),
        ("settle",),
        ("read",),  # the baseline, once settled
        ("update_node", "p"),
        ("release",),
    ]
    leftover = [e for e in history(tmp_path) if e["event"] == "leftover-bans"]
    assert [e["removed"] for e in leftover] == [[LEFT_BAN]]


def test_without_a_leftover_ban_nothing_is_removed_and_nothing_waits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fakes = Fakes(monkeypatch, [])
    fakes.failure = pacemaker.RestartFailedError("stop it here", "x")
    with pytest.raises(execute.UpdateFailed):
        run(tmp_path, before_swap())
    assert ("settle",) not in fakes.events
    assert fakes.events.index(("remove_own_bans",)) > fakes.events.index(("lease",))


# --------------------------------------------------------------------------- the failure's fix


def test_a_failed_start_says_the_previous_image_does_not_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fakes = Fakes(monkeypatch, [])
    fakes.failure = pacemaker.RestartFailedError("start of the replica failed", "look at it")
    with pytest.raises(execute.UpdateFailed) as info:
        run(tmp_path, before_swap())
    assert info.value.message.endswith(
        f"{NODE} was put back on the image it ran before: start of the replica failed"
    )
    assert info.value.fix.startswith(f"the image under {BACK} does not start on {NODE}")


def test_any_other_failure_keeps_its_own_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fakes = Fakes(monkeypatch, [])
    fakes.failure = pacemaker.PacemakerTimeoutError(
        "the cluster did not settle within 7s", "check the cluster with crm_mon"
    )
    with pytest.raises(execute.UpdateFailed) as info:
        run(tmp_path, before_swap())
    assert "does not start" not in info.value.fix
    assert info.value.fix == "check the cluster with crm_mon"
    assert info.value.message.endswith(": the cluster did not settle within 7s")


# --------------------------------------------------------------------------- an interrupted swap


def swap_stopped_after(ops: int) -> Store:
    """The store after a rollback's swap (floating to the previous image, whose only name is
    the rollback name) stopped after ``ops`` of its four tag operations (kill -9)."""
    store = before_swap()
    store.crash_after = ops
    with pytest.raises(SystemExit):
        store.retag(FLOATING, PREVIOUS_ID)
    store.crash_after = None
    return store


def journal_says(tmp_path: Path, *events: tuple[str, dict[str, object]]) -> None:
    earlier = Journal(tmp_path / "journal.jsonl", "run-0")
    for event, fields in events:
        earlier.record(event, service="mariadb", node=NODE, **fields)


def test_the_swap_has_four_tag_operations_and_the_second_leaves_the_image_held_only() -> None:
    store = swap_stopped_after(2)
    assert store.names == {
        key(FLOATING): CURRENT_ID,
        key(BACK): CURRENT_ID,
        key(HOLD): PREVIOUS_ID,  # its only name
        "reg.example.com/m:1": CURRENT_ID,
    }


@pytest.mark.parametrize("ops", [1, 2, 3])
def test_a_rerun_after_a_swap_killed_half_way_does_the_rollback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ops: int
) -> None:
    store = swap_stopped_after(ops)
    journal_says(tmp_path, ("rollback", {"to": PREVIOUS_ID}))
    fakes = Fakes(monkeypatch, [])
    run(tmp_path, store)
    assert ("update_node", "p") in fakes.events
    assert store.names == {
        key(FLOATING): PREVIOUS_ID,
        key(BACK): CURRENT_ID,
        "reg.example.com/m:1": CURRENT_ID,
    }


@pytest.mark.parametrize(
    "journal",
    [
        [],
        [("rollback", {"to": PREVIOUS_ID}), ("retag", {"after": PREVIOUS_ID})],
        [("rollback", {"to": CURRENT_ID})],
    ],
    ids=["no-journal", "retag-journaled", "another-image"],
)
def test_a_hold_name_the_journal_does_not_explain_is_refused_and_nothing_moves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, journal: list
) -> None:
    store = swap_stopped_after(2)
    journal_says(tmp_path, *journal)
    before = dict(store.names)
    fakes = Fakes(monkeypatch, [])
    with pytest.raises(plan.PreflightFailed) as info:
        run(tmp_path, store)
    assert f"{HOLD} names {PREVIOUS_ID[:12]} on {NODE}" in info.value.message
    assert f"podman untag {PREVIOUS_ID[:12]} {HOLD}" in info.value.fix
    assert store.names == before
    assert not [e for e in fakes.events if e[0] == "update_node"]


def test_the_store_makes_a_tag_plan_whole_before_a_signal_takes_effect() -> None:
    store = images.Store.__new__(images.Store)
    store.node = NODE
    made: list[str] = []

    def tag(image_id: str, ref: Reference) -> None:
        if not made:
            os.kill(os.getpid(), signal.SIGTERM)
        made.append(f"tag {ref.tag}")

    def untag(image_id: str, ref: Reference) -> None:
        made.append(f"untag {ref.tag}")

    store.tag = tag  # type: ignore[method-assign]
    store.untag = untag  # type: ignore[method-assign]
    back, floating, hold = parse(BACK), parse(FLOATING), parse(HOLD)
    swap = [
        TagOp("tag", PREVIOUS_ID, hold),
        TagOp("tag", CURRENT_ID, back),
        TagOp("tag", PREVIOUS_ID, floating),
        TagOp("untag", PREVIOUS_ID, hold, last_ok=True),
    ]
    with signals.sigterm_raises(), pytest.raises(signals.Terminated):
        store.apply(swap)
    assert made == ["tag pcmkhold", "tag pcmkprevious", "tag pcmklatest", "untag pcmkhold"]
