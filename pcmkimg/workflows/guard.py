"""``pcmkimg guard add|remove|show``: wire the floating-image agent to a bundle.

``add`` makes two CIB changes, so that no running replica restarts: first the guard clone
alone, which must start wherever a replica runs; then the constraints and ``interleave=true``
(added together with a starting guard, the scheduler would restart every replica). A clone
that ``add`` created is removed again when it can't start there, or when ``add`` is
interrupted; a guard that was there before stays.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pcmkimg.adapters import pacemaker, signals
from pcmkimg.core import cib, naming, plan
from pcmkimg.core import commands as cmd
from pcmkimg.errors import LeftBehind, PcmkimgError, UsageError


class GuardHalfWired(LeftBehind):
    """A guard clone that `guard add` created could not be removed again."""


def floating_of(
    config_el: cib.Element, bundle_id: str, image: str | None, scheme: naming.Scheme
) -> str:
    """The floating name the guard checks: ``image``, else the bundle's (refused when it is
    not a floating name)."""
    bundle = cib.bundle(config_el, bundle_id)
    name = image or bundle.image
    if naming.as_floating(name, scheme) is None:
        raise UsageError(
            f"bundle {bundle_id} runs {name}, which is not a floating name",
            f"move it to one first ({cmd.shown(cmd.migrate(bundle_id))}), or give --image "
            f"{naming.floating_name(naming.service_of(name), scheme)}",
        )
    return name


def dry_run(
    runner: pacemaker.Runner, bundle: str, image: str | None, scheme: naming.Scheme
) -> list[list[str]]:
    """The commands that wire the guard by hand, in the order that restarts nothing."""
    current = pacemaker.query_cib(runner)
    cmds = cib.guard_pcs_commands(current, bundle, floating_of(current, bundle, image, scheme))
    # The guard must run before the constraints exist, or every replica restarts.
    return [cmds[0], cmd.wait(), *cmds[1:]]


def add(
    runner: pacemaker.Runner,
    bundle: str,
    image: str | None,
    scheme: naming.Scheme,
    timeout: float,
    say: plan.Say,
) -> tuple[bool, str]:
    """Wire the guard: (whether the CIB changed, what changed)."""
    current = pacemaker.query_cib(runner)
    floating = floating_of(current, bundle, image, scheme)
    existed = cib.bundle(current, bundle).guard is not None
    first = pacemaker.update_cib(
        runner, lambda c: cib.add_guard(c, bundle, floating, constraints=False)
    )
    missing: list[str] = []
    try:
        if not first.empty:
            say(f"{first.description}; waiting for it to start")
            pacemaker.wait(runner, timeout)
        missing = missing_on(runner, bundle)
        if missing:
            service = naming.classify(floating, scheme)
            raise plan.PreflightFailed(
                f"the guard did not start on {', '.join(missing)}, where {bundle} runs: "
                f"{floating} is missing there; wiring it would stop those replicas, so "
                + ("nothing was wired" if not existed else "no constraint was added"),
                f"{cmd.shown(cmd.update(missing[0], service.service if service else bundle))}, "
                f"then {cmd.shown(cmd.guard_add(bundle))} again",
            )
    except BaseException:
        if not existed:  # leave nothing half-wired behind; a guard that was there stays
            undo(runner, bundle, missing)
        raise
    change = pacemaker.update_cib(runner, lambda c: cib.add_guard(c, bundle, floating))
    changed = not (first.empty and change.empty)
    return changed, change.description if changed else ""


def missing_on(runner: pacemaker.Runner, bundle: str) -> list[str]:
    """Nodes where a replica runs but the guard clone does not."""
    cluster = pacemaker.read_cluster(runner)
    guard = cib.bundle(cluster.config, bundle).guard
    started = cib.clone_instances(cluster.mon, guard.clone_id) if guard else {}
    return sorted(
        r.node
        for r in cluster.status.replicas_of(bundle)
        if r.active and r.node and r.node not in started
    )


def undo(runner: pacemaker.Runner, bundle: str, nodes: Sequence[str]) -> None:
    """Remove a guard clone this run created, and forget its failed starts."""
    guard_id = cib.guard_ids(bundle)["primitive"]
    with signals.signals_held():
        try:
            pacemaker.update_cib(runner, lambda c: cib.remove_guard(c, bundle))
        except PcmkimgError as exc:
            raise GuardHalfWired(
                f"the guard clone of {bundle} could not be removed again: {exc.message}",
                cmd.shown(cmd.guard_remove(bundle)),
            ) from exc
        for node in nodes:
            try:
                pacemaker.cleanup(runner, guard_id, node)
            except PcmkimgError:
                pass  # its history goes with the resource; a cleanup is only tidiness


def remove(runner: pacemaker.Runner, bundle: str) -> cib.CibChange:
    """Undo exactly what :func:`add` did."""
    return pacemaker.update_cib(runner, lambda c: cib.remove_guard(c, bundle))


def show(runner: pacemaker.Runner, bundle: str) -> tuple[dict[str, Any], list[str]]:
    """What is wired: (the JSON document, the lines for a person)."""
    b = cib.bundle(pacemaker.query_cib(runner), bundle)
    g = b.guard
    doc: dict[str, Any] = {"bundle": b.id, "interleave": b.interleave, "wired": b.guard_wired}
    if g is None:
        return {**doc, "guard": None}, [f"{b.id}: no guard ({cmd.shown(cmd.guard_add(b.id))})"]
    doc["guard"] = dict(g.__dict__)
    lines = [
        f"{b.id}: guard {'wired' if b.guard_wired else 'PARTLY wired'}",
        f"  clone {g.clone_id} (interleave={str(g.clone_interleave).lower()}) of "
        f"{g.primitive_id} image={g.image}",
        f"  order {g.order_id or 'MISSING'}; colocation {g.colocation_id or 'MISSING'}; "
        f"bundle interleave={str(b.interleave).lower()}",
    ]
    return doc, lines
