"""``pcmkimg guard add BUNDLE``: wire the floating-image agent to a bundle.

It makes two CIB changes, so that no running replica restarts: first the guard clone
alone, which must start wherever a replica runs; then the constraints and ``interleave=true``
(added together with a starting guard, the scheduler would restart every replica). A clone
that ``add`` created is removed again when it can't start there, or when ``add`` is
interrupted; a guard that was there before stays.

Renaming an existing guard (``add --image`` with another name) drops its order and colocation
first: edited in place, the guard restarts on every node and the Mandatory order restarts every
replica after it. The guard then restarts alone with the new name; once it runs wherever a
replica runs, the constraints come back. When it does not start somewhere, it gets its former
name back and is wired again as it was. It holds the update lease while it changes the CIB.
"""

from __future__ import annotations

from collections.abc import Sequence

from pcmkimg.adapters import lease as leasing
from pcmkimg.adapters import signals
from pcmkimg.core import cib, naming, plan
from pcmkimg.core import commands as cmd
from pcmkimg.core.errors import PreflightFailed
from pcmkimg.errors import LeftBehind, PcmkimgError, UsageError
from pcmkimg.records import dataclass
from pcmkimg.workflows.context import ClusterPort, Context


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


def commands(
    cluster: ClusterPort, bundle: str, image: str | None, scheme: naming.Scheme
) -> list[list[str]]:
    """The commands that wire the guard by hand, in the order that restarts nothing."""
    current = cluster.query_cib()
    floating = floating_of(current, bundle, image, scheme)
    cmds = cib.guard_pcs_commands(current, bundle, floating)
    existing = cib.bundle(current, bundle).guard
    if existing is not None and existing.image != floating:
        # A rename: without its constraints the guard restarts alone (see wire).
        ids = cib.guard_ids(bundle)
        return [
            cmd.delete_constraint(ids["order"]),
            cmd.delete_constraint(ids["colocation"]),
            ["pcs", "resource", "update", ids["primitive"], f"image={floating}"],
            cmd.wait(),
            *cmds[1:],
        ]
    # The guard must run before the constraints exist, or every replica restarts.
    return [cmds[0], cmd.wait(), *cmds[1:]]


def wire(ctx: Context, req: AddRequest) -> tuple[bool, str]:
    """Wire the guard, under the update lease: (whether the CIB changed, what changed).

    Checked first, without the lease: a bad bundle or name is refused, and a guard already
    wired as asked changes nothing (no lease is taken, the CIB does not move)."""
    cluster, bundle = ctx.cluster, req.bundle
    current = cluster.query_cib()
    floating = floating_of(current, bundle, req.image, ctx.scheme)
    existing = cib.bundle(current, bundle).guard
    if existing is not None and existing.image == floating:
        if cib.add_guard(current, bundle, floating).empty:
            return False, ""
    with leasing.held(cluster, ctx.lease_period):
        return _wire(ctx, req)


def _wire(ctx: Context, req: AddRequest) -> tuple[bool, str]:
    cluster, bundle, image, scheme = ctx.cluster, req.bundle, req.image, ctx.scheme
    timeout, say = req.timeout, ctx.say
    current = cluster.query_cib()
    floating = floating_of(current, bundle, image, scheme)
    existing = cib.bundle(current, bundle).guard
    existed = existing is not None
    renamed = existing is not None and existing.image != floating
    if renamed:
        # Edited in place, the guard restarts on every node, and the Mandatory order restarts
        # every replica after it (the colocation stops one where it does not start): drop both
        # first, and put them back once the guard runs with its new name.
        unwired = cluster.update_cib(lambda c: cib.unwire_guard(c, bundle))
        if not unwired.empty:
            say(f"{unwired.description}, so that renaming it restarts no replica")
    first = cluster.update_cib(lambda c: cib.add_guard(c, bundle, floating, constraints=False))
    missing: list[str] = []
    try:
        if not first.empty:
            say(f"{first.description}; waiting for it to start")
            cluster.wait(timeout)
        missing = missing_on(cluster, bundle)
        if missing:
            service = naming.classify(floating, scheme)
            if renamed and existing is not None and existing.image:
                _restore(cluster, bundle, existing.image, missing, timeout, say)
                outcome = f"the guard keeps {existing.image}"
            else:
                outcome = "nothing was wired" if not existed else "no constraint was added"
            raise PreflightFailed(
                f"the guard did not start on {', '.join(missing)}, where {bundle} runs: "
                f"{floating} is missing there; wiring it would stop those replicas, so " + outcome,
                f"{cmd.shown(cmd.update(missing[0], service.service if service else bundle))}, "
                f"then {cmd.shown(cmd.guard_add(bundle))} again",
            )
    except BaseException:
        if not existed:  # leave nothing half-wired behind; a guard that was there stays
            undo(cluster, bundle, missing)
        raise
    change = cluster.update_cib(lambda c: cib.add_guard(c, bundle, floating))
    changed = not (first.empty and change.empty)
    if renamed:
        return True, f"guard {cib.guard_ids(bundle)['clone']} of {bundle} now checks {floating}"
    return changed, change.description if changed else ""


def _restore(
    cluster: ClusterPort,
    bundle: str,
    image: str,
    failed: Sequence[str],
    timeout: float,
    say: plan.Say,
) -> None:
    """Give the guard its former name back, forget its failed starts on ``failed`` (else it
    stays off there), wait for it, then wire it again as it was."""
    back = cluster.update_cib(lambda c: cib.add_guard(c, bundle, image, constraints=False))
    guard_id = cib.guard_ids(bundle)["primitive"]
    for node in failed:
        cluster.cleanup(guard_id, node)
    say(f"{back.description}: the former name again; waiting for it to start")
    cluster.wait(timeout)
    if missing_on(cluster, bundle):
        return  # not wired again: a restart of every replica; `guard show` says PARTLY wired
    cluster.update_cib(lambda c: cib.add_guard(c, bundle, image))


def missing_on(cluster: ClusterPort, bundle: str) -> list[str]:
    """Nodes where a replica runs but the guard clone does not."""
    now = cluster.read_cluster()
    guard = cib.bundle(now.config, bundle).guard
    started = cib.clone_instances(now.mon, guard.clone_id) if guard else {}
    return sorted(
        r.node
        for r in now.status.replicas_of(bundle)
        if r.active and r.node and r.node not in started
    )


def undo(cluster: ClusterPort, bundle: str, nodes: Sequence[str]) -> None:
    """Remove a guard clone this run created, and forget its failed starts."""
    guard_id = cib.guard_ids(bundle)["primitive"]
    with signals.signals_held():
        try:
            cluster.update_cib(lambda c: cib.remove_guard(c, bundle))
        except PcmkimgError as exc:
            raise LeftBehind(
                f"the guard clone of {bundle} could not be removed again: {exc.message}",
                cmd.shown(cmd.guard_remove(bundle)),
            ) from exc
        for node in nodes:
            try:
                cluster.cleanup(guard_id, node)
            except PcmkimgError:
                pass  # its history goes with the resource; a cleanup is only tidiness


# --------------------------------------------------------------------------- the command


@dataclass(frozen=True)
class AddRequest:
    """``pcmkimg guard add BUNDLE [--image NAME] [--dry-run] [--timeout S]``."""

    bundle: str
    image: str | None = None
    """The floating name (default: the bundle's image)."""
    dry_run: bool = False
    """The equivalent commands only."""
    timeout: float = 120
    """How long to wait for the guard to start."""


@dataclass
class AddReport:
    """What ``guard add`` did (or, for a dry run, the commands that would do it)."""

    bundle: str
    changed: bool = False
    description: str = ""
    commands: list[list[str]] | None = None
    """The dry run's commands (None: not a dry run)."""

    def as_dict(self) -> dict[str, object]:
        if self.commands is not None:
            return {"commands": self.commands}
        return {"changed": self.changed, "description": self.description}

    def lines(self) -> list[str]:
        if self.commands is not None:
            return [cmd.shown(c) for c in self.commands]
        return [self.description if self.changed else f"{self.bundle}: guard already wired"]


def run(ctx: Context, req: AddRequest) -> AddReport:
    """Wire the guard of ``req.bundle`` (or, for a dry run, say how)."""
    if req.dry_run:
        return AddReport(
            req.bundle, commands=commands(ctx.cluster, req.bundle, req.image, ctx.scheme)
        )
    changed, description = wire(ctx, req)
    return AddReport(req.bundle, changed, description)
