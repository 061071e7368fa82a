"""The logic of ``ocf:pcmkimg:floating-image``, the guard of a bundle.

The agent runs as a clone ordered before a bundle and colocated with it. On
each node it checks that the bundle's floating image name resolves in the
node's own image store, so that the bundle never tries to pull a name that no
registry holds:

* start: resolve the name; if it is not there, refuse with rc 5 (not
  installed: a hard error on this node only) and an exit reason that names
  the fix. On success record the state and publish the real image as a
  transient node attribute.
* monitor: 7 when stopped; 0 while the name resolves (refreshing the
  attribute when the tag moved). When the name vanished under a running
  replica (another tool untagged it), heal it: tag the image it recorded (at
  start, or when the tag moved) with it again, else the image that the running
  containers created from the name run, so that a restart here does not make
  the bundle pull the name.
  190 (degraded) when there is no such image or podman refuses the tag: the
  container itself is fine, and a failure would restart it.
* stop: always 0; clears the state and the attribute.
* validate-all: parameters only at OCF_CHECK_LEVEL 0 (so that ``pcs resource
  create`` works on a node without the image); at level 10 the name must also
  resolve here.

OCF return codes are chosen here and nowhere else. Every import beyond the
toolkit is lazy, so that meta-data and monitor stay fast: meta-data imports
nothing more; monitor reads the store with :mod:`pcmkimg.adapters.localstore` (standard
library only) and describes the image with :mod:`pcmkimg.core.naming`, never
podman-py, lxml, the configuration or the pacemaker runner (unless the image
moved); only a heal imports more. It trusts the floating name recorded at start
when the parameter still reads the same, so that a monitor that finds the name
does not parse it again.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass

from ocf import OCFRC, Action, Agent, Context, OCFError, Parameter
from pcmkimg import GUARD_MONITOR_INTERVAL, GUARD_TIMEOUTS, PODMAN_SOCKET

DEFAULT_URL = PODMAN_SOCKET
STATE_DIR = "/run/pcmkimg"
REASON_MAX = 128
"""Pacemaker keeps only the first 128 characters of an exit reason."""


@dataclass(frozen=True)
class Published:
    """What the agent recorded on start: the real image behind the floating name."""

    image: str
    image_id: str
    value: str
    attribute: str


def _floating(ctx: Context):  # type: ignore[no-untyped-def]
    from pcmkimg.core import reference

    try:
        return reference.parse(ctx.param("image") or "")
    except reference.InvalidReference as exc:
        ctx.log.error(f"parameter image: {exc.one_line()}")
        raise OCFError(OCFRC.ERR_CONFIGURED, fit(f"image: {exc.reason}")) from None


def _service(ctx: Context) -> str:
    from pcmkimg.core import naming

    return naming.service_of_floating(_floating(ctx))


def _attribute(ctx: Context) -> str:
    from pcmkimg.core import naming

    return naming.attribute_name(_service(ctx), ctx.param("attribute"))


def _node(ctx: Context) -> str:
    if ctx.node:
        return ctx.node
    import socket

    return socket.gethostname()


def _state_base(ctx: Context) -> str:
    """The state file's path without its suffix (``.json``, or ``.tmp`` while written)."""
    name = (ctx.instance or "floating-image").replace("/", "_")
    return os.path.join(ctx.param("state_dir") or STATE_DIR, name)


def _state_path(ctx: Context) -> str:
    return f"{_state_base(ctx)}.json"


def _read_state(ctx: Context) -> Published | None:
    import json

    try:
        with open(_state_path(ctx)) as src:
            raw = json.load(src)
        return Published(**raw)
    except (OSError, ValueError, TypeError):
        return None


def _write_state(ctx: Context, state: Published) -> None:
    import json
    import stat

    base = _state_base(ctx)
    directory = os.path.dirname(base)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    st = os.lstat(directory)
    if (
        not stat.S_ISDIR(st.st_mode)
        or st.st_uid != os.geteuid()
        or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    ):
        raise OCFError(
            OCFRC.ERR_PERM,
            f"state_dir {directory} must be a directory owned by uid {os.geteuid()}, "
            "not writable by others",
        )
    tmp = f"{base}.tmp"
    try:
        os.unlink(tmp)  # a stale one from a crash; never write through what is there
    except FileNotFoundError:
        pass
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump(asdict(state), out)
    os.replace(tmp, f"{base}.json")


def _image_text(ctx: Context, recorded: str | None = None) -> str:
    """The image parameter as a checked reference's text.

    ``recorded`` is the floating name a start recorded: it was checked then, and the text of a
    checked reference parses back to itself, so a parameter that still reads the same needs no
    parsing again.
    """
    text = ctx.param("image") or ""
    if recorded is not None and text == recorded:
        return text
    return str(_floating(ctx))


def _url(ctx: Context) -> str:
    return ctx.param("podman_url") or DEFAULT_URL


def _resolve(ctx: Context, recorded: str | None = None):  # type: ignore[no-untyped-def]
    """The floating name in this node's store: Resolved, or None when it is not there.

    ``recorded``: the floating name recorded at start (see :func:`_image_text`).
    """
    return _find(ctx, _image_text(ctx, recorded))


def _find(ctx: Context, name: str):  # type: ignore[no-untyped-def]
    """A name or an image ID in this node's store: Resolved, or None when it is not there."""
    from pcmkimg.adapters import localstore

    try:
        found = localstore.resolve_local(name, _url(ctx), node=_node(ctx), timeout=8)
        return found if isinstance(found, localstore.Resolved) else None
    except localstore.ImageError as exc:
        ctx.log.error(f"cannot read the image store on {_node(ctx)}: {exc.one_line()}")
        raise OCFError(OCFRC.ERR_GENERIC, fit(f"image store unreadable: {exc.message}")) from None


def _running_images(ctx: Context, name: str) -> tuple[str, ...]:
    """The IDs of the images that this node's running containers created from ``name`` run."""
    from pcmkimg.adapters import localstore

    try:
        return localstore.running_images(name, _url(ctx), node=_node(ctx), timeout=8)
    except localstore.ImageError as exc:
        ctx.log.warning(f"cannot list the containers on {_node(ctx)}: {exc.one_line()}")
        return ()


def _tag(ctx: Context, image_id: str, name: str) -> None:
    """Give ``name`` to the image; localstore.ImageError when podman refuses."""
    from pcmkimg.adapters import localstore

    localstore.tag_local(image_id, name, _url(ctx), node=_node(ctx), timeout=8)


def fit(*candidates: str) -> str:
    """The first candidate that fits in an exit reason, else the last one cut to fit."""
    for text in candidates:
        if len(text) <= REASON_MAX:
            return text
    return candidates[-1][: REASON_MAX - 3] + "..."


def describe(resolved) -> str:  # type: ignore[no-untyped-def]
    """The attribute value (:func:`pcmkimg.core.naming.describe`)."""
    from pcmkimg.core import naming

    return naming.describe(resolved)


def _publish(ctx: Context, resolved) -> Published:  # type: ignore[no-untyped-def]
    state = Published(
        image=str(_floating(ctx)),
        image_id=resolved.id,
        value=describe(resolved),
        attribute=_attribute(ctx),
    )
    _write_state(ctx, state)
    _set_attribute(ctx, state.attribute, state.value)
    return state


def _set_attribute(ctx: Context, name: str, value: str | None) -> None:
    from pcmkimg.adapters import pacemaker

    try:
        runner = pacemaker.Runner(timeout=10)  # well inside the action's own timeout
        if value is None:
            pacemaker.delete_node_attribute(runner, _node(ctx), name)
        else:
            pacemaker.set_node_attribute(runner, _node(ctx), name, value)
    except Exception as exc:  # the attribute is informative: never fail the guard for it
        ctx.log.warning(f"could not update node attribute {name}: {exc}")


def fix_hint(ctx: Context, node: str | None = None, service: str | None = None) -> str:
    """The update that puts a real image behind the name on this node (or on ``node``)."""
    from pcmkimg.core import commands

    return commands.shown(commands.update(node or _node(ctx), service or _service(ctx)))


def with_fix(ctx: Context, *heads: str) -> str:
    """An exit reason: the first of ``heads`` that fits with the fix of this node, else the last
    one with the fix in its generic form. Every candidate names a whole command that parses."""
    hint = fix_hint(ctx)
    generic = fix_hint(ctx, "NODE", "SERVICE")
    return fit(*(f"{head}; fix: {hint}" for head in heads), f"{heads[-1]}; fix: {generic}")


def unresolved_reason(ctx: Context) -> str:
    """Short: Pacemaker keeps only the first 128 characters of an exit reason."""
    ctx.log.error(
        f"{_floating(ctx)} is not in the image store of {_node(ctx)}: refusing to start, so "
        "that the bundle does not try to pull a name that no registry holds"
    )
    floating, node = _floating(ctx), _node(ctx)
    return with_fix(
        ctx, f"{floating} missing on {node}", f"image missing on {node}", "image missing here"
    )


def start(ctx: Context) -> int:
    resolved = _resolve(ctx)
    if resolved is None:
        raise OCFError(OCFRC.ERR_INSTALLED, unresolved_reason(ctx))
    state = _publish(ctx, resolved)
    ctx.log.info(f"{state.image} is {state.value} ({state.image_id[:12]}) on {_node(ctx)}")
    return OCFRC.SUCCESS


def stop(ctx: Context) -> int:
    state = _read_state(ctx)
    if state is not None:
        _set_attribute(ctx, state.attribute, None)
    try:
        os.unlink(_state_path(ctx))
    except FileNotFoundError:
        pass
    except OSError as exc:
        ctx.log.warning(f"could not remove {_state_path(ctx)}: {exc}")
    return OCFRC.SUCCESS


def monitor(ctx: Context) -> int:
    state = _read_state(ctx)
    if state is None:
        return OCFRC.NOT_RUNNING
    try:
        resolved = _resolve(ctx, state.image)
        if resolved is None:
            resolved = _heal(ctx, state)
    except OCFError as exc:
        ctx.exit_reason(fit(f"running; {exc.reason}"))
        return OCFRC.DEGRADED
    if resolved is None:
        return OCFRC.DEGRADED
    if resolved.id != state.image_id or describe(resolved) != state.value:
        try:
            new = _publish(ctx, resolved)
        except (OCFError, OSError) as exc:
            # The replica is fine: a failed monitor here would restart it. Say it, degraded.
            why = exc.reason if isinstance(exc, OCFError) else str(exc)
            ctx.log.error(f"could not record the new image: {why}")
            ctx.exit_reason(
                fit(
                    f"could not record the new image: {why}",
                    "could not record the new image (see log)",
                )
            )
            return OCFRC.DEGRADED
        ctx.log.info(f"{new.image} moved to {new.value} ({new.image_id[:12]})")
    return OCFRC.SUCCESS


def _heal(ctx: Context, state: Published):  # type: ignore[no-untyped-def]
    """The floating name vanished under the running replica: give it back to the image recorded
    in the state, else to the image that the name's running containers run, so that a restart
    here does not make the bundle pull the name. The name resolved again; or None, with the exit
    reason of a 190 (degraded), when there is no such image or podman refuses the tag. Never a
    failure: that would restart a healthy replica."""
    from pcmkimg.adapters import localstore

    node = _node(ctx)
    image_id = _heal_source(ctx, state)
    if image_id is None:
        ctx.log.warning(
            f"{state.image} vanished from {node}, and no image to give it back to is here "
            f"(last recorded: {state.image_id[:12]}): the running replica is fine, but a "
            f"restart here would fail; fix: {fix_hint(ctx)}"
        )
        ctx.exit_reason(
            with_fix(ctx, f"{state.image} vanished", f"image vanished on {node}", "image vanished")
        )
        return None
    try:
        _tag(ctx, image_id, state.image)
    except localstore.ImageError as exc:
        ctx.log.error(
            f"{state.image} vanished from {node}, and tagging {image_id[:12]} with it again "
            f"failed: {exc.one_line()}; the running replica is fine, but a restart here would "
            f"fail; fix: {fix_hint(ctx)}"
        )
        head = state.image if len(state.image) <= REASON_MAX // 2 else "image"
        ctx.exit_reason(fit(f"{head} vanished; re-tag failed: {exc.detail}"))
        return None
    ctx.log.warning(
        f"{state.image} vanished from {node} under the running replica: tagged image "
        f"{image_id[:12]} with it again, so that a restart here does not pull it"
    )
    resolved = _resolve(ctx, state.image)
    if resolved is None:  # untagged again at once: the next monitor tries again
        ctx.exit_reason(fit(f"{state.image} vanished again after its re-tag"))
    return resolved


def _heal_source(ctx: Context, state: Published) -> str | None:
    """The image to give the vanished name back to: the one recorded in the state while it is in
    the store, else the one that the running containers created from the name run (if only one).
    """
    if state.image_id and _find(ctx, state.image_id) is not None:
        return state.image_id
    running = _running_images(ctx, state.image)
    if len(running) > 1:
        ctx.log.warning(
            f"the containers of {state.image} run {len(running)} images on {_node(ctx)}: "
            "not guessing which one to give the name back to"
        )
    return running[0] if len(running) == 1 else None


def validate(ctx: Context) -> int:
    _floating(ctx)
    url = _url(ctx)
    if not url.startswith("unix://"):
        raise OCFError(
            OCFRC.ERR_CONFIGURED,
            fit(
                f"podman_url {url!r}: the guard reads the local store only; use unix:///PATH",
                "podman_url: the guard reads the local store only; use unix:///PATH",
            ),
        )
    if ctx.check_level >= 10 and _resolve(ctx) is None:
        raise OCFError(OCFRC.ERR_INSTALLED, unresolved_reason(ctx))
    return OCFRC.SUCCESS


AGENT = Agent(
    name="floating-image",
    version="1.0",
    shortdesc="Guards a bundle whose image is a node-local floating name",
    longdesc=(
        "Runs as a clone ordered before a Pacemaker bundle and colocated with it. It refuses to "
        "start (rc 5, on this node only) when the floating image name is not in this node's "
        "image store, so that the bundle never tries to pull a name that no registry holds. "
        "It publishes the real image behind the floating name as a transient node attribute. "
        "When the name vanishes under a running replica, the monitor gives it back to the "
        "image it named (or that the replica runs); it reports degraded (190) when it cannot."
    ),
    parameters=[
        Parameter(
            "image",
            "Floating image name",
            "The bundle's floating image name, e.g. cluster.common.tag/mariadb:pcmklatest.",
            required=True,
            unique=True,
        ),
        Parameter(
            "podman_url",
            "Local podman API socket",
            "unix:// URL of the local podman API socket. When it can't be reached the agent "
            "falls back to the podman command.",
            default=DEFAULT_URL,
        ),
        Parameter(
            "attribute",
            "Node attribute",
            "Name of the transient node attribute that shows the real image on each node. "
            "Default: pcmkimg-SERVICE.",
        ),
        Parameter(
            "state_dir",
            "State directory",
            "Root-owned directory for the agent's state.",
            default=STATE_DIR,
        ),
    ],
    actions=[
        # As `pcmkimg guard add` configures them (pcmkimg.GUARD_TIMEOUTS).
        Action("start", timeout=GUARD_TIMEOUTS["start"]),
        Action("stop", timeout=GUARD_TIMEOUTS["stop"]),
        Action("monitor", timeout=GUARD_TIMEOUTS["monitor"], interval=GUARD_MONITOR_INTERVAL),
        Action("validate-all", timeout=GUARD_TIMEOUTS["validate-all"]),
    ],
    handlers={"start": start, "stop": stop, "monitor": monitor, "validate-all": validate},
)
