"""``pcmkimg update``: one service (``SERVICE --image REF``) or a release (``SERVICE=REF...``,
``--images FILE``), node by node: the request, the plan, the outcome and :func:`run`.

A single service's update is the release of that one service: both run through
:func:`pcmkimg.workflows.release.execute` and the node step of
:mod:`pcmkimg.workflows.nodestep`, with the run's :class:`~pcmkimg.workflows.session.Session`.
They differ in what the operator reads: a single service's plan, report and journal lines are
an update's (``--soak`` makes it a release of one service).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Protocol, Union

from pcmkimg.adapters.journal import Journal
from pcmkimg.core import naming, plan, release
from pcmkimg.core.errors import ReleaseFileError
from pcmkimg.core.reference import parse
from pcmkimg.core.report import ReleaseReport, UpdateReport
from pcmkimg.errors import PcmkimgError, UsageError
from pcmkimg.records import dataclass
from pcmkimg.workflows.context import Context
from pcmkimg.workflows.release import execute
from pcmkimg.workflows.session import Session


@dataclass(frozen=True)
class UpdateRequest:
    """``pcmkimg update SERVICE --image REF | SERVICE=REF... | --images FILE (--node N... |
    --all)``: one service with ``image``, else a release of ``pairs`` and the file's lines."""

    service: str = ""
    image: str | None = None
    """The real image of ``service`` (None: a release)."""
    nodes: tuple[str, ...] = ()
    """The nodes to update; empty with ``every``."""
    every: bool = False
    digest: str | None = None
    """The digest ``image`` must have (a release's lines carry their own)."""
    restart: bool = True
    """False with ``--no-restart``: pull and retag only."""
    timeout: float = 300
    dry_run: bool = False
    pairs: tuple[str, ...] = ()
    """``SERVICE=REF`` arguments (``SERVICE = REF [DIGEST]`` lines of a file are the same)."""
    images_file: Path | None = None
    soak: float = 0
    """Seconds to watch a node's restarted replicas before the next node (a release)."""

    @property
    def single(self) -> bool:
        """One service's update (a release of one service with ``--soak``)."""
        return self.image is not None and not self.soak


Planned = Union[plan.Plan, release.ReleasePlan]
"""An update's plan: one service's, or a release's."""


@dataclass
class UpdateOutcome:
    """What ``update`` did: its plan, and the report of the nodes (None with ``--dry-run``)."""

    plan: Planned
    report: UpdateReport | ReleaseReport | None = None

    def as_dict(self) -> dict[str, object]:
        doc = outcome_document(self.plan, self.report)
        if isinstance(self.plan, release.ReleasePlan):
            doc["promotions"] = [m.as_dict() for m in self.plan.promotions]
        return doc


class Reported(Protocol):
    """What a run did as an outcome shows it: an update's or a release's report."""

    def as_dict(self) -> dict[str, object]: ...

    def summary(self) -> str: ...


def outcome_document(the_plan: Planned, report: Reported | None) -> dict[str, object]:
    """The ``--json`` document of an update or a release: the plan, its targets, and what was
    done (``dry_run`` when nothing was)."""
    doc: dict[str, object] = {"plan": the_plan.lines(), "targets": list(the_plan.targets)}
    if report is None:
        return {**doc, "dry_run": True}
    return {**doc, "report": report.as_dict(), "summary": report.summary()}


@contextlib.contextmanager
def reported_on_failure(jrnl: Journal, service: str, report: Reported) -> Iterator[None]:
    """A failure or an interruption of the body carries ``report`` (what was done so far:
    ``--json`` shows it) and is journalled as ``aborted``."""
    try:
        yield
    except BaseException as exc:
        if isinstance(exc, PcmkimgError):
            exc.report = report.as_dict()
        else:  # an interruption (or a bug) carries the report too
            exc.__dict__["report"] = report.as_dict()
        with contextlib.suppress(OSError):  # the error matters more than its journal line
            jrnl.record("aborted", service=service, error=str(exc))
        raise


def one_of(nodes: Sequence[str], every: bool) -> None:
    """Either nodes or every node, never both, never neither."""
    if bool(nodes) == every:
        raise UsageError("give either --node (one or more) or --all", "e.g. --node controller-1")


def plan_for(ctx: Context, req: UpdateRequest) -> Planned:
    """The plan of ``req`` (what ``--dry-run`` prints and :func:`run` executes); bad input is
    refused before the cluster is read."""
    one_of(req.nodes, req.every)
    if not req.single:
        return _release_plan(ctx, req)
    assert req.image is not None
    target = parse(req.image)
    if naming.classify(target, ctx.scheme) is not None:
        raise UsageError(
            f"--image {req.image} is a floating or rollback name, not a real image",
            "give the registry reference of the image to run, e.g. REGISTRY/NS/IMAGE:TAG",
        )
    if req.digest is not None:
        parse(f"x@{req.digest}")
        if target.digest is not None and target.digest != req.digest:
            raise UsageError(
                f"--image {req.image} is pinned to {target.digest}, --digest asks for {req.digest}",
                "give one digest, or the same digest in both",
            )
    cluster = ctx.cluster.read_cluster()
    bundle = plan.find_bundle(cluster, req.service, ctx.scheme)
    facts = plan.node_facts(cluster, bundle.id)
    nodes = None if req.every else list(req.nodes)
    return plan.plan_update(bundle, target, facts, nodes, digest=req.digest, restart=req.restart)


def _release_plan(ctx: Context, req: UpdateRequest) -> release.ReleasePlan:
    entries = release.parse_release(_release_lines(req), ctx.scheme)
    cluster = ctx.cluster.read_cluster()
    nodes = None if req.every else list(req.nodes)
    return release.plan_release(cluster, entries, nodes, ctx.scheme, restart=req.restart)


def _release_lines(req: UpdateRequest) -> list[tuple[str, str]]:
    """The release's lines: the file's, then the arguments' (``SERVICE=REF``; one service
    with ``--soak`` is one such argument)."""
    lines: list[tuple[str, str]] = []
    if req.images_file is not None:
        try:
            text = req.images_file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ReleaseFileError(
                f"--images {req.images_file}: cannot read it ({exc})",
                "give a readable file of SERVICE = IMAGE [DIGEST] lines",
            ) from None
        lines += [(t, f"{req.images_file}:{n}") for n, t in enumerate(text.splitlines(), 1)]
    pairs = req.pairs
    if req.image is not None:
        pairs = (f"{req.service}={req.image} {req.digest or ''}".strip(),)
    for n, pair in enumerate(pairs, 1):
        if "=" not in pair:
            raise UsageError(
                f"argument {pair!r}: give SERVICE=REF (several services), or one SERVICE "
                "with --image REF",
                "e.g. pcmkimg update galera=REGISTRY/NS/MARIADB:TAG rabbitmq=... --all",
            )
        lines.append((pair, f"argument {n}"))
    return lines


def run(ctx: Context, req: UpdateRequest) -> UpdateOutcome:
    """Plan, then (unless ``dry_run``) run the plan with the context's ports. On failure or
    interruption the error carries the report of the nodes done so far."""
    the_plan = plan_for(ctx, req)
    outcome = UpdateOutcome(the_plan)
    if req.dry_run:
        return outcome
    for line in the_plan.lines():
        ctx.say(line)
    report: UpdateReport | ReleaseReport
    if isinstance(the_plan, plan.Plan):
        bundle = the_plan.bundle
        report = UpdateReport(bundle.id, bundle.service, str(the_plan.ref or the_plan.image))
        job, journaled = release.of_update(the_plan), bundle.service
    else:
        report, job, journaled = ReleaseReport(), the_plan, "release"
    outcome.report = report
    jrnl = ctx.journal()
    with ctx.open_stores() as stores:
        session = Session(
            ctx.cluster,
            stores,
            jrnl,
            ctx.say,
            req.timeout,
            ctx.lease_period,
            ctx.progress,
            release=job is the_plan,
            soak=req.soak if req.restart else 0,
        )
        with reported_on_failure(jrnl, journaled, report):
            execute(session, job, report)
    ctx.say(report.summary())
    return outcome
