"""The ``pcmkimg`` command line (click).

Errors are mapped to exit codes here and nowhere else, by their family (``FAMILY_CODES``, README).
Every command prints one line ``pcmkimg: error: ...; fix: ...`` on failure, and with
``--json`` also a JSON document ``{"error": ..., "exit_code": ...}`` on stdout.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Sequence
from typing import NoReturn

import click

from pcmkimg import __version__, wiring
from pcmkimg.adapters import journal, signals
from pcmkimg.completion import complete_node, complete_service, completes
from pcmkimg.errors import (
    BadInput,
    LeftBehind,
    NodeFailed,
    NoLease,
    PcmkimgError,
    Refused,
    Unreachable,
    UsageError,
)
from pcmkimg.options import (
    bundle_argument,
    cib_file_option,
    dry_run_option,
    every_option,
    nodes_option,
    service_argument,
    textfile_option,
    timeout_option,
)
from pcmkimg.wiring import ContextFactory, Env

# Each command imports what only it uses (its workflow, the lease, the podman-py stores) when it
# runs, and nothing here imports lxml or the CIB model: `status` and `check` start their cluster
# read first (pcmkimg.wiring) and import the rest while the tools run (docs/benchmarks.md,
# budget 5).

# --------------------------------------------------------------------------- exit codes

OK = 0
INTERNAL = 1
BAD_INPUT = 2
PROBLEMS = 3
LEASE_HELD = 4
UNREACHABLE = 5
UPDATE_FAILED = 6
ROLLBACK_FAILED = 7
OUTDATED = 10  # `outdated`: an update is available (a registry serves a newer image)
REGISTRY_UNASKED = 11  # `outdated`: a registry could not be asked, or no longer serves a name
HANGUP = 129  # SIGHUP: the ssh session dropped; cleaned up like SIGTERM
QUIT = 131  # SIGQUIT (Ctrl-backslash); cleaned up like SIGTERM
INTERRUPTED = 130
TERMINATED = 143
SIGNAL_CODES: dict[int, int] = {
    signal.SIGHUP: HANGUP,
    signal.SIGINT: INTERRUPTED,
    signal.SIGQUIT: QUIT,
    signal.SIGTERM: TERMINATED,
}


# The one place where failure kinds become exit codes: by the kind's family (pcmkimg.errors).
FAMILY_CODES: dict[type[PcmkimgError], int] = {
    BadInput: BAD_INPUT,
    Refused: PROBLEMS,
    NoLease: LEASE_HELD,
    Unreachable: UNREACHABLE,
    NodeFailed: UPDATE_FAILED,
    LeftBehind: ROLLBACK_FAILED,
}


#: What a command that ran to its end found, where that is not plain success (its ``finding``).
FINDING_CODES: dict[str, int] = {
    "outdated": OUTDATED,
    "registry-unasked": REGISTRY_UNASKED,
}


def exit_code(exc: BaseException) -> int:
    """The exit code of a failure: signals first, then the family of the kind, else a bug."""
    if isinstance(exc, KeyboardInterrupt):
        return INTERRUPTED
    if isinstance(exc, signals.Terminated):
        return SIGNAL_CODES.get(exc.signum, TERMINATED)
    if isinstance(exc, click.UsageError):
        return BAD_INPUT
    if isinstance(exc, PcmkimgError) and exc.family is not None:
        return FAMILY_CODES.get(exc.family, INTERNAL)
    return INTERNAL


class CheckFailed(Refused):
    """``pcmkimg check`` found problems."""


def printable(text: str) -> str:
    """``text`` with every character that is not printable (ESC, CR, newline, other control
    and format characters) shown as a Python escape (``\\x1b``): stored text that reaches a
    terminal can't move its cursor, retitle it or hide a line. For the lines of ``history``
    and ``status``; JSON output escapes by itself."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)


def _fail(env: Env | None, exc: BaseException) -> NoReturn:
    code = exit_code(exc)
    if isinstance(exc, PcmkimgError):
        text = exc.one_line()
    elif isinstance(exc, KeyboardInterrupt):
        text = "interrupted; bans and the update lease were cleaned up"
    elif isinstance(exc, signals.Terminated):
        by = "" if exc.signum == signal.SIGTERM else f" by {exc.name}"
        text = f"terminated{by}; bans and the update lease were cleaned up"
    elif isinstance(exc, click.ClickException):
        text = exc.format_message()
    else:
        text = f"internal error: {type(exc).__name__}: {exc} (please report this)"
    try:  # after SIGHUP the terminal may be gone: the exit code must still say what happened
        click.echo(f"pcmkimg: error: {' '.join(text.split())}", err=True)
        if env is not None and env.json:
            doc = {"error": " ".join(text.split()), "exit_code": code}
            extra = getattr(exc, "report", None)
            if extra is not None:
                doc["report"] = extra
            click.echo(json.dumps(doc, indent=2, sort_keys=True))
    except OSError:
        pass
    sys.exit(code)


# --------------------------------------------------------------------------- commands


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
@cib_file_option
@click.pass_context
def cli(
    ctx: click.Context, as_json: bool, conf: str | None, journal_dir: str, cib_file: str | None
) -> None:
    """Per-node floating image names for Pacemaker bundles."""
    # ctx.obj: the context factory main() was given, if any (replaced by the environment).
    contexts = ctx.obj if callable(ctx.obj) else None
    ctx.obj = Env(as_json, conf, journal_dir, cib_file, ctx.invoked_subcommand, contexts)


@cli.command()
@service_argument("services", nargs=-1)
@cib_file_option
def status(services: tuple[str, ...], cib_file: str | None) -> None:
    """What runs behind each floating name on each node (drift, role, guard, failures)."""
    env = wiring.environment(cib_file, read_early=True)
    from pcmkimg.workflows import status

    report = status.run(wiring.context(env), status.StatusRequest(services))
    env.out(report.doc, [printable(line) for line in report.lines()])


@cli.command()
@cib_file_option
def check(cib_file: str | None) -> None:
    """Preflight: list every problem that would make an update unsafe; exit 3 if any."""
    env = wiring.environment(cib_file, read_early=True)
    from pcmkimg.workflows import check

    report = check.run(wiring.context(env), check.CheckRequest())
    doc = report.as_dict()
    if not report.problems:
        env.out(doc, ["ok: no problems found"])
        return
    if not env.json:
        env.out(doc, [f"problem: {p.message}" for p in report.problems])
    failed = CheckFailed(f"{len(report.problems)} problem(s) found", "see the list of problems")
    failed.report = doc
    raise failed


def _services(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> tuple:  # type: ignore[type-arg]
    """One SERVICE (with --image), or SERVICE=REF arguments: never two plain names."""
    if len(value) > 1 and any("=" not in v for v in value):
        raise click.BadParameter(
            f"{' '.join(value)}: give one SERVICE (with --image REF), or SERVICE=REF arguments"
        )
    return value


@cli.command()
@click.argument(
    "services",
    nargs=-1,
    metavar="SERVICE | SERVICE=REF...",
    callback=_services,
    **completes(complete_service),
)
@click.option("--image", "image", default=None, help="The real image REF to run (one SERVICE).")
@click.option(
    "--images",
    "images_file",
    type=click.Path(dir_okay=False),
    default=None,
    help="A release: a file of 'SERVICE = REF [DIGEST]' lines, every service node by node.",
)
@nodes_option("A node to update (repeatable).")
@every_option("Every node that can run the bundle(s).")
@click.option("--digest", default=None, help="Refuse an image with another digest (sha256:...).")
@dry_run_option()
@timeout_option(300, "Seconds to wait for each restart.")
@click.option("--no-restart", is_flag=True, help="Pull and retag only; restart nothing.")
@click.option(
    "--soak",
    type=click.FloatRange(0, 86400),
    default=0,
    show_default=True,
    help="Seconds to watch a node's restarted replicas before the next node.",
)
def update(
    services: tuple[str, ...],
    image: str | None,
    images_file: str | None,
    nodes: tuple[str, ...],
    every: bool,
    digest: str | None,
    dry_run: bool,
    timeout: int,
    no_restart: bool,
    soak: float,
) -> None:
    """Per-node minor update of SERVICE to --image, one node at a time; or a release: every
    SERVICE=REF (or the lines of --images FILE) node by node, each node's services together."""
    from pcmkimg.progress import PullDisplay

    if image is not None:
        if len(services) != 1 or "=" in services[0] or images_file is not None:
            raise UsageError(
                "--image REF goes with exactly one SERVICE",
                "for several services give SERVICE=REF arguments or --images FILE",
            )
    elif not services and images_file is None:
        raise UsageError(
            "nothing to update: give SERVICE --image REF, SERVICE=REF..., or --images FILE",
            "e.g. pcmkimg update galera --image REGISTRY/NS/MARIADB:TAG --all",
        )
    elif digest is not None:
        raise UsageError(
            "--digest goes with --image; in a release each line carries its own digest",
            "write SERVICE=REF DIGEST, or 'SERVICE = REF DIGEST' in the file",
        )
    env = wiring.environment()
    ctx = wiring.context(env, progress=PullDisplay(sys.stderr))  # one updating line per node
    from pathlib import Path

    from pcmkimg.workflows import update

    request = update.UpdateRequest(
        services[0] if image is not None else "",
        image,
        nodes,
        every,
        digest,
        not no_restart,
        timeout,
        dry_run,
        pairs=services if image is None else (),
        images_file=Path(images_file) if images_file else None,
        soak=soak,
    )
    outcome = update.run(ctx, request)
    lines = outcome.plan.lines() if outcome.report is None else [outcome.report.summary()]
    env.out(outcome.as_dict(), lines)


@cli.command()
@service_argument()
@click.option("--node", required=True, **completes(complete_node), help="The node to roll back.")
@timeout_option(300, "Seconds to wait for the restart.")
def rollback(service: str, node: str, timeout: int) -> None:
    """Move the floating name back to the rollback image on NODE and restart that replica."""
    from pcmkimg.workflows import rollback

    env = wiring.environment()
    report = rollback.run(wiring.context(env), rollback.RollbackRequest(service, node, timeout))
    res = report.result
    line = f"{node}: {report.bundle.floating} -> {report.image_id[:12]} ({res.result})"
    env.out(res.as_dict(), [line])


@cli.command()
@service_argument(required=False)
@click.option(
    "--limit",
    default=50,
    show_default=True,
    type=click.IntRange(1, 1_000_000),
    help="Show the last N entries.",
)
def history(service: str | None, limit: int) -> None:
    """The update journal, oldest first."""
    from pcmkimg.workflows import history

    env = wiring.environment()
    report = history.run(wiring.context(env), history.HistoryRequest(service, limit))
    lines = [printable(line) for line in report.lines()]
    env.out(report.entries, lines or ["the journal is empty"])


@cli.group()
def guard() -> None:
    """Wire the floating-image guard agent to a bundle (add, remove, show)."""


@guard.command("add")
@bundle_argument
@click.option("--image", default=None, help="The floating name (default: the bundle's image).")
@dry_run_option("Print the equivalent pcs commands and stop.")
@timeout_option(120, "Seconds to wait for the guard to start.")
def guard_add(bundle: str, image: str | None, dry_run: bool, timeout: int) -> None:
    """Clone of the agent, order and colocation constraints, interleave=true.

    Two CIB changes, so that no replica restarts: first the guard clone alone, which must start
    on every node where a replica runs; then the constraints and interleave=true."""
    from pcmkimg.workflows.guard import add

    env = wiring.environment()
    report = add.run(wiring.context(env), add.AddRequest(bundle, image, dry_run, timeout))
    env.out(report.as_dict(), report.lines())


@guard.command("remove")
@bundle_argument
def guard_remove(bundle: str) -> None:
    """Undo exactly what `guard add` did."""
    from pcmkimg.workflows.guard import remove

    env = wiring.environment()
    report = remove.run(wiring.context(env), remove.RemoveRequest(bundle))
    env.out(report.as_dict(), report.lines())


@guard.command("show")
@bundle_argument
def guard_show(bundle: str) -> None:
    """Print what is wired."""
    from pcmkimg.workflows.guard import show

    env = wiring.environment()
    report = show.run(wiring.context(env), show.ShowRequest(bundle))
    env.out(report.as_dict(), report.lines())


@cli.command()
@bundle_argument
@dry_run_option()
@timeout_option(300, "Seconds to wait for the cluster to settle.")
def migrate(bundle: str, dry_run: bool, timeout: int) -> None:
    """Move BUNDLE from a real or legacy image name to its floating name, with no restart."""
    from pcmkimg.workflows import migrate

    env = wiring.environment()
    report = migrate.run(wiring.context(env), migrate.MigrateRequest(bundle, dry_run, timeout))
    env.out(report.doc, report.lines)


@cli.command()
@service_argument()
@nodes_option("A node to prune (repeatable).")
@every_option("Every cluster node.")
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
    from pcmkimg.workflows import prune

    env = wiring.environment()
    report = prune.run(wiring.context(env), prune.PruneRequest(service, nodes, every, keep))
    error = report.error()
    if error is None:
        env.out(report.as_dict(), report.lines())
        return
    if not env.json:
        env.out(report.as_dict(), report.lines())
    raise error


@cli.command()
@textfile_option(
    "Write DIR/pcmkimg.prom atomically (mode 0644) instead of printing: node_exporter's "
    "--collector.textfile.directory, an existing directory."
)
@cib_file_option
def metrics(textfile: str | None, cib_file: str | None) -> None:
    """The state in Prometheus' text format, for node_exporter's textfile collector.

    Per service and node: the image behind the floating name (pcmkimg_image_info), drift,
    whether the name resolves, the replica active, the guard running, the failed operations;
    per node whether its store was read (pcmkimg_node_up); the update lease; per service the
    last update's end time and result from this node's journal; per service and node whether
    an update is available (pcmkimg_image_outdated, from the last pcmkimg outdated --record).
    Prints the text, or with --textfile replaces DIR/pcmkimg.prom whole and prints nothing."""
    from pathlib import Path

    from pcmkimg.workflows import metrics

    env = wiring.environment(cib_file)
    request = metrics.MetricsRequest(None if textfile is None else Path(textfile))
    report = metrics.run(wiring.context(env), request)
    if env.json:
        path = None if report.path is None else str(report.path)
        env.out({"textfile": path, "text": report.text}, [])
    elif report.path is None:
        click.echo(report.text, nl=False)


@cli.command()
@service_argument("services", nargs=-1)
@click.option(
    "--timeout",
    type=click.FloatRange(1, 600),
    default=30,
    show_default=True,
    help="Seconds each registry gets for all the names asked of it.",
)
@click.option(
    "--record",
    is_flag=True,
    help="Record the result: the node attribute pcmkimg-outdated:SERVICE on each node "
    "(crm_mon -A), the state directory's outdated.json (read by pcmkimg metrics), and the "
    "metrics textfile when --textfile or [metrics] textfile_dir names one.",
)
@textfile_option(
    "With --record: write DIR/pcmkimg.prom as pcmkimg metrics --textfile does "
    "(default: [metrics] textfile_dir of the configuration, else none)."
)
@cib_file_option
def outdated(
    services: tuple[str, ...],
    timeout: float,
    record: bool,
    textfile: str | None,
    cib_file: str | None,
) -> str | None:
    """Which nodes lag behind what the registry serves now.

    For each service and node: the real name behind the floating name, the digest the node
    has, and the digest the registry serves now for that name (skopeo inspect, read-only,
    as the node pulls: registries.conf, certificates, auth.json; each name asked once, in
    parallel). Exit 10 when an update is available on a node, 11 when a registry could not be
    asked or no longer serves a name (one line each on stderr), else 0."""
    from pathlib import Path

    from pcmkimg.workflows import outdated

    env = wiring.environment(cib_file)
    if textfile is not None and not record:
        raise UsageError("--textfile goes with --record", "add --record")
    if record and (env.cib_file or os.environ.get("CIB_file")):
        raise UsageError(
            "--record writes node attributes: not on a saved CIB",
            "run it on a cluster node without --cib-file",
        )
    directory = Path(textfile) if textfile is not None else env.conf.textfile_dir
    request = outdated.OutdatedRequest(services, timeout, record, directory if record else None)
    report = outdated.run(wiring.context(env), request)
    if report.record_errors:  # exit 5; with --json the error document carries the report
        if not env.json:
            env.out(report.doc, [printable(line) for line in report.lines()])
        for line in report.record_errors:
            env.say(f"pcmkimg: error: {printable(line)}")
        raise outdated.RecordFailed(
            f"the result could not be recorded on {len(report.record_errors)} node(s)",
            "see the lines above; check the cluster (crm_mon) and run it again",
            report=report.doc,
        )
    env.out(report.doc, [printable(line) for line in report.lines()])
    from pcmkimg.core.outdated import failed_lines

    for line in failed_lines(report.doc):
        env.say(f"pcmkimg: {printable(line)}")
    return report.finding


# --------------------------------------------------------------------------- entry point


COMPLETE_VAR = "_PCMKIMG_COMPLETE"


def main(argv: Sequence[str] | None = None, *, context: ContextFactory | None = None) -> NoReturn:
    """Run the CLI; every failure becomes one line on stderr and its exit code.

    ``context`` makes the context every command runs with, from its environment (the options
    and the configuration, read first); by default :func:`pcmkimg.wiring.live_context`, the
    live cluster and the configured stores. The tests give one of fakes (``tests.fakes``)."""
    ctx: click.Context | None = None
    finding: str | None = None
    args = list(sys.argv[1:] if argv is None else argv)

    def env() -> Env | None:
        if ctx is not None and isinstance(ctx.obj, Env):
            return ctx.obj
        # Failed before the group ran (e.g. a broken config): still honour --json.
        return Env(True, None, "") if "--json" in args else None

    if COMPLETE_VAR in os.environ:  # TAB in a shell: click's completion protocol
        cli.main(args, prog_name="pcmkimg", complete_var=COMPLETE_VAR)
    try:
        with signals.sigterm_raises():
            ctx = cli.make_context("pcmkimg", args, obj=context)
            with ctx:
                finding = cli.invoke(ctx)  # a command's finding (None: plain success)
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
    sys.exit(FINDING_CODES[finding] if finding else OK)
