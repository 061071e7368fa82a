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
  attribute when the tag moved); 190 (degraded) when the name vanished under a
  running replica, because the container itself is fine.
* stop: always 0; clears the state and the attribute.
* validate-all: parameters only at OCF_CHECK_LEVEL 0 (so that ``pcs resource
  create`` works on a node without the image); at level 10 the name must also
  resolve here.

OCF return codes are chosen here and nowhere else. Every import beyond the
toolkit is lazy, so that meta-data and monitor stay fast: meta-data imports
nothing more; monitor reads the store with :mod:`pcmkimg.localstore` (standard
library only) and describes the image with :mod:`pcmkimg.naming`, never
podman-py, lxml, the configuration or the pacemaker runner (unless the image
moved). It trusts the floating name recorded at start when the parameter still
reads the same, so that a monitor that finds the name does not parse it again.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass

from ocf import OCFRC, Action, Agent, Context, OCFError, Parameter

DEFAULT_URL = "unix:///run/podman/podman.sock"
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
    from pcmkimg import reference

    try:
        return reference.parse(ctx.param("image") or "")
    except reference.InvalidReference as exc:
        ctx.log.error(f"parameter image: {exc.one_line()}")
        raise OCFError(OCFRC.ERR_CONFIGURED, fit(f"image: {exc.reason}")) from None


def _service(ctx: Context) -> str:
    from pcmkimg import naming

    found = naming.classify(_floating(ctx))
    return found.service if found is not None else _floating(ctx).last_component


def _attribute(ctx: Context) -> str:
    return ctx.param("attribute") or f"pcmkimg-{_service(ctx)}"


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


def _resolve(ctx: Context, recorded: str | None = None):  # type: ignore[no-untyped-def]
    """The floating name in this node's store: Resolved, or None when it is not there.

    ``recorded``: the floating name recorded at start (see :func:`_image_text`).
    """
    from pcmkimg import localstore

    url = ctx.param("podman_url") or DEFAULT_URL
    try:
        found = localstore.resolve_local(
            _image_text(ctx, recorded), url, node=_node(ctx), timeout=8
        )
        return found if isinstance(found, localstore.Resolved) else None
    except localstore.ImageError as exc:
        ctx.log.error(f"cannot read the image store on {_node(ctx)}: {exc.one_line()}")
        raise OCFError(OCFRC.ERR_GENERIC, fit(f"image store unreadable: {exc.message}")) from None


def fit(*candidates: str) -> str:
    """The first candidate that fits in an exit reason, else the last one cut to fit."""
    for text in candidates:
        if len(text) <= REASON_MAX:
            return text
    return candidates[-1][: REASON_MAX - 3] + "..."


def describe(resolved) -> str:  # type: ignore[no-untyped-def]
    """The attribute value: the real name(s) behind the floating name, with the digest."""

    real = sorted(n for n in resolved.other_names if _is_real(n))
    name = real[0] if real else f"sha256:{resolved.id[:12]}"
    digest = resolved.digest
    return f"{name}@{digest}" if digest and "@" not in name else name


def _is_real(name: str) -> bool:
    from pcmkimg import naming, reference

    try:
        return naming.classify(name) is None
    except reference.InvalidReference:
        return False


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
    from pcmkimg import pacemaker

    try:
        runner = pacemaker.Runner(timeout=10)  # well inside the action's own timeout
        if value is None:
            pacemaker.delete_node_attribute(runner, _node(ctx), name)
        else:
            pacemaker.set_node_attribute(runner, _node(ctx), name, value)
    except Exception as exc:  # the attribute is informative: never fail the guard for it
        ctx.log.warning(f"could not update node attribute {name}: {exc}")


def fix_hint(ctx: Context) -> str:
    return f"pcmkimg update --node {_node(ctx)} {_service(ctx)} --image REF"


def unresolved_reason(ctx: Context) -> str:
    """Short: Pacemaker keeps only the first 128 characters of an exit reason."""
    ctx.log.error(
        f"{_floating(ctx)} is not in the image store of {_node(ctx)}: refusing to start, so "
        "that the bundle does not try to pull a name that no registry holds"
    )
    floating, node = _floating(ctx), _node(ctx)
    return fit(
        f"{floating} missing on {node}; fix: {fix_hint(ctx)}",
        f"{floating} missing on {node}; fix: pcmkimg update --node {node}",
        f"{floating} missing here; fix: pcmkimg update",
        f"image missing on {node}; fix: pcmkimg update --node {node}",
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
    except OCFError as exc:
        ctx.exit_reason(fit(f"running; {exc.reason}"))
        return OCFRC.DEGRADED
    if resolved is None:
        ctx.log.warning(
            f"{state.image} vanished from {_node(ctx)}: the running replica is fine, but a "
            "restart here would fail"
        )
        ctx.exit_reason(
            fit(
                f"{state.image} vanished; fix: {fix_hint(ctx)}",
                f"{state.image} vanished; fix: pcmkimg update --node {_node(ctx)}",
                f"image vanished here; fix: pcmkimg update --node {_node(ctx)}",
            )
        )
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


def validate(ctx: Context) -> int:
    _floating(ctx)
    url = ctx.param("podman_url") or DEFAULT_URL
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
        "It publishes the real image behind the floating name as a transient node attribute, "
        "and reports degraded (190) when the name vanishes under a running replica."
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
        Action("start", timeout=60),  # as `pcmkimg guard add` configures it
        Action("stop", timeout=30),
        Action("monitor", timeout=30, interval=30),
        Action("validate-all", timeout=30),
    ],
    handlers={"start": start, "stop": stop, "monitor": monitor, "validate-all": validate},
)
