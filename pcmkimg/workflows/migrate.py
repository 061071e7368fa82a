"""``pcmkimg migrate``: move a bundle from a real or legacy image name to a floating name,
with no restart.

The image behind the new name is the very image the replicas run, so nothing needs to restart;
but Pacemaker restarts a container whose parameters (the image name) change. So the bundle is
made unmanaged and its image changed in one CIB patch, its replicas are re-probed
(``crm_resource --refresh``: the probe records the running containers under the new
parameters), and it is managed again. Every node is checked before anything changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pcmkimg.adapters import lease as leasing
from pcmkimg.adapters import signals
from pcmkimg.core import cib, naming
from pcmkimg.core import commands as cmd
from pcmkimg.core.errors import (
    InvalidReference,
    NodesUnreachable,
    PreflightFailed,
    UnknownService,
)
from pcmkimg.core.images import Resolved
from pcmkimg.core.plan import (
    Cluster,
    Say,
    node_facts,
)
from pcmkimg.errors import LeftBehind, PcmkimgError
from pcmkimg.records import dataclass
from pcmkimg.workflows.context import ClusterPort, Context, StoresPort


class NothingToMigrate(PcmkimgError):
    """The bundle already runs on a floating name."""


@dataclass(frozen=True)
class Migration:
    bundle: str
    service: str
    current: str
    floating: str
    nodes: tuple[str, ...]

    def lines(self) -> list[str]:
        return [
            f"migrate bundle {self.bundle} from {self.current} to {self.floating}",
            f" 1. on {', '.join(self.nodes)}: tag the image behind {self.current} as "
            f"{self.floating}",
            f" 2. one CIB change: {self.bundle} unmanaged, image={self.floating}",
            f" 3. re-probe {self.bundle} ({cmd.shown(cmd.refresh(self.bundle))}): the running "
            "containers are recorded under the new name, nothing restarts",
            f" 4. {self.bundle} managed again",
            f"then wire the guard: {cmd.shown(cmd.guard_add(self.bundle))}",
        ]


def plan_migration(cluster: Cluster, wanted: str, scheme: naming.Scheme) -> Migration:
    """Pure: which bundle, from which name, to which floating name, on which nodes."""
    matches = []
    for b in cib.bundles(cluster.config):
        try:
            service = naming.service_of(b.image) if b.image else None
        except (InvalidReference, PcmkimgError):
            service = None
        if wanted in (b.id, service):
            matches.append((b, service))
    if not matches:
        raise _unknown(wanted, cluster)
    if len(matches) > 1:
        raise UnknownService(
            f"{wanted!r} matches several bundles: {', '.join(b.id for b, _ in matches)}",
            "name the bundle id",
        )
    bundle, _ = matches[0]
    found = naming.classify(bundle.image, scheme)
    if found is not None and found.scheme == "common" and not found.rollback:
        raise NothingToMigrate(
            f"bundle {bundle.id} already runs on the floating name {bundle.image}",
            f"nothing to do; see {cmd.shown(cmd.status(found.service))}",
        )
    if found is not None and found.rollback:
        service = found.service
        target = naming.floating_name(service, scheme)
    elif found is not None:
        target = naming.migration_target(bundle.image, scheme)
        service = found.service
    else:
        service = naming.service_of(bundle.image)
        target = naming.floating_name(service, scheme)
    nodes = tuple(f.name for f in node_facts(cluster, bundle.id) if f.can_run)
    return Migration(bundle.id, service, bundle.image, str(target), nodes)


def _unknown(wanted: str, cluster: Cluster) -> PcmkimgError:

    ids = ", ".join(b.id for b in cib.bundles(cluster.config)) or "none"
    return UnknownService(f"no bundle {wanted!r}", f"bundles: {ids}")


def check_nodes(m: Migration, stores: StoresPort) -> dict[str, str]:
    """Image ID of the current name on each node; every problem at once, nothing changed."""
    answers = stores.each(list(m.nodes), lambda s: (s.resolve(m.current), s.resolve(m.floating)))
    problems, unreachable, ids = [], [], {}
    for node, answer in answers.items():
        if isinstance(answer, Exception):
            unreachable.append(f"{node}: {answer}")
            continue
        now, floating = answer
        if not isinstance(now, Resolved):
            problems.append(f"{m.current} is not in the store of {node}")
            continue
        if isinstance(floating, Resolved) and floating.id != now.id:
            problems.append(
                f"{m.floating} already names another image ({floating.id[:12]}) on {node}"
            )
            continue
        ids[node] = now.id
    if unreachable:
        raise NodesUnreachable("; ".join(unreachable), "reach every node, then migrate again")
    if problems:
        raise PreflightFailed(
            "migration refused, nothing changed: " + "; ".join(problems),
            f"make {m.current} present on every node that can run {m.bundle}",
        )
    return ids


def _containers(stores: StoresPort, nodes: Sequence[str], prefix: str) -> dict[str, str]:
    answers = stores.each(list(nodes), lambda s: s.containers(running_only=True))
    out = {}
    for node, answer in answers.items():
        if not isinstance(answer, Exception):
            for c in answer:
                if c.name.lstrip("/").startswith(prefix):
                    out[f"{node}/{c.name.lstrip('/')}"] = c.id
    return out


def _unmanaged(cluster: ClusterPort, bundle: str) -> bool:
    """Whether the bundle is unmanaged now (True when that can't be read: say it may be)."""
    try:
        return not cib.bundle(cluster.query_cib(), bundle).is_managed
    except PcmkimgError:
        return True


def run_migration(
    cluster: ClusterPort,
    stores: StoresPort,
    m: Migration,
    say: Say,
    timeout: float,
    lease_period: float,
) -> dict[str, Any]:
    ids = check_nodes(m, stores)
    with leasing.held(cluster, lease_period, say=say):
        before = _containers(stores, m.nodes, f"{m.bundle}-")
        for node in m.nodes:
            stores.get(node).retag(m.floating, m.current)
            say(f"{node}: {m.floating} names {ids[node][:12]}")
        previous = cib.bundle(cluster.query_cib(), m.bundle).meta.get("is-managed")

        def edit(config: cib.Element) -> cib.CibChange:
            unmanaged = cib.set_bundle_meta(config, m.bundle, "is-managed", "false")
            moved = cib.set_bundle_image(unmanaged.new_cib, m.bundle, m.floating)
            return cib.make_change(
                config, moved.new_cib, f"{m.bundle}: unmanaged, image {m.floating}"
            )

        changed = False
        try:
            cluster.update_cib(edit)
            changed = True
            say(f"{m.bundle}: image is now {m.floating} (unmanaged while re-probing)")
            cluster.refresh(m.bundle)
            cluster.settle(timeout)
            cluster.update_cib(lambda c: cib.set_bundle_meta(c, m.bundle, "is-managed", previous))
        except (PcmkimgError, KeyboardInterrupt, signals.Terminated) as exc:
            # Managed again before the re-probe recorded the new name, every replica would
            # restart: leave the bundle unmanaged and say how to finish.
            if not changed and not _unmanaged(cluster, m.bundle):
                raise
            raise LeftBehind(
                f"{m.bundle} may be left unmanaged (image {m.floating}): the migration did not "
                f"finish ({exc.one_line() if isinstance(exc, PcmkimgError) else 'interrupted'})",
                f"{cmd.quoted(cmd.refresh(m.bundle))}, {cmd.quoted(cmd.wait())}, then "
                f"{cmd.quoted(cmd.manage(m.bundle))}",
            ) from exc
        cluster.settle(timeout)
        after = _containers(stores, m.nodes, f"{m.bundle}-")
    restarted = sorted(k for k, v in before.items() if after.get(k) != v)
    say(f"{m.bundle}: managed again; containers restarted: {len(restarted)}")
    return {
        "bundle": m.bundle,
        "from": m.current,
        "to": m.floating,
        "nodes": list(m.nodes),
        "restarted": restarted,
    }


# --------------------------------------------------------------------------- the command


@dataclass(frozen=True)
class MigrateRequest:
    """``pcmkimg migrate BUNDLE [--dry-run]``."""

    bundle: str
    dry_run: bool = False
    timeout: float = 300


@dataclass
class MigrateReport:
    """What ``migrate`` did (or, with ``dry_run`` or nothing to do, would do)."""

    doc: dict[str, Any]
    lines: list[str]


def run(ctx: Context, req: MigrateRequest) -> MigrateReport:
    """Plan the migration of ``req.bundle`` and, unless ``dry_run``, carry it out."""
    cluster = ctx.cluster.read_cluster()
    try:
        m = plan_migration(cluster, req.bundle, ctx.scheme)
    except NothingToMigrate as exc:
        return MigrateReport({"changed": False, "reason": exc.message}, [exc.message])
    if req.dry_run:
        return MigrateReport({"plan": m.lines(), "dry_run": True}, m.lines())
    for line in m.lines():
        ctx.say(line)
    with ctx.open_stores() as stores:
        result = run_migration(ctx.cluster, stores, m, ctx.say, req.timeout, ctx.lease_period)
    return MigrateReport(
        result, [f"{m.bundle}: now on {m.floating}; restarted: {len(result['restarted'])}"]
    )
