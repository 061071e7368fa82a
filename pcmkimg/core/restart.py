"""The rules of a replica restart, on CIB and crm_mon data: may it go ahead, and what failed.

Pure: :mod:`pcmkimg.adapters.pacemaker` reads the cluster, places the constraints made here
(:func:`ban_element`: a ban with a lifetime; :func:`hold_nodes`: where else the replica must
not start meanwhile), and asks these rules before (:func:`check_restartable`), at every look
while it watches (:func:`judge`) and for what failed (:func:`new_failures`). Here, not
in :mod:`pcmkimg.core.plan`, because they are the restart's own preconditions and its verdict,
whoever asks for a restart.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import Literal

from lxml import etree

from pcmkimg.core import cib
from pcmkimg.core import commands as cmd
from pcmkimg.core.errors import RestartNoQuorumError, RestartRefusedError
from pcmkimg.records import dataclass, replace


def restart_blockers(config: cib.Element, bundle: cib.Bundle) -> list[tuple[str, str]]:
    """(problem, fix) for each setting of the cluster or of ``bundle`` under which Pacemaker
    would not carry out an in-place restart of one replica, or could not keep it in place:
    maintenance mode, the bundle or its guard unmanaged or disabled, more than one replica
    per host (a stopped replica could move into a free slot of a node that runs another)."""
    found: list[tuple[str, str]] = []
    if cib.is_true(cib.cluster_properties(config).get("maintenance-mode")):
        fix = f"leave maintenance mode ({cmd.quoted(cmd.leave_maintenance_mode())}) first"
        found.append(("the cluster is in maintenance mode", fix))
    if not bundle.is_managed:
        found.append(
            (f"bundle {bundle.id} is unmanaged", f"{cmd.quoted(cmd.manage(bundle.id))} first")
        )
    if cib.is_true(bundle.meta.get("maintenance")):
        found.append(
            (f"bundle {bundle.id} is in maintenance (meta maintenance=true)",
             f"{cmd.quoted(cmd.leave_resource_maintenance(bundle.id))} first"),
        )  # fmt: skip
    if (bundle.target_role or "").lower() == "stopped":
        found.append(
            (f"bundle {bundle.id} is disabled (target-role=Stopped)",
             f"{cmd.quoted(cmd.enable(bundle.id))} first, or leave it stopped"),
        )  # fmt: skip
    if bundle.guard is not None and not bundle.guard.managed:
        found.append(
            (f"the guard {bundle.guard.clone_id} of {bundle.id} is unmanaged",
             f"{cmd.quoted(cmd.manage(bundle.guard.clone_id))} first"),
        )  # fmt: skip
    if bundle.replicas_per_host > 1:
        found.append(
            (f"bundle {bundle.id} has replicas-per-host={bundle.replicas_per_host}: a replica "
             "stopped for its restart could start again in a free slot of another node, which "
             "pcmkimg cannot hold off without stopping the replica running there",
             f"set replicas-per-host=1 on {bundle.id}, or restart its replicas by hand"),
        )  # fmt: skip
    return found


def check_restartable(
    config: cib.Element, state: cib.ClusterStatus, bundle_id: str, node: str
) -> cib.ReplicaStatus:
    """The replica of ``bundle_id`` on ``node`` if a restart may go ahead; else raise."""
    bundle = cib.bundle(config, bundle_id)
    where = f"restart of {bundle_id} on {node} refused"
    if not state.have_quorum:
        raise RestartNoQuorumError(
            f"{where}: the cluster has no quorum",
            "restore quorum (bring nodes back online), then retry",
        )
    for problem, fix in restart_blockers(config, bundle):
        raise RestartRefusedError(f"{where}: {problem}", fix)
    known = state.node(node)
    if known is None:
        names = ", ".join(n.name for n in state.nodes) or "none"
        raise RestartRefusedError(f"{where}: no node {node!r} (nodes: {names})", "check the name")
    for flag, fix in (
        ("standby", f"{cmd.quoted(cmd.node_unstandby(node))} first"),
        ("maintenance", f"{cmd.quoted(cmd.node_unmaintenance(node))} first"),
    ):
        if getattr(known, flag):
            raise RestartRefusedError(f"{where}: the node is in {flag}", fix)
    if not known.usable:
        raise RestartRefusedError(
            f"{where}: the node is not online and ready", "bring the node online, then retry"
        )
    replica = state.replica_on(bundle_id, node)
    if replica is None or not replica.active:
        raise RestartRefusedError(
            f"{where}: no active replica of {bundle_id} on {node}",
            f"start it first ({cmd.quoted(cmd.cleanup(bundle_id, node))})",
        )
    if replica.failed:
        raise RestartRefusedError(
            f"{where}: the replica has failed (crm_mon shows a failed operation)",
            f"fix the cause, then {cmd.quoted(cmd.cleanup(bundle_id, node))}",
        )
    if not replica.managed:
        raise RestartRefusedError(
            f"{where}: the replica is unmanaged", f"{cmd.quoted(cmd.manage(bundle_id))} first"
        )
    return replica


def new_failures(
    before: Iterable[cib.Failure],
    after: Iterable[cib.Failure],
    bundle: cib.Bundle,
    replica: cib.ReplicaStatus,
    node: str,
) -> list[cib.Failure]:
    """Real (not degraded) failures of this replica in ``after`` that are not in ``before``.

    A failure is the same one when its :attr:`~pcmkimg.core.cib.Failure.key` is (operation,
    node, call id, last-rc-change): a repeated failure of one operation gets a new call id, so
    it counts as new. The order of either list does not matter.
    """
    seen = {f.key for f in before}
    inner = bundle.primitive.id if bundle.primitive else None
    guest = f"{bundle.id}-{replica.replica}"
    return [
        f
        for f in after
        if f.key not in seen
        and not f.degraded
        and f.node in (node, guest)
        and (cib.is_replica_resource(bundle.id, f.resource) or f.resource == inner)
    ]


# --------------------------------------------------------------------------- the constraints

MARK = "pcmkimg"
"""The rule id of a constraint a restart placed is ``<constraint id>-pcmkimg``: what tells
ours (the next update removes a leftover one) from an operator's ``crm_resource --ban``."""

LIFETIME_MARGIN = 0.25
"""A restart's constraints outlive its timeout by this share of it (at least 5 s)."""


def ban_id(resource: str, node: str) -> str:
    """The id ``crm_resource --ban`` gives its location constraint (ours take the same)."""
    return f"cli-ban-{resource}-on-{node}"


def lifetime_end(now: datetime, timeout: float, margin: float | None = None) -> str:
    """When a restart's constraints stop being in force: ``now`` + ``timeout`` + ``margin``
    (default :data:`LIFETIME_MARGIN` of the timeout, at least 5 s), rounded up to the second,
    in UTC, as ``crm_resource --lifetime`` writes it."""
    extra = max(5.0, LIFETIME_MARGIN * timeout) if margin is None else margin
    end = now.astimezone(timezone.utc) + timedelta(seconds=timeout + extra)
    end = end.replace(microsecond=0) + timedelta(seconds=1 if end.microsecond else 0)
    return end.strftime("%Y-%m-%d %H:%M:%SZ")


def ban_element(resource: str, node: str, end: str) -> cib.Element:
    """``cli-ban-<resource>-on-<node>``: -INFINITY for ``resource`` (every role) on ``node``
    while the date is before ``end`` (the rule ``crm_resource --ban --lifetime`` writes, with
    our rule id)."""
    cid = ban_id(resource, node)
    location = etree.Element("rsc_location", id=cid, rsc=resource)
    rule = etree.SubElement(
        location, "rule", {"id": f"{cid}-{MARK}", "score": "-INFINITY", "boolean-op": "and"}
    )
    etree.SubElement(
        rule,
        "expression",
        id=f"{cid}-{MARK}-node",
        attribute="#uname",
        operation="eq",
        value=node,
    )
    etree.SubElement(rule, "date_expression", id=f"{cid}-{MARK}-lifetime", operation="lt", end=end)
    return location


def pin_id(bundle_id: str) -> str:
    """The id of the meta attribute set a restart adds to the bundle (see :func:`pin_element`)."""
    return f"{bundle_id}-{MARK}-pin"


def pin_element(bundle_id: str, end: str) -> cib.Element:
    """``<bundle id=...>`` with the set that pins every replica of ``bundle_id`` to its node
    while the date is before ``end``: ``resource-stickiness=INFINITY``, ahead of the bundle's
    own sets (score INFINITY). With Pacemaker's default stickiness (0) a replica stopped by a
    ban lets the scheduler place the others anew, and they move; pinned, only the banned
    replica stops. A change of meta attributes restarts nothing."""
    bundle = etree.Element("bundle", id=bundle_id)
    bundle.append(_pin_set(pin_id(bundle_id), end))
    return bundle


DEFAULTS_PIN = f"{MARK}-pin"
"""The id of the meta attribute set a restart adds to ``rsc_defaults`` (see
:func:`defaults_pin_element`)."""


def _pin_set(set_id: str, end: str) -> cib.Element:
    meta = etree.Element("meta_attributes", id=set_id, score="INFINITY")
    rule = etree.SubElement(meta, "rule", {"id": f"{set_id}-rule", "boolean-op": "and"})
    etree.SubElement(rule, "date_expression", id=f"{set_id}-lifetime", operation="lt", end=end)
    etree.SubElement(
        meta, "nvpair", id=f"{set_id}-stickiness", name="resource-stickiness", value="INFINITY"
    )
    return meta


def defaults_pin_element(end: str) -> cib.Element:
    """``<rsc_defaults>`` with the set that pins every other resource of the cluster while the
    date is before ``end`` (``resource-stickiness=INFINITY`` ahead of the operator's defaults):
    with stickiness 0 a replica stopped by a ban lets the scheduler rebalance the replicas of
    other bundles too (seen live: two of another bundle's replicas swapped nodes). A resource
    that sets its own stickiness keeps it; ``check`` names stickiness 0."""
    defaults = etree.Element("rsc_defaults")
    defaults.append(_pin_set(DEFAULTS_PIN, end))
    return defaults


def bans_xml(resource: str, nodes: Sequence[str], end: str) -> str:
    """The ``<constraints>`` of one ``cibadmin --modify --scope constraints``: a ban with the
    lifetime ``end`` of ``resource`` on each of ``nodes``."""
    constraints = etree.Element("constraints")
    for node in nodes:
        constraints.append(ban_element(resource, node, end))
    return etree.tostring(constraints, encoding="unicode")


def holds_xml(bundle_id: str, nodes: Sequence[str], end: str, *, pin: bool) -> str:
    """The ``<configuration>`` of one ``cibadmin --modify --scope configuration``: the bans of
    :func:`bans_xml` and, with ``pin``, the bundle's pin (:func:`pin_element`) and the
    defaults' (:func:`defaults_pin_element`), all with the lifetime ``end`` (written again,
    an existing one gets the new end)."""
    return group_holds_xml({bundle_id: nodes}, [bundle_id] if pin else [], end)


def group_holds_xml(bans: Mapping[str, Sequence[str]], pins: Sequence[str], end: str) -> str:
    """:func:`holds_xml` of several bundles in one ``<configuration>`` (one CIB change): the
    bans of each bundle on its nodes (``bans``: bundle -> nodes), the pin of each bundle of
    ``pins`` and, with any pin, the defaults' pin; all with the lifetime ``end``."""
    configuration = etree.Element("configuration")
    constraints = etree.SubElement(configuration, "constraints")
    for bundle_id, nodes in bans.items():
        for node in nodes:
            constraints.append(ban_element(bundle_id, node, end))
    if pins:
        resources = etree.SubElement(configuration, "resources")
        for bundle_id in pins:
            resources.append(pin_element(bundle_id, end))
        configuration.append(defaults_pin_element(end))
    return etree.tostring(configuration, encoding="unicode")


def removal_xpath(bans: Mapping[str, Sequence[str]], pins: Sequence[str]) -> str:
    """The XPath of one ``cibadmin --delete-all --xpath`` (one CIB change) that removes, by
    id, the bans of ``bans`` (bundle -> nodes), the pins of ``pins`` and, with any pin, the
    defaults' pin: what a restart placed, lifted together. Ids never hold a quote (Pacemaker
    ids are XML IDs; node names with one are refused)."""
    ids = [("rsc_location", ban_id(b, n)) for b, nodes in bans.items() for n in nodes]
    ids += [("meta_attributes", pin_id(b)) for b in pins]
    if pins:
        ids.append(("meta_attributes", DEFAULTS_PIN))
    for _, element_id in ids:
        if "'" in element_id or '"' in element_id:
            raise ValueError(f"an id with a quote cannot be named in an XPath: {element_id!r}")
    return "|".join(f"//{tag}[@id='{element_id}']" for tag, element_id in ids)


def own_bans(config: cib.Element, resource: str) -> list[str]:
    """The ids of the constraints a restart of ``resource`` placed (ours, by their rule id),
    in force or expired."""
    prefix = ban_id(resource, "")
    return [
        cid
        for el in config.iterfind("configuration/constraints/rsc_location")
        if (cid := el.get("id", "")).startswith(prefix)
        and el.get("rsc") == resource
        and el.find(f"rule[@id='{cid}-{MARK}']") is not None
    ]


def pinned_bundles(config: cib.Element) -> list[str]:
    """The ids of the bundles that carry the pin of a restart (in force or expired)."""
    return [
        bundle_id
        for el in config.iterfind("configuration/resources//bundle")
        if (bundle_id := el.get("id", ""))
        and el.find(f"meta_attributes[@id='{pin_id(bundle_id)}']") is not None
    ]


def defaults_pinned(config: cib.Element) -> bool:
    """Whether ``rsc_defaults`` carries the pin of a restart (in force or expired)."""
    return (
        config.find(f"configuration/rsc_defaults/meta_attributes[@id='{DEFAULTS_PIN}']") is not None
    )


def own_pin(config: cib.Element, bundle_id: str) -> bool:
    """Whether the bundle carries the pin of a restart (in force or expired)."""
    return bundle_id in pinned_bundles(config)


def hold_nodes(state: cib.ClusterStatus, bundle_id: str, node: str) -> list[str]:
    """The cluster nodes, other than ``node``, where no replica of ``bundle_id`` is active: the
    replica stopped on ``node`` must not start there meanwhile (with fewer replicas than nodes
    a ban on ``node`` alone moves it to such a node, which may not have the new image)."""
    busy = {r.node for r in state.replicas_of(bundle_id) if r.active and r.node}
    # A bundle's guest nodes (a replica's remote connection) run no containers.
    guests = {r.guest or f"{r.bundle_id}-{r.replica}" for r in state.replicas}
    return [
        n.name
        for n in state.nodes
        if n.kind != "guest" and n.name not in guests | busy and n.name != node
    ]


def check_no_bans(
    config: cib.Element, resource: str, nodes: Iterable[str], *, pin: bool = False
) -> None:
    """Refuse when a constraint with the id a restart would place already exists (and, with
    ``pin``, when the bundle carries a pin already)."""
    if pin and (own_pin(config, resource) or defaults_pinned(config)):
        left = pin_id(resource) if own_pin(config, resource) else DEFAULTS_PIN
        raise RestartRefusedError(
            f"restart of {resource} refused: {left} exists already (left by a "
            "restart that was killed)",
            "run the update again: its preflight removes what a killed restart left",
        )
    ids = {el.get("id") for el in config.iterfind("configuration/constraints/rsc_location")}
    taken = [ban_id(resource, n) for n in nodes if ban_id(resource, n) in ids]
    if taken:
        raise RestartRefusedError(
            f"restart of {resource} refused: the constraint {taken[0]} exists already",
            f"remove it ({cmd.quoted(cmd.clear_ban(resource, taken[0].rsplit('-on-', 1)[1]))})"
            ", then retry",
        )


# --------------------------------------------------------------------------- the watch

Phase = Literal["stopping", "starting", "settling", "settled", "done"]


@dataclass(frozen=True)
class Seen:
    """One look at the cluster during a restart: crm_mon's state and, when asked, whether
    the DC's controller is idle (S_IDLE: no transition running)."""

    state: cib.ClusterStatus
    dc_idle: bool | None = None


@dataclass(frozen=True)
class Verdict:
    """What the watch does after one look: go on in ``phase`` (``act`` names the constraint
    change to make first: "unban" the node, "release" the other nodes), or fail."""

    phase: Phase
    act: Literal["", "unban", "release"] = ""
    failed: str = ""
    failures: tuple[cib.Failure, ...] = ()
    bundle: str = ""
    """The bundle whose replica failed (set by :func:`judge_group`)."""


def judge(
    phase: Phase,
    seen: Seen,
    before: Sequence[cib.Failure],
    bundle: cib.Bundle,
    replica: cib.ReplicaStatus,
    node: str,
) -> Verdict:
    """The watch's decision after one look at the cluster in ``phase``.

    - stopping: once the replica runs nowhere, "unban" ``node`` and go on starting;
    - starting: once it is active on ``node`` (container and inner resource), "release" the
      other nodes and go on settling;
    - settling: once the DC's controller is idle with the replica still active on ``node``,
      settled; settled: done when it is idle at the next look too, else settling again (a
      look just after a constraint change may come before the DC noticed it).

    A new failed operation of the replica fails it at once, as does the replica active on
    another node (it must come back in place), or another replica of the bundle active on
    ``node`` (it took the replica's place: ours cannot come back there).
    """
    failures = new_failures(before, seen.state.failures, bundle, replica, node)
    if failures:
        return Verdict(phase, failed="failed", failures=tuple(failures))
    mine = next(
        (r for r in seen.state.replicas_of(bundle.id) if r.replica == replica.replica), None
    )
    if mine is not None and mine.active and mine.node not in (None, node):
        return Verdict(phase, failed=f"the replica started on {mine.node}, not on {node}")
    taken = next(
        (
            r
            for r in seen.state.replicas_of(bundle.id)
            if r.replica != replica.replica and r.active and r.node == node
        ),
        None,
    )
    if taken is not None:  # e.g. a ban of ours written back elsewhere by a stale replace
        return Verdict(
            phase,
            failed=f"replica {taken.replica} of {bundle.id} started on {node}, in the place of "
            f"replica {replica.replica}",
        )
    up = mine is not None and mine.active and mine.node == node and not mine.failed
    if phase == "stopping":
        return Verdict("starting", act="unban") if not (mine and mine.active) else Verdict(phase)
    if phase == "starting":
        ready = up and mine is not None and mine.role not in ("Stopped", "Starting")
        return Verdict("settling", act="release") if ready else Verdict(phase)
    if phase in ("settling", "settled"):
        if not (up and seen.dc_idle):
            return Verdict("settling")
        return Verdict("done" if phase == "settled" else "settled")
    return Verdict(phase)


def controller_idle(crmadmin: cib.Element) -> bool:
    """Whether ``crmadmin --status=NODE --output-as=xml`` shows the controller in S_IDLE."""
    states = [el.get("state") for el in crmadmin.iter() if el.get("state") is not None]
    return bool(states) and all(s == "S_IDLE" for s in states)


def judge_group(
    phase: Phase,
    seen: Seen,
    before: Sequence[cib.Failure],
    replicas: Sequence[tuple[cib.Bundle, cib.ReplicaStatus]],
    node: str,
) -> Verdict:
    """:func:`judge` for the replicas of several bundles on ``node`` restarted together: the
    first failure of any fails them all; the group moves to the next phase (and makes its
    constraint change, for all of them at once) only when every replica would. Their bans on
    ``node`` are thus lifted together once every one is stopped (Pacemaker stops and starts
    them in its own order: a bundle ordered after another one stops first and starts last,
    once), and the rest once every one is active again. One replica: :func:`judge`."""
    verdicts = [judge(phase, seen, before, b, r, node) for b, r in replicas]
    for (bundle, _), verdict in zip(replicas, verdicts):
        if verdict.failed:
            return replace(verdict, bundle=bundle.id)
    nexts = {v.phase for v in verdicts}
    if len(nexts) == 1:
        return verdicts[0]
    return Verdict("settling" if phase in ("settling", "settled") else phase)
