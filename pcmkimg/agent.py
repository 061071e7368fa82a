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
* a probe (monitor with interval 0) says 7 when the name does not resolve,
  whatever state a former run left: the replica must not start here on a name
  that would be pulled. It gives the name back only to the image that running
  containers of the name run (a replica that runs here on it), never from its
  records.
* stop: always 0; clears the state and the attribute.
* validate-all: parameters only at OCF_CHECK_LEVEL 0 (so that ``pcs resource
  create`` works on a node without the image); at level 10 the name must also
  resolve here.

The state (``STATE_DIR/INSTANCE.state``) is trusted only when its directory and
the file itself belong to the agent's user and nobody else can write them
(checked on every read, the file opened with ``O_NOFOLLOW``); else the agent
acts as if there were none. Keys it does not know are ignored.

OCF return codes are chosen here and nowhere else. The monitor runs every 30 s
on every node in a fresh interpreter, so its normal path stays on the cheapest
modules of the standard library: the state records the podman API's answer for
the name, and a monitor whose answer is the same byte for byte is done
(:mod:`pcmkimg.adapters.apisocket`: ``_socket`` only). Only an answer that
changed is parsed (JSON, the reference and naming rules), and only a heal
imports the store adapter; never podman-py, lxml, the configuration or the
pacemaker runner unless the image moved.

The actions reach the node through one object, :class:`Ports` (this node's image store and
its node attributes), built once by the agent's entry point: :data:`AGENT` is
``guard(Ports())``. The tests give :func:`guard` a fake of it; nothing here is patched.
"""

from __future__ import annotations

import os

from ocf import OCFRC, Action, Agent, Context, OCFError, Parameter
from pcmkimg import GUARD_MONITOR_INTERVAL, GUARD_TIMEOUTS, PODMAN_SOCKET

TYPE_CHECKING = False  # typing costs every monitor: not imported at run time
if TYPE_CHECKING:
    from pcmkimg.core.images import Resolved

DEFAULT_URL = PODMAN_SOCKET
STATE_DIR = "/run/pcmkimg"
REASON_MAX = 128
"""Pacemaker keeps only the first 128 characters of an exit reason."""
STATE_HEAD = "pcmkimg-guard-state"
"""The first word of a state file (then its format's version)."""
STATE_KEYS = ("image", "image_id", "value", "attribute")
STATE_MAX = 8 * 1024 * 1024
"""A larger state file is not read (the API answer in it is limited to 4 MiB)."""


class Published:
    """What the agent recorded: the real image behind the floating name, and ``answer``: the
    podman API's answer for the name then (None when it came from the podman command)."""

    __slots__ = ("image", "image_id", "value", "attribute", "answer")

    def __init__(
        self, image: str, image_id: str, value: str, attribute: str, answer: bytes | None = None
    ) -> None:
        self.image = image
        self.image_id = image_id
        self.value = value
        self.attribute = attribute
        self.answer = answer

    def __repr__(self) -> str:
        return (
            f"Published(image={self.image!r}, image_id={self.image_id!r}, value={self.value!r}, "
            f"attribute={self.attribute!r}, answer={'None' if self.answer is None else '...'})"
        )

    def with_answer(self, answer: bytes | None) -> Published:
        return Published(self.image, self.image_id, self.value, self.attribute, answer)


class Ports:
    """This node as the guard's actions reach it: its image store, over the podman API socket
    (``url``: ``unix://PATH``) else the podman command, and its node attributes
    (crm_attribute). Each method imports its adapter when first called: the monitor's normal
    path (:meth:`inspect`) costs :mod:`pcmkimg.adapters.apisocket` only.

    The store's methods raise :class:`pcmkimg.core.errors.ImageError` when the store cannot
    answer (:meth:`inspect`: :class:`pcmkimg.adapters.apisocket.NoAnswer` when the socket does
    not); the agent maps them to its return codes."""

    __slots__ = ()

    def inspect(self, url: str, name: str) -> tuple[int, str, bytes]:
        """The podman API's answer to ``GET /images/NAME/json``: (code, status line, body)."""
        from pcmkimg.adapters import apisocket

        return apisocket.request(
            url[len("unix://") :], "GET", apisocket.image_target(name), timeout=8
        )

    def resolve_with_cli(self, name: str, node: str) -> Resolved | None:
        """The name in the store, read with the podman command; None when it is not there."""
        from pcmkimg.adapters import localstore

        found = localstore.resolve_with_cli(name, node=node, timeout=8)
        return found if isinstance(found, localstore.Resolved) else None

    def find(self, url: str, name: str, node: str) -> Resolved | None:
        """A name or an image ID in the store; None when it is not there."""
        from pcmkimg.adapters import localstore

        found = localstore.resolve_local(name, url, node=node, timeout=8)
        return found if isinstance(found, localstore.Resolved) else None

    def running_images(self, url: str, name: str, node: str) -> tuple[str, ...]:
        """The IDs of the images that the running containers created from ``name`` run."""
        from pcmkimg.adapters import localstore

        return localstore.running_images(name, url, node=node, timeout=8)

    def tag(self, url: str, image_id: str, name: str, node: str) -> None:
        """Give ``name`` to the image."""
        from pcmkimg.adapters import localstore

        localstore.tag_local(image_id, name, url, node=node, timeout=8)

    def set_attribute(self, node: str, name: str, value: str | None) -> None:
        """Set the transient node attribute, or delete it (``value`` None)."""
        from pcmkimg.adapters import pacemaker

        runner = pacemaker.Runner(timeout=10)  # well inside the action's own timeout
        if value is None:
            pacemaker.delete_node_attribute(runner, node, name)
        else:
            pacemaker.set_node_attribute(runner, node, name, value)


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out, chars = [], iter(text)
    for char in chars:
        if char == "\\":
            nxt = next(chars, "")
            out.append({"n": "\n", "r": "\r"}.get(nxt, nxt))
        else:
            out.append(char)
    return "".join(out)


def dump_state(state: Published) -> bytes:
    """A state file: ``pcmkimg-guard-state 2``, ``key=value`` lines, an empty line, then the
    API's answer as it came (``answer=`` gives its length)."""
    lines = [f"{STATE_HEAD} 2"]
    lines += [f"{key}={_escape(getattr(state, key))}" for key in STATE_KEYS]
    if state.answer is not None:
        lines.append(f"answer={len(state.answer)}")
    return ("\n".join(lines) + "\n\n").encode() + (state.answer or b"")


def parse_state(data: bytes) -> Published | None:
    """A state file's content (:func:`dump_state`, or the JSON of earlier versions); None when
    it lacks a key the agent needs. Keys it does not know are ignored."""
    fields: dict[str, str] = {}
    answer = None
    if data.startswith(b"{"):
        import json

        try:
            raw = json.loads(data)
        except ValueError:
            return None
        if isinstance(raw, dict):
            fields = {k: v for k, v in raw.items() if k in STATE_KEYS and isinstance(v, str)}
    else:
        head, sep, rest = data.partition(b"\n\n")
        try:
            lines = head.decode("utf-8").split("\n")
        except UnicodeDecodeError:
            return None
        if not sep or not lines[0].startswith(f"{STATE_HEAD} "):
            return None
        for line in lines[1:]:
            key, eq, value = line.partition("=")
            if eq and key not in fields:
                fields[key] = _unescape(value)
        length = fields.get("answer", "")
        if length.isascii() and length.isdigit() and int(length) == len(rest):
            answer = rest
    if any(key not in fields for key in STATE_KEYS):
        return None
    return Published(
        fields["image"], fields["image_id"], fields["value"], fields["attribute"], answer
    )


def _floating(ctx: Context):  # type: ignore[no-untyped-def]
    from pcmkimg.core import reference
    from pcmkimg.core.errors import InvalidReference

    try:
        return reference.parse(ctx.param("image") or "")
    except InvalidReference as exc:
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
    """The state file's path without its suffix (``.state``, or ``.tmp`` while written)."""
    name = (ctx.instance or "floating-image").replace("/", "_")
    return os.path.join(ctx.param("state_dir") or STATE_DIR, name)


def _state_path(ctx: Context) -> str:
    return f"{_state_base(ctx)}.state"


def _legacy_state_path(ctx: Context) -> str:
    """Where agents before the ``.state`` format kept the state (JSON): read, then replaced."""
    return f"{_state_base(ctx)}.json"


def _dir_problem(directory: str, st: os.stat_result) -> str | None:
    import stat

    if (
        not stat.S_ISDIR(st.st_mode)
        or st.st_uid != os.geteuid()
        or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    ):
        return (
            f"state_dir {directory} must be a directory owned by uid {os.geteuid()}, "
            "not writable by others"
        )
    return None


def _file_problem(path: str, st: os.stat_result) -> str | None:
    import stat

    if (
        not stat.S_ISREG(st.st_mode)
        or st.st_uid != os.geteuid()
        or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    ):
        return f"{path} must be a regular file owned by uid {os.geteuid()}, not writable by others"
    if st.st_size > STATE_MAX:
        return f"{path} is larger than {STATE_MAX} bytes"
    return None


def _read_bytes(fd: int) -> bytes:
    chunks, size = [], 0
    while size <= STATE_MAX:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def _state_bytes(ctx: Context) -> tuple[bytes | None, str | None]:
    """(the state file's content, None), (None, None) when there is none, or (None, why it
    cannot be trusted). The directory and the file are checked on every read; a symlink is
    never followed."""
    directory = os.path.dirname(_state_base(ctx))
    try:
        problem = _dir_problem(directory, os.lstat(directory))
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, f"cannot read state_dir {directory}: {exc}"
    if problem:
        return None, problem
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    for path in (_state_path(ctx), _legacy_state_path(ctx)):
        try:
            fd = os.open(path, flags)
        except FileNotFoundError:
            continue
        except OSError as exc:  # ELOOP: a symlink
            return None, f"cannot open {path} (never through a symlink): {exc}"
        try:
            problem = _file_problem(path, os.fstat(fd))
            return (None, problem) if problem else (_read_bytes(fd), None)
        except OSError as exc:
            return None, f"cannot read {path}: {exc}"
        finally:
            os.close(fd)
    return None, None


def _read_state(ctx: Context) -> Published | None:
    """The recorded state; None when there is none, or none to trust (said in the log)."""
    data, problem = _state_bytes(ctx)
    if problem is not None:
        ctx.log.error(f"not trusting the guard's state, as if there were none: {problem}")
        return None
    if data is None:
        return None
    state = parse_state(data)
    if state is None:
        ctx.log.error(f"the guard's state in {_state_path(ctx)} is unreadable: ignored")
    return state


def _write_state(ctx: Context, state: Published) -> None:
    base = _state_base(ctx)
    directory = os.path.dirname(base)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    problem = _dir_problem(directory, os.lstat(directory))
    if problem:
        raise OCFError(OCFRC.ERR_PERM, problem)
    tmp = f"{base}.tmp"
    try:
        os.unlink(tmp)  # a stale one from a crash; never write through what is there
    except FileNotFoundError:
        pass
    data = memoryview(dump_state(state))
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        while data:
            data = data[os.write(fd, data) :]
    finally:
        os.close(fd)
    os.replace(tmp, _state_path(ctx))
    _remove(ctx, _legacy_state_path(ctx))


def _remove(ctx: Context, path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        ctx.log.warning(f"could not remove {path}: {exc}")


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


def _resolve(
    ctx: Context, ports: Ports, recorded: str | None = None
) -> tuple[Resolved | None, bytes | None]:
    """The floating name in this node's store: (Resolved, or None when it is not there; the
    API's answer it was read from, None when it came from the podman command).

    ``recorded``: the floating name recorded at start (see :func:`_image_text`).
    """
    name = _image_text(ctx, recorded)
    url = _url(ctx)
    if url.startswith("unix://"):
        from pcmkimg.adapters import apisocket

        try:
            code, status, body = ports.inspect(url, name)
        except apisocket.NoAnswer as exc:
            ctx.log.debug(f"the podman API socket gave no answer ({exc}): the podman command")
        else:
            return _from_answer(ctx, name, code, status, body), body if code == 200 else None
    return _with_cli(ctx, ports, name), None


def _from_answer(ctx: Context, name: str, code: int, status: str, body: bytes) -> Resolved | None:
    """What an answer of ``GET /images/NAME/json`` says: the image, None for 404 (no image has
    the name), an ERR_GENERIC for any other answer."""
    from pcmkimg.core.errors import UnexpectedAnswer
    from pcmkimg.core.images import Resolved, inspect_answer

    try:
        found = inspect_answer(code, body)
    except UnexpectedAnswer:
        ctx.log.error(f"unexpected answer of the podman API on {_node(ctx)}: {status}")
        raise OCFError(
            OCFRC.ERR_GENERIC, fit(f"image store unreadable: {status or 'no answer'}")
        ) from None
    return None if found is None else Resolved(_node(ctx), name, found)


def _unchanged(ctx: Context, ports: Ports, state: Published) -> bool:
    """The monitor's whole normal path: the API's answer for the name is the one recorded,
    byte for byte, for the name the parameter still gives. Nothing parsed, nothing imported
    beyond :mod:`pcmkimg.adapters.apisocket`."""
    url = _url(ctx)
    if state.answer is None or ctx.param("image") != state.image or not url.startswith("unix://"):
        return False
    from pcmkimg.adapters import apisocket

    try:
        code, _, body = ports.inspect(url, state.image)
    except apisocket.NoAnswer:
        return False
    return code == 200 and body == state.answer


def _store_error(ctx: Context, exc: Exception) -> OCFError:
    ctx.log.error(f"cannot read the image store on {_node(ctx)}: {exc}")
    message = getattr(exc, "message", str(exc))
    return OCFError(OCFRC.ERR_GENERIC, fit(f"image store unreadable: {message}"))


def _with_cli(ctx: Context, ports: Ports, name: str) -> Resolved | None:
    """The name in this node's store, read with the podman command."""
    from pcmkimg.core.errors import ImageError

    try:
        return ports.resolve_with_cli(name, _node(ctx))
    except ImageError as exc:
        raise _store_error(ctx, exc) from None


def _find(ctx: Context, ports: Ports, name: str) -> Resolved | None:
    """A name or an image ID in this node's store: Resolved, or None when it is not there."""
    from pcmkimg.core.errors import ImageError

    try:
        return ports.find(_url(ctx), name, _node(ctx))
    except ImageError as exc:
        raise _store_error(ctx, exc) from None


def _running_images(ctx: Context, ports: Ports, name: str) -> tuple[str, ...]:
    """The IDs of the images that this node's running containers created from ``name`` run."""
    from pcmkimg.core.errors import ImageError

    try:
        return ports.running_images(_url(ctx), name, _node(ctx))
    except ImageError as exc:
        ctx.log.warning(f"cannot list the containers on {_node(ctx)}: {exc.one_line()}")
        return ()


def fit(*candidates: str) -> str:
    """The first candidate that fits in an exit reason, else the last one cut to fit."""
    for text in candidates:
        if len(text) <= REASON_MAX:
            return text
    return candidates[-1][: REASON_MAX - 3] + "..."


def describe(resolved: Resolved) -> str:
    """The attribute value (:func:`pcmkimg.core.naming.describe`)."""
    from pcmkimg.core import naming

    return naming.describe(resolved)


def _publish(
    ctx: Context, ports: Ports, resolved: Resolved, answer: bytes | None = None
) -> Published:
    state = Published(
        image=str(_floating(ctx)),
        image_id=resolved.id,
        value=describe(resolved),
        attribute=_attribute(ctx),
        answer=answer,
    )
    _write_state(ctx, state)
    _set_attribute(ctx, ports, state.attribute, state.value)
    return state


def _set_attribute(ctx: Context, ports: Ports, name: str, value: str | None) -> None:
    try:  # the import too: a node whose lxml is broken must not fail a stop (that fences it)
        ports.set_attribute(_node(ctx), name, value)
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


def start(ctx: Context, ports: Ports) -> int:
    resolved, answer = _resolve(ctx, ports)
    if resolved is None:
        raise OCFError(OCFRC.ERR_INSTALLED, unresolved_reason(ctx))
    state = _publish(ctx, ports, resolved, answer)
    ctx.log.info(f"{state.image} is {state.value} ({state.image_id[:12]}) on {_node(ctx)}")
    return OCFRC.SUCCESS


def stop(ctx: Context, ports: Ports) -> int:
    state = _read_state(ctx)
    if state is not None:
        attribute: str | None = state.attribute
    else:  # none, or none to trust: the attribute the parameters name, never one from a file
        try:
            attribute = _attribute(ctx)
        except OCFError:
            attribute = None  # misconfigured: it cannot have published anything
    if attribute:
        _set_attribute(ctx, ports, attribute, None)
    _remove(ctx, _state_path(ctx))
    _remove(ctx, _legacy_state_path(ctx))
    return OCFRC.SUCCESS


def monitor(ctx: Context, ports: Ports) -> int:
    state = _read_state(ctx)
    if state is None:
        return OCFRC.NOT_RUNNING
    if _unchanged(ctx, ports, state):
        return OCFRC.SUCCESS
    try:
        resolved, answer = _resolve(ctx, ports, state.image)
        if resolved is None:
            resolved = _heal(ctx, ports, state)
            answer = None  # read again by the next monitor
    except OCFError as exc:
        ctx.exit_reason(fit(f"running; {exc.reason}"))
        return OCFRC.DEGRADED
    if resolved is None:
        return OCFRC.NOT_RUNNING if ctx.is_probe else OCFRC.DEGRADED
    try:
        if resolved.id != state.image_id or describe(resolved) != state.value:
            new = _publish(ctx, ports, resolved, answer)
            ctx.log.info(f"{new.image} moved to {new.value} ({new.image_id[:12]})")
        elif answer is not None and answer != state.answer:
            _write_state(ctx, state.with_answer(answer))  # the same image; say so next time
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
    return OCFRC.SUCCESS


def _heal(ctx: Context, ports: Ports, state: Published) -> Resolved | None:
    """The floating name vanished under the running replica: give it back to the image recorded
    in the state, else to the image that the name's running containers run, so that a restart
    here does not make the bundle pull the name. The name resolved again; or None, with the exit
    reason of a 190 (degraded), when there is no such image or podman refuses the tag. Never a
    failure: that would restart a healthy replica.

    A probe gives the name back only to the image that running containers of the name run; with
    none, it returns None without an exit reason (the probe says 7: not running here)."""
    from pcmkimg.core.errors import ImageError

    node = _node(ctx)
    image_id = _heal_source(ctx, ports, state)
    if image_id is None and ctx.is_probe:
        ctx.log.info(
            f"probe: {state.image} is not in the store of {node} and no container of it runs "
            "here: not running (a former state is not enough)"
        )
        return None
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
        ports.tag(_url(ctx), image_id, state.image, node)
    except ImageError as exc:
        ctx.log.error(
            f"{state.image} vanished from {node}, and tagging {image_id[:12]} with it again "
            f"failed: {exc.one_line()}; the running replica is fine, but a restart here would "
            f"fail; fix: {fix_hint(ctx)}"
        )
        if ctx.is_probe:
            return None
        head = state.image if len(state.image) <= REASON_MAX // 2 else "image"
        ctx.exit_reason(fit(f"{head} vanished; re-tag failed: {exc.detail}"))
        return None
    ctx.log.warning(
        f"{state.image} vanished from {node} under the running replica: tagged image "
        f"{image_id[:12]} with it again, so that a restart here does not pull it"
    )
    resolved, _ = _resolve(ctx, ports, state.image)
    if resolved is None and not ctx.is_probe:  # untagged again at once: the next monitor tries
        ctx.exit_reason(fit(f"{state.image} vanished again after its re-tag"))
    return resolved


def _heal_source(ctx: Context, ports: Ports, state: Published) -> str | None:
    """The image to give the vanished name back to: the one recorded in the state while it is in
    the store (not for a probe), else the one that the running containers created from the name
    run (if only one).
    """
    if not ctx.is_probe and state.image_id and _find(ctx, ports, state.image_id) is not None:
        return state.image_id
    running = _running_images(ctx, ports, state.image)
    if len(running) > 1:
        ctx.log.warning(
            f"the containers of {state.image} run {len(running)} images on {_node(ctx)}: "
            "not guessing which one to give the name back to"
        )
    return running[0] if len(running) == 1 else None


def validate(ctx: Context, ports: Ports) -> int:
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
    if ctx.check_level >= 10 and _resolve(ctx, ports)[0] is None:
        raise OCFError(OCFRC.ERR_INSTALLED, unresolved_reason(ctx))
    return OCFRC.SUCCESS


def guard(ports: Ports) -> Agent:
    """The agent, whose actions reach this node through ``ports``."""
    return Agent(
        name="floating-image",
        version="1.0",
        shortdesc="Guards a bundle whose image is a node-local floating name",
        longdesc=(
            "Runs as a clone ordered before a Pacemaker bundle and colocated with it. It refuses "
            "to start (rc 5, on this node only) when the floating image name is not in this "
            "node's image store, so that the bundle never tries to pull a name that no registry "
            "holds. It publishes the real image behind the floating name as a transient node "
            "attribute. When the name vanishes under a running replica, the monitor gives it back "
            "to the image it named (or that the replica runs); it reports degraded (190) when it "
            "cannot."
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
        handlers={
            "start": lambda ctx: start(ctx, ports),
            "stop": lambda ctx: stop(ctx, ports),
            "monitor": lambda ctx: monitor(ctx, ports),
            "validate-all": lambda ctx: validate(ctx, ports),
        },
    )


AGENT = guard(Ports())
"""The agent as the script runs it (``agents/floating-image``): podman and crm_attribute."""
