"""The ``pcmkimg`` command line (click).

Errors are mapped to exit codes here and nowhere else, by their family (``FAMILY_CODES``, README).
Every command prints one line ``pcmkimg: error: ...; fix: ...`` on failure, and with
``--json`` also a JSON document ``{"error": ..., "exit_code": ...}`` on stdout.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, NoReturn

import click

from pcmkimg import __version__
from pcmkimg.adapters import config, journal, pacemaker
from pcmkimg.adapters import lease as leasing
from pcmkimg.adapters import podman as images
from pcmkimg.completion import complete_bundle, complete_node, complete_service, completes
from pcmkimg.core import cib, naming, plan
from pcmkimg.core import commands as cmd
from pcmkimg.errors import (
    BadInput,
    LeaseHeld,
    LeftBehind,
    NodeFailed,
    PcmkimgError,
    Refused,
    Unreachable,
    UsageError,
)
from pcmkimg.workflows import update as execute

# --------------------------------------------------------------------------- exit codes

OK = 0
INTERNAL = 1
BAD_INPUT = 2
PROBLEMS = 3
LEASE_HELD = 4
UNREACHABLE = 5
UPDATE_FAILED = 6
ROLLBACK_FAILED = 7
INTERRUPTED = 130
TERMINATED = 143


# The one place where failure kinds become exit codes: by the kind's family (pcmkimg.errors).
FAMILY_CODES: dict[type[PcmkimgError], int] = {
    BadInput: BAD_INPUT,
    Refused: PROBLEMS,
    LeaseHeld: LEASE_HELD,
    Unreachable: UNREACHABLE,
    NodeFailed: UPDATE_FAILED,
    LeftBehind: ROLLBACK_FAILED,
}


def exit_code(exc: BaseException) -> int:
    """The exit code of a failure: signals first, then the family of the kind, else a bug."""
    if isinstance(exc, KeyboardInterrupt):
        return INTERRUPTED
    if isinstance(exc, pacemaker.Terminated):
        return TERMINATED
    if isinstance(exc, click.UsageError):
        return BAD_INPUT
    if isinstance(exc, PcmkimgError) and exc.family is not None:
        return FAMILY_CODES.get(exc.family, INTERNAL)
    return INTERNAL


class CheckFailed(Refused):
    """``pcmkimg check`` found problems."""


# --------------------------------------------------------------------------- context


@dataclass
class Env:
    json: bool
    conf_path: str | None
    runner: pacemaker.Runner
    journal_dir: str

    @functools.cached_property
    def conf(self) -> config.Config:
        """Read on first use, so that `--help` works even with a broken file."""
        return config.load(self.conf_path)

    def out(self, doc: Any, lines: Sequence[str]) -> None:
        if self.json:
            click.echo(json.dumps(doc, indent=2, sort_keys=True))
        else:
            for line in lines:
                click.echo(line)

    def say(self, text: str) -> None:
        """Progress for a person: stderr, so that --json stdout stays one document."""
        click.echo(text, err=True)


def _env() -> Env:
    return click.get_current_context().find_object(Env)  # type: ignore[return-value]


@contextmanager
def _stores(env: Env) -> Iterator[images.Stores]:
    try:
        local = pacemaker.local_node(env.runner)
    except pacemaker.PacemakerError:
        local = None
    with images.open_stores(env.conf, local) as stores:
        yield stores


def _fail(env: Env | None, exc: BaseException) -> NoReturn:
    code = exit_code(exc)
    if isinstance(exc, PcmkimgError):
        text = exc.one_line()
    elif isinstance(exc, KeyboardInterrupt):
        text = "interrupted; bans and the update lease were cleaned up"
    elif isinstance(exc, pacemaker.Terminated):
        text = "terminated; bans and the update lease were cleaned up"
    elif isinstance(exc, click.ClickException):
        text = exc.format_message()
    else:
        text = f"internal error: {type(exc).__name__}: {exc} (please report this)"
    click.echo(f"pcmkimg: error: {' '.join(text.split())}", err=True)
    if env is not None and env.json:
        doc = {"error": " ".join(text.split()), "exit_code": code}
        extra = getattr(exc, "report", None)
        if extra is not None:
            doc["report"] = extra
        click.echo(json.dumps(doc, indent=2, sort_keys=True))
    sys.exit(code)


# --------------------------------------------------------------------------- commands


def timeout_option(default: int, text: str):  # type: ignore[no-untyped-def]
    return click.option(
        "--timeout", default=default, show_default=True, type=click.IntRange(10, 3600), help=text
    )


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="pcmkimg")
@click.option("--json", "as_json", is_flag=True, help="Machine output (a JSON document).")
@click.option(
    "--conf",
    type=click.Path(dir_okay=False),
    default=None,
    help="Configuration file (default $PCMKIMG_CONF or /etc/pcmkimg/pcmkimg.conf).",
)
@click.option(
    "--journal-dir",
    default=str(journal.DEFAULT_DIR),
    show_default=True,
    help="Where the update journal lives (root-owned).",
)
@click.pass_context
def cli(ctx: click.Context, as_json: bool, conf: str | None, journal_dir: str) -> None:
    """Per-node floating image names for Pacemaker bundles."""
    ctx.obj = Env(as_json, conf, pacemaker.Runner(), journal_dir)


@cli.command()
@click.argument("services", nargs=-1, **completes(complete_service))
def status(services: tuple[str, ...]) -> None:
    """What runs behind each floating name on each node (drift, role, guard, failures)."""
    from pcmkimg.workflows import status as st

    env = _env()
    cluster = pacemaker.read_cluster(env.runner)
    found = st.floating_bundles(cluster, env.conf.scheme, services)
    with _stores(env) as stores:
        doc = st.rows(st.gather(cluster, stores, found))
    env.out(doc, st.table(doc))


@cli.command()
def check() -> None:
    """Preflight: list every problem that would make an update unsafe; exit 3 if any."""
    from pcmkimg.workflows import status as st

    env = _env()
    cluster = pacemaker.read_cluster(env.runner)
    found = st.floating_bundles(cluster, env.conf.scheme)
    with _stores(env) as stores:
        problems = st.problems(st.gather(cluster, stores, found))
    doc = {"ok": not problems, "problems": [p.__dict__ for p in problems]}
    if not problems:
        env.out(doc, ["ok: no problems found"])
        return
    if not env.json:
        env.out(doc, [f"problem: {p.message}" for p in problems])
    failed = CheckFailed(f"{len(problems)} problem(s) found", "see the list of problems")
    failed.report = doc
    raise failed


def _one_of(nodes: Sequence[str], every: bool) -> None:
    if bool(nodes) == every:
        raise UsageError("give either --node (one or more) or --all", "e.g. --node controller-1")


def _plan(
    env: Env,
    service: str,
    image: str,
    nodes: Sequence[str],
    every: bool,
    digest: str | None,
    restart: bool,
) -> tuple[plan.Plan, plan.Cluster]:
    from pcmkimg.core import reference

    _one_of(nodes, every)
    target = reference.parse(image)
    if naming.classify(target, env.conf.scheme) is not None:
        raise UsageError(
            f"--image {image} is a floating or rollback name, not a real image",
            "give the registry reference of the image to run, e.g. REGISTRY/NS/IMAGE:TAG",
        )
    if digest is not None:
        reference.parse(f"x@{digest}")
    cluster = pacemaker.read_cluster(env.runner)
    bundle = plan.find_bundle(cluster, service, env.conf.scheme)
    facts = plan.node_facts(cluster, bundle.id)
    the_plan = plan.plan_update(
        bundle, target, facts, None if every else list(nodes), digest=digest, restart=restart
    )
    return the_plan, cluster


@cli.command()
@click.argument("service", **completes(complete_service))
@click.option("--image", "image", required=True, help="The real image REF to run.")
@click.option(
    "--node",
    "nodes",
    multiple=True,
    **completes(complete_node),
    help="A node to update (repeatable).",
)
@click.option("--all", "every", is_flag=True, help="Every node that can run the bundle.")
@click.option("--digest", default=None, help="Refuse an image with another digest (sha256:...).")
@click.option("--dry-run", is_flag=True, help="Print the plan and stop.")
@timeout_option(300, "Seconds to wait for each restart.")
@click.option("--no-restart", is_flag=True, help="Pull and retag only; restart nothing.")
def update(
    service: str,
    image: str,
    nodes: tuple[str, ...],
    every: bool,
    digest: str | None,
    dry_run: bool,
    timeout: int,
    no_restart: bool,
) -> None:
    """Per-node minor update of SERVICE to --image, one node at a time."""
    from pcmkimg.core import reference
    from pcmkimg.progress import PullDisplay

    env = _env()
    the_plan, _ = _plan(env, service, image, nodes, every, digest, not no_restart)
    doc_plan = {"plan": the_plan.lines(), "targets": list(the_plan.targets)}
    if dry_run:
        env.out({**doc_plan, "dry_run": True}, the_plan.lines())
        return
    for line in the_plan.lines():
        env.say(line)
    target = reference.parse(image)
    report = execute.UpdateReport(the_plan.bundle.id, the_plan.bundle.service, str(target))
    jrnl = journal.open_journal(_journal_path(env))
    with _stores(env) as stores:
        shown = PullDisplay(sys.stderr)  # one updating line per node on a terminal
        updater = execute.Updater(env.runner, stores, jrnl, env.say, timeout, progress=shown)
        try:
            updater.run(the_plan, target, digest, not no_restart, report)
        except BaseException as exc:
            if isinstance(exc, PcmkimgError):
                exc.report = report.as_dict()
            else:  # an interruption (or a bug) carries the report too: --json shows it
                exc.__dict__["report"] = report.as_dict()
            try:
                jrnl.record("aborted", service=the_plan.bundle.service, error=str(exc))
            except OSError:
                pass  # the error being reported matters more than its journal line
            raise
    env.say(report.summary())
    env.out(
        {**doc_plan, "report": report.as_dict(), "summary": report.summary()}, [report.summary()]
    )


def _journal_path(env: Env):  # type: ignore[no-untyped-def]
    from pathlib import Path

    return Path(env.journal_dir)


@cli.command()
@click.argument("service", **completes(complete_service))
@click.option("--node", required=True, **completes(complete_node), help="The node to roll back.")
@timeout_option(300, "Seconds to wait for the restart.")
def rollback(service: str, node: str, timeout: int) -> None:
    """Move the floating name back to the rollback image on NODE and restart that replica."""
    from pcmkimg.adapters import lease as leasing
    from pcmkimg.core import lease

    env = _env()
    cluster = pacemaker.read_cluster(env.runner)
    bundle = plan.find_bundle(cluster, service, env.conf.scheme)
    plan.plan_update(
        bundle,
        naming.floating_name(bundle.service, env.conf.scheme),
        plan.node_facts(cluster, bundle.id),
        [node],
    )
    back = naming.rollback_name(bundle.service, env.conf.scheme)
    jrnl = journal.open_journal(_journal_path(env))
    ttl = lease.ttl_for(timeout)
    with _stores(env) as stores, leasing.held(env.runner, ttl) as held:
        store = stores.get(node)
        target = store.resolve(back)
        from pcmkimg.adapters import podman as images

        if not isinstance(target, images.Resolved):
            raise plan.PreflightFailed(
                f"{back} does not exist on {node}: there is nothing to roll back to",
                f"use {cmd.shown(cmd.update(node, bundle.service))}",
            )

        def renew() -> None:
            leasing.renew(env.runner, held, ttl)

        updater = execute.Updater(env.runner, stores, jrnl, env.say, timeout, renew)
        updater.baseline = plan.health(cluster.status, bundle.id)
        res = execute.NodeResult(node)
        updater.record("rollback", service=bundle.service, node=node, to=target.id)
        try:
            updater.update_node(bundle, res, back, target.id, True)
        except execute.UpdateFailed as exc:
            raise execute.UpdateFailed(
                f"rollback of {bundle.service} on {node} failed, and {node} was put back on "
                f"the image it ran before: {exc.message}",
                f"the image under {back} does not start on {node}; update the node to a "
                "working image instead",
            ) from exc
    env.out(res.as_dict(), [f"{node}: {bundle.floating} -> {target.id[:12]} ({res.result})"])


@cli.command()
@click.argument("service", required=False, **completes(complete_service))
@click.option(
    "--limit",
    default=50,
    show_default=True,
    type=click.IntRange(1, 1_000_000),
    help="Show the last N entries.",
)
def history(service: str | None, limit: int) -> None:
    """The update journal, oldest first."""
    env = _env()
    entries = list(journal.history(_journal_path(env), service))[-limit:]
    lines = []
    for e in entries:
        rest = {k: v for k, v in e.items() if k not in ("time", "run", "event")}
        detail = " ".join(f"{k}={v}" for k, v in sorted(rest.items()))
        lines.append(f"{e.get('time')} {e.get('run')} {e.get('event')} {detail}")
    env.out(entries, lines or ["the journal is empty"])


@cli.group()
def guard() -> None:
    """Wire the floating-image guard agent to a bundle (add, remove, show)."""


def _floating_of(env: Env, config_el: cib.Element, bundle_id: str, image: str | None) -> str:
    bundle = cib.bundle(config_el, bundle_id)
    name = image or bundle.image
    if naming.as_floating(name, env.conf.scheme) is None:
        raise UsageError(
            f"bundle {bundle_id} runs {name}, which is not a floating name",
            f"move it to one first ({cmd.shown(cmd.migrate(bundle_id))}), or give --image "
            f"{naming.floating_name(naming.service_of(name), env.conf.scheme)}",
        )
    return name


@guard.command("add")
@click.argument("bundle", **completes(complete_bundle))
@click.option("--image", default=None, help="The floating name (default: the bundle's image).")
@click.option("--dry-run", is_flag=True, help="Print the equivalent pcs commands and stop.")
@timeout_option(120, "Seconds to wait for the guard to start.")
def guard_add(bundle: str, image: str | None, dry_run: bool, timeout: int) -> None:
    """Clone of the agent, order and colocation constraints, interleave=true.

    Two CIB changes, so that no replica restarts: first the guard clone alone, which must start
    on every node where a replica runs; then the constraints and interleave=true."""
    env = _env()
    current = pacemaker.query_cib(env.runner)
    floating = _floating_of(env, current, bundle, image)
    if dry_run:
        cmds = cib.guard_pcs_commands(current, bundle, floating)
        # The guard must run before the constraints exist, or every replica restarts.
        cmds = [cmds[0], cmd.wait(), *cmds[1:]]
        env.out({"commands": cmds}, [cmd.shown(c) for c in cmds])
        return
    existed = cib.bundle(current, bundle).guard is not None
    first = pacemaker.update_cib(
        env.runner, lambda c: cib.add_guard(c, bundle, floating, constraints=False)
    )
    missing: list[str] = []
    try:
        if not first.empty:
            env.say(f"{first.description}; waiting for it to start")
            pacemaker.wait(env.runner, timeout)
        missing = _guard_missing(env, bundle)
        if missing:
            service = naming.classify(floating, env.conf.scheme)
            raise plan.PreflightFailed(
                f"the guard did not start on {', '.join(missing)}, where {bundle} runs: "
                f"{floating} is missing there; wiring it would stop those replicas, so "
                + ("nothing was wired" if not existed else "no constraint was added"),
                f"{cmd.shown(cmd.update(missing[0], service.service if service else bundle))}, "
                f"then {cmd.shown(cmd.guard_add(bundle))} again",
            )
    except BaseException:
        if not existed:  # leave nothing half-wired behind; a guard that was there stays
            _undo_guard(env, bundle, missing)
        raise
    change = pacemaker.update_cib(env.runner, lambda c: cib.add_guard(c, bundle, floating))
    changed = not (first.empty and change.empty)
    env.out(
        {"changed": changed, "description": change.description if changed else ""},
        [change.description if changed else f"{bundle}: guard already wired"],
    )


class GuardHalfWired(LeftBehind):
    """A guard clone that `guard add` created could not be removed again."""


def _guard_missing(env: Env, bundle: str) -> list[str]:
    """Nodes where a replica runs but the guard clone does not."""
    cluster = pacemaker.read_cluster(env.runner)
    guard = cib.bundle(cluster.config, bundle).guard
    started = cib.clone_instances(cluster.mon, guard.clone_id) if guard else {}
    return sorted(
        r.node
        for r in cluster.status.replicas_of(bundle)
        if r.active and r.node and r.node not in started
    )


def _undo_guard(env: Env, bundle: str, nodes: Sequence[str]) -> None:
    """Remove a guard clone this run created, and forget its failed starts."""
    guard_id = cib.guard_ids(bundle)["primitive"]
    with pacemaker.signals_held():
        try:
            pacemaker.update_cib(env.runner, lambda c: cib.remove_guard(c, bundle))
        except PcmkimgError as exc:
            raise GuardHalfWired(
                f"the guard clone of {bundle} could not be removed again: {exc.message}",
                cmd.shown(cmd.guard_remove(bundle)),
            ) from exc
        for node in nodes:
            try:
                pacemaker.cleanup(env.runner, guard_id, node)
            except PcmkimgError:
                pass  # its history goes with the resource; a cleanup is only tidiness


@guard.command("remove")
@click.argument("bundle", **completes(complete_bundle))
def guard_remove(bundle: str) -> None:
    """Undo exactly what `guard add` did."""
    env = _env()
    change = pacemaker.update_cib(env.runner, lambda c: cib.remove_guard(c, bundle))
    env.out(
        {"changed": not change.empty, "description": change.description},
        [change.description if not change.empty else f"{bundle}: no guard"],
    )


@guard.command("show")
@click.argument("bundle", **completes(complete_bundle))
def guard_show(bundle: str) -> None:
    """Print what is wired."""
    env = _env()
    b = cib.bundle(pacemaker.query_cib(env.runner), bundle)
    g = b.guard
    doc: dict[str, Any] = {"bundle": b.id, "interleave": b.interleave, "wired": b.guard_wired}
    if g is None:
        env.out({**doc, "guard": None}, [f"{b.id}: no guard ({cmd.shown(cmd.guard_add(b.id))})"])
        return
    doc["guard"] = dict(g.__dict__)
    lines = [
        f"{b.id}: guard {'wired' if b.guard_wired else 'PARTLY wired'}",
        f"  clone {g.clone_id} (interleave={str(g.clone_interleave).lower()}) of "
        f"{g.primitive_id} image={g.image}",
        f"  order {g.order_id or 'MISSING'}; colocation {g.colocation_id or 'MISSING'}; "
        f"bundle interleave={str(b.interleave).lower()}",
    ]
    env.out(doc, lines)


@cli.command()
@click.argument("bundle", **completes(complete_bundle))
@click.option("--dry-run", is_flag=True, help="Print the plan and stop.")
@timeout_option(300, "Seconds to wait for the cluster to settle.")
def migrate(bundle: str, dry_run: bool, timeout: int) -> None:
    """Move BUNDLE from a real or legacy image name to its floating name, with no restart."""
    from pcmkimg.workflows import migrate as mig

    env = _env()
    cluster = pacemaker.read_cluster(env.runner)
    try:
        m = mig.plan_migration(cluster, bundle, env.conf.scheme)
    except mig.NothingToMigrate as exc:
        env.out({"changed": False, "reason": exc.message}, [exc.message])
        return
    if dry_run:
        env.out({"plan": m.lines(), "dry_run": True}, m.lines())
        return
    for line in m.lines():
        env.say(line)
    with _stores(env) as stores:
        result = mig.run_migration(env.runner, stores, m, env.say, timeout)
    env.out(result, [f"{m.bundle}: now on {m.floating}; restarted: {len(result['restarted'])}"])


@cli.command()
@click.argument("service", **completes(complete_service))
@click.option(
    "--node",
    "nodes",
    multiple=True,
    **completes(complete_node),
    help="A node to prune (repeatable).",
)
@click.option("--all", "every", is_flag=True, help="Every cluster node.")
@click.option(
    "--keep",
    default=1,
    show_default=True,
    type=click.IntRange(0, 100),
    help="How many other images of the service to keep, newest first.",
)
def prune(service: str, nodes: tuple[str, ...], every: bool, keep: int) -> None:
    """Remove old images of SERVICE from node stores.

    Never the images behind the floating or the rollback name, never one a container uses."""
    env = _env()
    _one_of(nodes, every)
    cluster = pacemaker.read_cluster(env.runner)
    bundle = plan.find_bundle(cluster, service, env.conf.scheme)
    known = [f.name for f in plan.node_facts(cluster, bundle.id)]
    unknown = [n for n in nodes if n not in known]
    if unknown:
        raise plan.UnknownNode(
            f"not cluster nodes: {', '.join(unknown)}", f"cluster nodes: {', '.join(known)}"
        )
    targets = known if every else list(nodes)

    # Under the lease: an update's freshly pulled image must not be pruned before its retag.
    with _stores(env) as stores, leasing.held(env.runner):
        results = stores.each(targets, lambda s: s.prune(bundle.service, keep=keep))
    failed = {n: r for n, r in results.items() if isinstance(r, Exception)}
    doc = {n: r.__dict__ for n, r in results.items() if n not in failed}
    lines = [
        f"{n}: removed {len(r.removed)}, kept {len(r.kept)}, protected {len(r.protected)}"
        for n, r in results.items()
        if n not in failed
    ]
    if not failed:
        env.out(doc, lines)
        return
    if not env.json:
        env.out(doc, lines)
    error = images.NodesUnreachable(
        "; ".join(f"{n}: {e}" for n, e in failed.items()),
        "reach those nodes, then prune them again (the others were pruned)",
    )
    error.report = doc
    raise error


# --------------------------------------------------------------------------- entry point


COMPLETE_VAR = "_PCMKIMG_COMPLETE"


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Run the CLI; every failure becomes one line on stderr and its exit code."""
    ctx: click.Context | None = None
    args = list(sys.argv[1:] if argv is None else argv)

    def env() -> Env | None:
        if ctx is not None and isinstance(ctx.obj, Env):
            return ctx.obj
        # Failed before the group ran (e.g. a broken config): still honour --json.
        return Env(True, None, pacemaker.Runner(), "") if "--json" in args else None

    if COMPLETE_VAR in os.environ:  # TAB in a shell: click's completion protocol
        cli.main(args, prog_name="pcmkimg", complete_var=COMPLETE_VAR)
    try:
        with pacemaker.sigterm_raises():
            ctx = cli.make_context("pcmkimg", args)
            with ctx:
                cli.invoke(ctx)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        _fail(env(), KeyboardInterrupt())
    except click.UsageError as exc:
        exc.show()
        if "--json" in args:
            doc = {"error": " ".join(exc.format_message().split()), "exit_code": BAD_INPUT}
            click.echo(json.dumps(doc, indent=2, sort_keys=True))
        sys.exit(BAD_INPUT)
    except click.ClickException as exc:
        _fail(env(), exc)
    except SystemExit:
        raise
    except BaseException as exc:
        _fail(env(), exc)
    sys.exit(OK)
