"""``pcmkimg update`` in cluster configurations other than the sandbox's defaults (issue 18,
item 8, "Live, on the sandbox"), each on the session's sandbox cluster:

- ``resource-stickiness`` 0 (Pacemaker's default; the sandbox runs INFINITY): ``update --all``
  of a 3-of-3 bundle restarts each node's replica once, in place, and no other bundle's; the
  same for the promotable bundle, whose promoted count is kept;
- a failing start on a 2-of-3 bundle: exit 6, the replica back in place on the previous image,
  the spare node untouched (its floating name not moved), no ban, no lease;
- the cluster's ``maintenance-mode=true``: refused at preflight (exit 3, one error line naming
  maintenance mode), nothing retagged anywhere, no ``retag`` in the journal;
- a release (issue 20) of THREE, PAIR and DEP (a third bundle, ordered after THREE, for that
  test alone): each replica restarted exactly once, never more than one replica of a bundle
  down; a broken image for one bundle puts the failed node back whole; a release killed
  (SIGKILL, SIGTERM) at seeded moments leaves nothing past its lifetime and its re-run
  converges.

Two guarded bundles are shared by the module: THREE (3 replicas) and PAIR (2 replicas on 3
nodes), both on ``ns1/svc:1.0``; each is the "other bundle" that must not move while the
other one is updated. Every setting a test changes (stickiness, maintenance mode) is put back
in a ``finally``, and the module's teardown puts them back once more, removes any ban of its
bundles and the lease, and deletes the bundles.
"""

from __future__ import annotations

import contextlib
import json
import random
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import pytest
from lxml import etree

from pcmkimg.adapters import pacemaker as pm
from pcmkimg.core import cib, restart
from pcmkimg.core import commands as cmd
from tests.integration import test_fault_injection_live as faults
from tests.sandbox.cluster import SAFE_PARSER, Cluster, wait_idle
from tests.sandbox.fixtures import Sandbox
from tests.sandbox.polling import Polling
from tests.sandbox.proc import SandboxError
from tests.sandbox.registry import stateful_missing
from tests.sandbox.require import need

pytestmark = pytest.mark.timeout(600)

ON = "controller-0"  # where the operator runs pcmkimg

THREE = "cfgthree-bundle"
THREE_SERVICE = "cfgthree"
THREE_FLOATING = "cluster.common.tag/cfgthree:pcmklatest"

PAIR = "cfgpair-bundle"
PAIR_SERVICE = "cfgpair"
PAIR_FLOATING = "cluster.common.tag/cfgpair:pcmklatest"

DEP = "cfgdep-bundle"  # ordered after THREE (interleaved clones): the release test's only
DEP_SERVICE = "cfgdep"
DEP_FLOATING = "cluster.common.tag/cfgdep:pcmklatest"

PROMOTABLE = "cfgstateful-bundle"
PROMOTABLE_SERVICE = "cfgstateful"
PROMOTABLE_FLOATING = "cluster.common.tag/cfgstateful:pcmklatest"

OLD = "ns1/svc:1.0"
NEW = "ns1/svc:1.1"
BROKEN = "ns1/svc:broken"  # its container exits 1 at once: every start fails

STICKINESS = ("--type", "rsc_defaults", "--name", "resource-stickiness")
MAINTENANCE = ("--type", "crm_config", "--name", "maintenance-mode")
LEASE_GET = ["crm_ticket", "--ticket", "pcmkimg-lease", "--get-attr", "lease"]
SANDBOX_STICKINESS = "INFINITY"  # what tests/sandbox/cluster.py seeds


@dataclass(frozen=True)
class Stack:
    sb: Sandbox
    cl: Cluster

    def ref(self, path: str) -> str:
        return self.sb.ref(path)

    def id_of(self, path: str) -> str:
        return self.sb.images[path].removeprefix("sha256:")


# --------------------------------------------------------------------------- observations


def floating_ids(cl: Cluster, floating: str) -> dict[str, str | None]:
    """Node -> the image ID behind ``floating`` there (None: it does not resolve)."""
    found: dict[str, str | None] = {}
    for node in cl.names:
        out = cl.podman(node, "image", "inspect", "--format", "{{.Id}}", floating, check=False)
        found[node] = out.stdout.strip() if out.returncode == 0 else None
    return found


def containers(cl: Cluster, bundle: str) -> dict[str, dict[str, tuple[str, str]]]:
    """Node -> {container name: (container ID, image ID)} of the bundle's running containers."""
    found: dict[str, dict[str, tuple[str, str]]] = {}
    for node in cl.names:
        out = cl.podman(node, "ps", "--format", "json")
        found[node] = {
            c["Names"][0]: (c["Id"], c["ImageID"])
            for c in json.loads(out.stdout or "[]")
            if c["Names"][0].startswith(f"{bundle}-podman-")
        }
    return found


def placement(cl: Cluster, bundle: str) -> dict[str, int]:
    """Node -> the replica number active there (crm_mon)."""
    return {r.node: r.index for r in cl.replicas(bundle) if r.active and r.node}


def promoted(cl: Cluster, bundle: str) -> list[str]:
    return sorted(r.node or "" for r in cl.replicas(bundle) if r.active and r.role == "Promoted")


def bans(cl: Cluster) -> list[str]:
    """Every ``cli-ban`` constraint in the CIB (``cibadmin --query --scope constraints``)."""
    out = cl.run(ON, ["cibadmin", "--query", "--scope", "constraints"])
    constraints = etree.fromstring(out.stdout.encode(), SAFE_PARSER)
    return sorted(
        str(c.get("id")) for c in constraints.iter() if str(c.get("id", "")).startswith("cli-ban")
    )


def attribute(cl: Cluster, what: Sequence[str]) -> str | None:
    """A cluster property or resource default (``crm_attribute --query``); None: not set."""
    out = cl.run(ON, ["crm_attribute", *what, "--query", "--quiet"], check=False)
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else None


def held_lease(cl: Cluster) -> str | None:
    """The update lease as an operator reads it (``crm_ticket``); None: not held."""
    out = cl.run(ON, LEASE_GET, check=False)
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else None


def journal(cl: Cluster) -> list[dict[str, Any]]:
    """The update journal of the node pcmkimg runs on (its lines that are JSON)."""
    path = cl.node(ON).dir / "var-lib-pcmkimg" / "journal.jsonl"
    if not path.exists():
        return []
    lines = []
    for line in path.read_text(errors="replace").splitlines():
        with contextlib.suppress(ValueError):
            lines.append(json.loads(line))
    return lines


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("pcmkimg: error: ")]


def observed(st: Stack, *bundles: str) -> dict[str, object]:
    """What the assertions look at, for the failure messages."""
    cl = st.cl
    seen: dict[str, object] = {}
    for bundle, floating in ((b, FLOATING_OF[b]) for b in bundles):
        seen[bundle] = {
            "placement": placement(cl, bundle),
            "floating": {n: (i or "")[:12] for n, i in floating_ids(cl, floating).items()},
            "running": {
                n: sorted(f"{name}:{img[:12]}" for name, (_, img) in c.items())
                for n, c in containers(cl, bundle).items()
            },
        }
    seen["bans"] = bans(cl)
    seen["lease"] = held_lease(cl)
    return seen


FLOATING_OF = {
    THREE: THREE_FLOATING,
    PAIR: PAIR_FLOATING,
    DEP: DEP_FLOATING,
    PROMOTABLE: PROMOTABLE_FLOATING,
}


@dataclass
class Sampler(Polling):
    """Samples in a thread, every ``interval`` s, each node's running containers of the
    bundles: per node, the (name, container ID) pairs in the order they were first seen
    (before the block and after it too)."""

    cl: Cluster
    bundles: Sequence[str]
    interval: float = 0.25
    seen: dict[str, dict[str, list[tuple[str, str]]]] = field(default_factory=dict)
    rounds: int = 0
    errors: list[str] = field(default_factory=list)
    before = True
    after = True

    def sample(self) -> None:
        for node in self.cl.names:
            try:
                out = self.cl.podman(node, "ps", "--format", "json")
                running = json.loads(out.stdout or "[]")
            except (SandboxError, subprocess.TimeoutExpired, ValueError) as exc:
                self.errors.append(str(exc))
                continue
            for bundle in self.bundles:
                history = self.seen.setdefault(bundle, {}).setdefault(node, [])
                for c in running:
                    item = (c["Names"][0], c["Id"])
                    if item[0].startswith(f"{bundle}-podman-") and item not in history:
                        history.append(item)
        self.rounds += 1


@dataclass
class Down(Polling):
    """Samples ``crm_mon`` in a thread every ``interval`` s: per bundle, the fewest replicas
    seen active at once (one crm_mon is one moment of the whole cluster), and per bundle and
    node how many times its replica there was seen go down (active, then not)."""

    cl: Cluster
    bundles: Sequence[str]
    interval: float = 0.1
    fewest: dict[str, int] = field(default_factory=dict)
    stops: dict[str, dict[str, int]] = field(default_factory=dict)
    rounds: int = 0
    _up: dict[tuple[str, str], bool] = field(default_factory=dict)

    def sample(self) -> None:
        try:
            mon = self.cl.crm_mon()
        except (SandboxError, subprocess.TimeoutExpired, etree.XMLSyntaxError):
            return
        for bundle in self.bundles:
            replicas = self.cl.replicas(bundle, mon)
            active = sum(r.active for r in replicas)
            self.fewest[bundle] = min(self.fewest.get(bundle, active), active)
            up = {r.node for r in replicas if r.active and r.node}
            for node in self.cl.names:
                was = self._up.get((bundle, node))
                if was and node not in up:
                    per = self.stops.setdefault(bundle, {})
                    per[node] = per.get(node, 0) + 1
                self._up[(bundle, node)] = node in up
        self.rounds += 1


# --------------------------------------------------------------------------- settings


@contextlib.contextmanager
def stickiness(cl: Cluster, value: str) -> Iterator[None]:
    """``resource-stickiness`` of rsc_defaults set to ``value``; the sandbox's INFINITY back
    afterwards, whatever happens; the cluster idle at both ends."""
    try:
        cl.run(ON, ["crm_attribute", *STICKINESS, "--update", value])
        assert attribute(cl, STICKINESS) == value
        wait_idle(cl)
        yield
    finally:
        cl.run(ON, ["crm_attribute", *STICKINESS, "--update", SANDBOX_STICKINESS])
        wait_idle(cl)


@contextlib.contextmanager
def maintenance_mode(cl: Cluster) -> Iterator[None]:
    """The cluster property ``maintenance-mode=true``; deleted afterwards, whatever happens."""
    try:
        cl.run(ON, ["crm_attribute", *MAINTENANCE, "--update", "true"])
        assert attribute(cl, MAINTENANCE) == "true"
        wait_idle(cl)
        yield
    finally:
        cl.run(ON, ["crm_attribute", *MAINTENANCE, "--delete"], check=False)
        wait_idle(cl)


def heal(st: Stack, bundle: str, ref: str | None = None) -> None:
    """Undo what a failed update of ``bundle`` may have left: its bans, the lease (no pcmkimg
    runs now), a floating name moved off ``ref`` on a node where no replica of it runs, its
    failed operations (and its guard's)."""
    cl = st.cl
    for ban in bans(cl):
        if ban.startswith(f"cli-ban-{bundle}-on-"):
            node = ban.removeprefix(f"cli-ban-{bundle}-on-")
            cl.run(ON, ["crm_resource", "--clear", "--resource", bundle, "--node", node])
    cl.run(ON, cmd.delete_ticket("pcmkimg-lease"), check=False)
    floating = FLOATING_OF[bundle]
    running = containers(cl, bundle)
    for node, image in floating_ids(cl, floating).items():
        if ref is not None and image != st.id_of(ref) and not running[node]:
            cl.podman(node, "pull", "-q", st.ref(ref))
            cl.podman(node, "tag", st.ref(ref), floating)
    for resource in (bundle, f"{bundle}-guard-clone"):
        cl.run(ON, ["crm_resource", "--cleanup", "--resource", resource], check=False)
    wait_idle(cl)


def settled(st: Stack) -> None:
    """Both shared bundles fully up (3 and 2 active replicas), no ban, no lease."""
    cl = st.cl
    wait_idle(cl)
    assert sorted(placement(cl, THREE)) == cl.names, observed(st, THREE, PAIR)
    assert len(placement(cl, PAIR)) == 2, observed(st, THREE, PAIR)
    assert bans(cl) == [] and held_lease(cl) is None, observed(st, THREE, PAIR)


def other_image(st: Stack, floating: str, node: str) -> str:
    """A test image (1.0 or 1.1) other than the one behind ``floating`` on ``node``."""
    return NEW if floating_ids(st.cl, floating)[node] == st.id_of(OLD) else OLD


def run_pcmkimg(st: Stack, *args: str, timeout: float = 540) -> subprocess.CompletedProcess[str]:
    out = st.cl.pcmkimg(ON, *args, check=False, timeout=timeout)
    return out  # type: ignore[no-any-return]


def said(out: subprocess.CompletedProcess[str]) -> str:
    return f"exit {out.returncode}; stderr: {out.stderr[-3000:]}; stdout: {out.stdout[-2000:]}"


# --------------------------------------------------------------------------- the bundles


@pytest.fixture(scope="module")
def stack(cluster_sandbox: Sandbox) -> Iterator[Stack]:
    sb = cluster_sandbox
    cl = sb.cluster
    assert cl is not None
    st = Stack(sb, cl)
    try:
        with cl.guarded_bundle(THREE, THREE_FLOATING, sb.ref(OLD)):
            with cl.guarded_bundle(PAIR, PAIR_FLOATING, sb.ref(OLD), replicas=2):
                try:
                    yield st
                finally:
                    # Once more, whatever a test left: the sandbox's settings, no ban, no lease.
                    cl.run(ON, ["crm_attribute", *MAINTENANCE, "--delete"], check=False)
                    cl.run(ON, ["crm_attribute", *STICKINESS, "--update", SANDBOX_STICKINESS])
                    for bundle in (THREE, PAIR):
                        heal(st, bundle, OLD)
    finally:
        for node in cl.names:
            cl.run(node, ["rm", "-f", "/var/lib/pcmkimg/journal.jsonl"], check=False)


# =========================================================================== the tests


def check_each_replica_restarted_once_in_place(
    st: Stack,
    bundle: str,
    new_id: str,
    where: dict[str, int],
    before: dict[str, dict[str, tuple[str, str]]],
    sampler: Sampler,
    mark: dict[str, int],
) -> None:
    """Every replica of ``bundle`` is on the node where it was (same replica number), in a new
    container on ``new_id``, and the sampler saw exactly two containers per node: the old and
    the new one, both of that replica."""
    cl = st.cl

    def why() -> str:
        lines = "\n  ".join(scheduled(cl, mark, bundle))
        return (
            f"\nbefore: {where}\nseen: {sampler.seen[bundle]}\nafter: {observed(st, bundle)}"
            f"\nthe scheduler's actions on {bundle}:\n  {lines}"
        )

    assert placement(cl, bundle) == where, f"{bundle}: a replica moved{why()}"
    after = containers(cl, bundle)
    for node, index in where.items():
        name = f"{bundle}-podman-{index}"
        assert list(before[node]) == [name], f"{node}: {before[node]}{why()}"
        assert list(after[node]) == [name], f"{node}: not {name} after{why()}"
        (old_cid, _), (new_cid, image) = before[node][name], after[node][name]
        assert new_cid != old_cid, f"{node}: {name} was not restarted{why()}"
        assert image == new_id, f"{node}: {name} runs {image[:12]}, not {new_id[:12]}{why()}"
        history = sampler.seen[bundle][node]
        assert history == [(name, old_cid), (name, new_cid)], (
            f"{node}: not exactly one restart in place{why()}"
        )
    for node in set(cl.names) - set(where):
        assert sampler.seen[bundle][node] == [], f"{node}: {bundle} ran there{why()}"


def check_untouched(
    st: Stack,
    bundle: str,
    before: dict[str, dict[str, tuple[str, str]]],
    sampler: Sampler | None = None,
    mark: dict[str, int] | None = None,
) -> None:
    """No container of ``bundle`` was restarted (nor one started anywhere else). ``mark``: the
    :func:`log_mark` before the update, for the scheduler's actions in the message."""
    cl = st.cl

    def why() -> str:
        lines = "\n  ".join(scheduled(cl, mark, bundle) if mark is not None else [])
        seen = sampler.seen[bundle] if sampler is not None else None
        return (
            f"\nbefore: {before}\nseen: {seen}\nafter: {observed(st, bundle)}"
            f"\nthe scheduler's actions on {bundle}:\n  {lines}"
        )

    if sampler is not None:
        for node in cl.names:
            seen = sampler.seen[bundle][node]
            assert seen == [(name, cid) for name, (cid, _) in before[node].items()], (
                f"{bundle} on {node}: another container came and went{why()}"
            )
    assert containers(cl, bundle) == before, f"{bundle}: a container was restarted{why()}"


def log_mark(cl: Cluster) -> dict[str, int]:
    """Where each node's pacemaker.log ends now."""
    mark = {}
    for node in cl.names:
        path = cl.node(node).dir / "log-pacemaker" / "pacemaker.log"
        mark[node] = path.stat().st_size if path.exists() else 0
    return mark


def scheduled(cl: Cluster, mark: dict[str, int], bundle: str) -> list[str]:
    """The scheduler's planned actions on ``bundle``'s resources logged since ``mark`` (on the
    DC of the time, whichever node that was): why a replica was restarted or moved."""
    found = []
    for node in cl.names:
        path = cl.node(node).dir / "log-pacemaker" / "pacemaker.log"
        if not path.exists():
            continue
        with path.open("rb") as f:
            f.seek(mark.get(node, 0))
            text = f.read().decode(errors="replace")
        for line in text.splitlines():
            if "Actions:" in line and bundle in line and "Leave" not in line:
                found.append(f"{node}: {' '.join(line.split('Actions:', 1)[1].split())}")
    return found


def test_stickiness_zero_update_all_restarts_each_replica_once_in_place(stack: Stack) -> None:
    """3 of 3 at ``resource-stickiness=0``: every replica stays on its node (its replica
    number there unchanged), each node's container restarts exactly once, and the PAIR
    bundle's containers never restart."""
    st, cl = stack, stack.cl
    settled(st)
    with stickiness(cl, "0"):
        settled(st)  # stickiness 0 may have moved something: the baseline is after it
        where = placement(cl, THREE)
        three, pair = containers(cl, THREE), containers(cl, PAIR)
        new = other_image(st, THREE_FLOATING, ON)
        mark = log_mark(cl)
        with Sampler(cl, (THREE, PAIR)) as sampler:
            out = run_pcmkimg(
                st, "--json", "update", THREE_SERVICE, "--image", st.ref(new), "--all"
            )
        assert out.returncode == 0, said(out)
        assert sampler.rounds >= 5, (sampler.rounds, sampler.errors)
        report = json.loads(out.stdout)["report"]
        assert sorted((n["node"], n["result"]) for n in report["nodes"]) == [
            (n, "ok") for n in cl.names
        ], report["nodes"]
        wait_idle(cl)
        check_each_replica_restarted_once_in_place(
            st, THREE, st.id_of(new), where, three, sampler, mark
        )
        check_untouched(st, PAIR, pair, sampler, mark)
        assert set(floating_ids(cl, THREE_FLOATING).values()) == {st.id_of(new)}
        assert bans(cl) == [] and held_lease(cl) is None


def test_stickiness_zero_promotable_update_all_keeps_places_and_the_promoted_count(
    stack: Stack,
) -> None:
    """The promotable bundle (Stateful inside, promoted-max 1) at ``resource-stickiness=0``:
    the same, and one promoted instance when the update returns."""
    missing = stateful_missing()
    need(not missing, f"the Stateful test images need {', '.join(missing)}")
    st, cl = stack, stack.cl
    settled(st)
    ids = cl.stateful_images()
    with cl.promotable_bundle(PROMOTABLE, PROMOTABLE_FLOATING):
        with stickiness(cl, "0"):
            cl.wait_promoted(PROMOTABLE, 3, timeout=120)
            wait_idle(cl)
            where = placement(cl, PROMOTABLE)
            assert sorted(where) == cl.names, observed(st, PROMOTABLE)
            assert len(promoted(cl, PROMOTABLE)) == 1
            before = containers(cl, PROMOTABLE)
            three, pair = containers(cl, THREE), containers(cl, PAIR)
            mark = log_mark(cl)
            with Sampler(cl, (PROMOTABLE, THREE, PAIR)) as sampler:
                out = run_pcmkimg(
                    st,
                    "--json",
                    "update",
                    PROMOTABLE_SERVICE,
                    "--image",
                    st.ref("ns1/stateful:1.1"),
                    "--all",
                )
            assert out.returncode == 0, said(out)
            # The update checks the promoted count before it returns: no wait here.
            assert len(promoted(cl, PROMOTABLE)) == 1, observed(st, PROMOTABLE)
            wait_idle(cl)
            new_id = ids["ns1/stateful:1.1"].removeprefix("sha256:")
            check_each_replica_restarted_once_in_place(
                st, PROMOTABLE, new_id, where, before, sampler, mark
            )
            check_untouched(st, THREE, three, sampler, mark)
            check_untouched(st, PAIR, pair, sampler, mark)
            assert len(promoted(cl, PROMOTABLE)) == 1
            assert bans(cl) == [] and held_lease(cl) is None


def test_a_failed_start_on_two_of_three_rolls_back_in_place_and_spares_the_free_node(
    stack: Stack,
) -> None:
    """PAIR (2 replicas, 3 nodes) to an image whose container fails to start: exit 6; the
    replica is back on its own node on the previous image; the spare node's floating name still
    names the old image (never retagged); no ``cli-ban`` and no lease left; THREE untouched."""
    st, cl = stack, stack.cl
    settled(st)
    where = placement(cl, PAIR)
    (spare,) = set(cl.names) - set(where)
    floating = floating_ids(cl, PAIR_FLOATING)
    assert set(floating.values()) == {st.id_of(OLD)}, floating
    pair, three = containers(cl, PAIR), containers(cl, THREE)
    mark = log_mark(cl)
    try:
        with Sampler(cl, (PAIR,)) as sampler:
            out = run_pcmkimg(
                st, "--json", "update", PAIR_SERVICE, "--image", st.ref(BROKEN), "--all"
            )
        wait_idle(cl)
        try:
            results = [(n["node"], n["result"]) for n in json.loads(out.stdout)["report"]["nodes"]]
        except (ValueError, KeyError, TypeError):
            results = []
        lines = "\n  ".join(scheduled(cl, mark, PAIR))
        summary = (
            f"{said(out)}\nreport: {results}\nspare node: {spare}; before: {where}, "
            f"{ {n: (i or '')[:12] for n, i in floating.items()} }\nafter: {observed(st, PAIR)}"
            f"\nseen: {sampler.seen[PAIR]}\nthe scheduler's actions on {PAIR}:\n  {lines}"
        )
        assert out.returncode == 6, summary
        assert placement(cl, PAIR) == where, f"a replica moved\n{summary}"
        after = containers(cl, PAIR)
        for node, index in where.items():
            name = f"{PAIR}-podman-{index}"
            assert list(after[node]) == [name], f"{node}: not {name}\n{summary}"
            assert after[node][name][1] == st.id_of(OLD), f"{node}: not the old image\n{summary}"
        assert after[spare] == {}, f"a replica on the spare node\n{summary}"
        assert sampler.seen[PAIR][spare] == [], f"a replica ran on the spare node\n{summary}"
        # The spare node untouched: the plan did not retag it. Nor any other node, at the end.
        assert floating_ids(cl, PAIR_FLOATING)[spare] == floating[spare], (
            f"the spare node {spare} was retagged\n{summary}"
        )
        assert floating_ids(cl, PAIR_FLOATING) == floating, f"a floating name moved\n{summary}"
        # At most the one replica that was tried was restarted; the other one not.
        restarted = [n for n in where if after[n] != pair[n]]
        assert len(restarted) <= 1, f"both replicas restarted\n{summary}"
        assert bans(cl) == [], f"a ban left\n{summary}"
        assert held_lease(cl) is None, f"the lease left\n{summary}"
        check_untouched(st, THREE, three)
        doc = json.loads(out.stdout)
        assert doc["exit_code"] == 6, doc
        nodes = {n["node"]: n for n in doc["report"]["nodes"]}
        assert spare not in nodes or not nodes[spare]["retagged"], nodes
    finally:
        heal(st, PAIR, OLD)


def test_maintenance_mode_is_refused_at_preflight_and_nothing_is_retagged(stack: Stack) -> None:
    """``maintenance-mode=true``: ``update --node N`` exits 3 with one error line naming
    maintenance mode; no floating name moved on any node, no container restarted, no
    ``retag`` in the journal, no ban, no lease."""
    st, cl = stack, stack.cl
    heal(st, PAIR, OLD)  # whatever the test before left of PAIR
    wait_idle(cl)
    node = "controller-1"
    new = other_image(st, THREE_FLOATING, node)
    names = {b: floating_ids(cl, FLOATING_OF[b]) for b in (THREE, PAIR)}
    running = {b: containers(cl, b) for b in (THREE, PAIR)}
    lines = len(journal(cl))
    try:
        with maintenance_mode(cl):
            out = run_pcmkimg(
                st, "update", THREE_SERVICE, "--image", st.ref(new), "--node", node, timeout=300
            )
            events = journal(cl)[lines:]
            seen = observed(st, THREE)
            retags = [e for e in events if e.get("event") == "retag"]
            summary = f"{said(out)}\njournal: {[e.get('event') for e in events]}\nafter: {seen}"
            assert out.returncode == 3, summary
            errors = error_lines(out.stderr)
            assert len(errors) == 1, summary
            assert "maintenance mode" in errors[0], summary
            assert {b: floating_ids(cl, FLOATING_OF[b]) for b in (THREE, PAIR)} == names, summary
            assert retags == [], summary
            assert {b: containers(cl, b) for b in (THREE, PAIR)} == running, summary
            assert bans(cl) == [] and held_lease(cl) is None, summary
    finally:
        heal(st, THREE)
    # Out of maintenance mode, the update goes through (the refusal was the mode, nothing else).
    assert attribute(cl, MAINTENANCE) is None
    out = run_pcmkimg(st, "update", THREE_SERVICE, "--image", st.ref(new), "--node", node)
    assert out.returncode == 0, said(out)
    assert floating_ids(cl, THREE_FLOATING)[node] == st.id_of(new)


# --------------------------------------------------------------------------- a release (issue 20)


@contextlib.contextmanager
def dependent(st: Stack) -> Iterator[None]:
    """DEP: a 3-of-3 bundle ordered after THREE (``pcs constraint order start THREE then start
    DEP``), both interleaved (THREE by its guard, DEP by its meta attribute: OpenStack's shape),
    for the release test alone (a single-service update of THREE would restart it too). No
    guard: a release does not need one, and the test saves its wiring."""
    cl = st.cl
    cl.seed(st.ref(OLD), DEP_FLOATING)
    create = ["pcs", "resource", "bundle", "create", DEP, "container", "podman"]
    try:
        cl.run(ON, [*create, f"image={DEP_FLOATING}", "replicas=3", "network=host", "--disabled"])
        cl.run(ON, ["crm_resource", "--resource", DEP, "--meta", "--set-parameter", "interleave",
                    "--parameter-value", "true"])  # fmt: skip
        cl.run(ON, ["pcs", "constraint", "order", "start", THREE, "then", "start", DEP])
        cl.run(ON, ["pcs", "resource", "enable", DEP])
        wait_idle(cl)
        yield
    finally:
        cl.run(ON, ["pcs", "resource", "delete", DEP, "--force"], check=False, timeout=180)
        cl.run(ON, ["crm_resource", "--cleanup", "--resource", DEP], check=False)
        previous = DEP_FLOATING.rsplit(":", 1)[0] + ":pcmkprevious"
        for node in cl.names:
            cl.podman(node, "rmi", DEP_FLOATING, previous, check=False)
        wait_idle(cl)


def test_a_release_updates_its_bundles_node_by_node_each_replica_once(stack: Stack) -> None:
    """``update THREE=REF PAIR=REF DEP=REF --all``, DEP ordered after THREE: one run, every
    bundle on its new image everywhere, each replica restarted exactly once in place (DEP's
    too: the node's replicas restart together, in Pacemaker's order; an operator's loop of
    single updates restarts DEP twice per node), never more than one replica of a bundle down
    (crm_mon sampled every 0.1 s); the same release again restarts nothing."""
    st, cl = stack, stack.cl
    settled(st)
    heal(st, PAIR, OLD)
    with dependent(st):
        ours = (THREE, PAIR, DEP)
        # Each bundle to a test image one of its replicas does not run now (the tests before
        # may have left a bundle's replicas on different images): a replica on another image
        # restarts exactly once, one already on it not at all.
        before = {b: containers(cl, b) for b in ours}
        pair_on = next(n for n in cl.names if before[PAIR][n])
        new = {
            THREE: other_image(st, THREE_FLOATING, ON),
            PAIR: other_image(st, PAIR_FLOATING, pair_on),
            DEP: NEW,
        }
        args = (
            "--json",
            "update",
            f"{THREE_SERVICE}={st.ref(new[THREE])}",
            f"{PAIR_SERVICE}={st.ref(new[PAIR])}",
            f"{DEP_SERVICE}={st.ref(new[DEP])}",
        )
        where = {b: placement(cl, b) for b in ours}
        with Down(cl, ours) as down, Sampler(cl, ours) as sampler:
            out = run_pcmkimg(st, *args, "--all")
        assert out.returncode == 0, said(out)
        doc = json.loads(out.stdout)
        nodes = doc["report"]["nodes"]
        assert sorted(n["node"] for n in nodes) == cl.names, nodes
        wait_idle(cl)
        # Never more than one replica of a bundle down at once; DEP's replica went down once
        # on each node (crm_mon every 0.1 s; the containers below say the same).
        assert down.rounds > 10 and down.fewest == {THREE: 2, PAIR: 1, DEP: 2}, down.fewest
        assert down.stops.get(DEP) == {n: 1 for n in cl.names}, down.stops
        expected = 0
        for bundle, service in ((THREE, THREE_SERVICE), (PAIR, PAIR_SERVICE), (DEP, DEP_SERVICE)):
            target = st.id_of(new[bundle])
            assert placement(cl, bundle) == where[bundle], observed(st, *ours)
            assert set(floating_ids(cl, FLOATING_OF[bundle]).values()) == {target}
            result = {n["node"]: n["services"][service]["result"] for n in nodes}
            for node, running in before[bundle].items():
                if not running:  # the 2-of-3 bundle's spare node: retagged only
                    assert result[node] == "retag-only", (node, result)
                    continue
                ((name, (cid, image)),) = running.items()
                seen = sampler.seen[bundle][node]
                now = containers(cl, bundle)[node]
                assert list(now) == [name] and now[name][1] == target, observed(st, bundle)
                if image == target:
                    assert seen == [(name, cid)] and result[node] == "unchanged", (node, seen)
                else:  # the old container, then exactly one new one
                    expected += 1
                    assert seen[0] == (name, cid) and len(seen) == 2, (bundle, node, seen)
                    assert result[node] == "ok", (node, result)
        assert expected >= 5 and doc["report"]["restarted"] == expected, (expected, nodes)
        assert bans(cl) == [] and held_lease(cl) is None
        # One journal run: a start line per service, all with the same run id.
        starts = [e for e in journal(cl) if e.get("event") == "start"][-3:]
        assert {e["service"] for e in starts} == {THREE_SERVICE, PAIR_SERVICE, DEP_SERVICE}
        assert len({e["run"] for e in starts}) == 1

        after = {b: containers(cl, b) for b in ours}
        again = run_pcmkimg(st, *args, "--all")
        assert again.returncode == 0, said(again)
        report = json.loads(again.stdout)["report"]
        results = {r["result"] for n in report["nodes"] for r in n["services"].values()}
        assert results <= {"unchanged", "retag-only"}, results
        assert report["restarted"] == 0
        wait_idle(cl)
        assert {b: containers(cl, b) for b in ours} == after


def test_a_release_with_a_broken_image_puts_the_failed_node_back_whole(stack: Stack) -> None:
    """THREE to a good image and PAIR to one that never starts: exit 6 at the first node where a
    PAIR replica restarts; there both services are back on their previous image (THREE, which
    had restarted on the new image, restarted again on the old one); no ban, no lease."""
    st, cl = stack, stack.cl
    settled(st)
    heal(st, PAIR, OLD)
    good = other_image(st, THREE_FLOATING, ON)
    old_three = floating_ids(cl, THREE_FLOATING)
    old_pair = floating_ids(cl, PAIR_FLOATING)
    try:
        out = run_pcmkimg(
            st, "--json", "update", f"{THREE_SERVICE}={st.ref(good)}",
            f"{PAIR_SERVICE}={st.ref(BROKEN)}", "--all",
        )  # fmt: skip
        assert out.returncode == 6, said(out)
        error = json.loads(out.stdout)
        nodes = error["report"]["nodes"]
        failed = nodes[-1]
        node = failed["node"]
        assert failed["services"][PAIR_SERVICE]["result"] == "rolled-back", nodes
        assert failed["services"][THREE_SERVICE]["result"] == "rolled-back", nodes
        wait_idle(cl)
        assert floating_ids(cl, THREE_FLOATING)[node] == old_three[node]
        assert floating_ids(cl, PAIR_FLOATING)[node] == old_pair[node]
        running = {name: img for name, (_, img) in containers(cl, THREE)[node].items()}
        assert set(running.values()) == {old_three[node]}, observed(st, THREE, PAIR)
        running = {name: img for name, (_, img) in containers(cl, PAIR)[node].items()}
        assert set(running.values()) == {old_pair[node]}, observed(st, THREE, PAIR)
        # The nodes after it were not touched.
        later = [n for n in cl.names if n not in {x["node"] for x in nodes}]
        for n in later:
            assert floating_ids(cl, THREE_FLOATING)[n] == old_three[n]
            assert floating_ids(cl, PAIR_FLOATING)[n] == old_pair[n]
        assert bans(cl) == [] and held_lease(cl) is None
    finally:
        heal(st, PAIR, OLD)
        heal(st, THREE)


def test_a_release_interrupted_leaves_no_ban_past_its_lifetime_and_a_rerun_converges(
    stack: Stack,
) -> None:
    """The fault injection of a single update (test_fault_injection_live), on a release of
    THREE and PAIR, at two seeded moments: SIGKILL with a node's restart holds in place (what
    is left lapses within its lifetime: the timeout plus a quarter, at least 5 s), SIGTERM
    while a replica of that node is down (nothing left: no ban, no pin, no lease). After each,
    the plain re-run exits 0 with every replica of both bundles on its new image, no
    constraint or pin of ours, no lease."""
    st, cl = stack, stack.cl
    settled(st)
    heal(st, PAIR, OLD)
    rng = random.Random(faults.SEED)
    r = pm.Runner(prefix=tuple(cl.node(ON).enter()))
    timeout = 120  # the re-run restarts with it too: room for a loaded CI machine
    lifetime = timeout + max(5, timeout / 4)

    def ours(config: Any) -> list[str]:
        found = [c.id for c in cib.cli_constraints(config) if c.resource in (THREE, PAIR)]
        return (
            found
            + restart.pinned_bundles(config)
            + ([restart.DEFAULTS_PIN] if restart.defaults_pinned(config) else [])
        )

    def holds_placed(run: faults.Run) -> bool:
        return run.said(" together ") and bool(ours(pm.query_cib(r)))

    def replica_down(run: faults.Run) -> bool:
        if not run.said(" together "):
            return False
        node = faults.first_node(run)
        state = pm.status(r)
        return any(
            before[b][node] and ((rep := state.replica_on(b, node)) is None or not rep.active)
            for b in (THREE, PAIR)
        )

    for sig, trigger in ((signal.SIGKILL, holds_placed), (signal.SIGTERM, replica_down)):
        before = {b: containers(cl, b) for b in (THREE, PAIR)}
        pair_on = next(n for n in cl.names if before[PAIR][n])
        new = {
            THREE: other_image(st, THREE_FLOATING, ON),
            PAIR: other_image(st, PAIR_FLOATING, pair_on),
        }
        args = (
            "update",
            f"{THREE_SERVICE}={st.ref(new[THREE])}",
            f"{PAIR_SERVICE}={st.ref(new[PAIR])}",
            "--all",
            "--timeout",
            str(timeout),
        )
        run = faults.spawn(cl, ON, *args)
        try:
            deadline = time.monotonic() + 180
            while not trigger(run) and run.child.poll() is None:
                assert time.monotonic() < deadline, run.text()
                time.sleep(0.05)
            time.sleep(rng.uniform(0.0, 0.3))
            killed_at = time.time()
            run.child.send_signal(sig)
            code = run.child.wait(120)
        finally:
            if run.child.poll() is None:
                run.child.kill()
                run.child.wait(30)
        assert code == (-signal.SIGKILL if sig == signal.SIGKILL else 143), (code, run.text())
        config = pm.query_cib(r)
        if sig == signal.SIGKILL:  # what is left lapses within its lifetime
            ends = [
                el.get("end", "")
                for el in config.iter("date_expression")
                if "pcmkimg" in el.get("id", "")
            ]
            assert ends, ours(config)
            for end in ends:
                lapse = datetime.strptime(end, "%Y-%m-%d %H:%M:%SZ").replace(tzinfo=timezone.utc)
                assert lapse.timestamp() <= killed_at + lifetime + 2, (end, killed_at)
        else:  # SIGTERM cleans up at once
            assert ours(config) == [] and held_lease(cl) is None, (ours(config), run.text())
        again = faults.rerun(cl, ON, args, timeout=300)
        assert again.returncode == 0, again.stderr[-4000:]
        wait_idle(cl)
        for bundle in (THREE, PAIR):
            target = st.id_of(new[bundle])
            assert set(floating_ids(cl, FLOATING_OF[bundle]).values()) == {target}
            running = {img for c in containers(cl, bundle).values() for _, img in c.values()}
            assert running == {target}, observed(st, THREE, PAIR)
        config = pm.query_cib(r)
        assert ours(config) == [] and held_lease(cl) is None, ours(config)
