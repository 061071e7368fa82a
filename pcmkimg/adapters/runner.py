"""Running the Pacemaker tools, and the raw reads of a snapshot: the light half of
:mod:`pcmkimg.adapters.pacemaker`.

Every external call goes through a :class:`Runner`: argument lists only (never a shell), a
timeout on every call, ``LC_ALL=C``, no ``CIB_*`` variable of the caller's, stderr captured and
mapped to one error type per failure kind (:func:`tool_error`). :func:`read_snapshot` runs the
calls of one snapshot of the cluster (see :func:`pcmkimg.adapters.pacemaker.query_config`) and
returns what they printed, unparsed; :func:`read_early` runs them in a thread.

This module imports neither lxml nor the CIB model: ``pcmkimg status`` starts its snapshot
read here first and imports the rest of pcmkimg while the tools run (docs/benchmarks.md,
budget 5). :mod:`pcmkimg.adapters.pacemaker` parses, and re-exports these names.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Optional

from pcmkimg import LEASE_TICKET
from pcmkimg.adapters import trace
from pcmkimg.adapters.early import Early
from pcmkimg.adapters.errors import (
    CibChangedError,
    CibEnvironmentError,
    ClusterUnreachableError,
    NoQuorumError,
    NotFoundError,
    PacemakerTimeoutError,
    ToolError,
    ToolMissingError,
)
from pcmkimg.core import commands as cmd
from pcmkimg.records import dataclass, field

DEFAULT_TIMEOUT = 60.0  # seconds, for one tool call
CALL_SLACK = 30.0  # extra seconds a tool gets beyond its own --timeout
FIX_ROOT = "run it as root on a cluster node (or give a saved CIB with --cib-file)"

# Pacemaker exit codes (crm_exit_t) that have a failure kind of their own.
RC_DISCONNECT = 102
RC_OLD = 103  # "Update was older than existing configuration"
RC_NOSUCH = 105
RC_QUORUM = 106
RC_TIMEOUT = 124


# --------------------------------------------------------------------------- runner


@dataclass(frozen=True)
class ToolResult:
    """What one run of a tool gave: its argv, exit code and output."""

    argv: tuple[str, ...]
    rc: int
    stdout: str
    stderr: str


# A backend runs one argv: (argv, env, timeout, stdin) -> (rc, stdout, stderr). It raises
# FileNotFoundError for a missing program and subprocess.TimeoutExpired on timeout.
Backend = Callable[[Sequence[str], Mapping[str, str], float, Optional[str]], tuple[int, str, str]]


def subprocess_backend(
    argv: Sequence[str], env: Mapping[str, str], timeout: float, stdin: str | None
) -> tuple[int, str, str]:
    proc = subprocess.run(  # noqa: S603 - argv list, never a shell
        list(argv),
        input=stdin,
        capture_output=True,
        text=True,
        env=dict(env),
        timeout=timeout,
        check=False,
        # Own session: a terminal's Ctrl-C reaches only us; we kill the child ourselves
        # (subprocess.run does on any exception), then run our cleanup.
        start_new_session=True,
        stdin=None if stdin is not None else subprocess.DEVNULL,
    )
    return proc.returncode, proc.stdout, proc.stderr


@dataclass(frozen=True)
class Runner:
    """Runs Pacemaker tools. ``prefix`` goes before every argv (empty in production)."""

    prefix: tuple[str, ...] = ()
    cib_file: str | None = None
    timeout: float = DEFAULT_TIMEOUT
    backend: Backend = field(default=subprocess_backend, repr=False, compare=False)

    @property
    def offline(self) -> bool:
        return self.cib_file is not None

    def env(self) -> dict[str, str]:
        """The tools' environment: ours without any ``CIB_*`` variable (a ``CIB_shadow``,
        ``CIB_file`` or ``CIB_server`` would point the tools at another CIB than the live one
        while podman's changes stay real), ``LC_ALL=C``, and ``CIB_file`` when offline."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(CIB_ENV_PREFIX)}
        env["LC_ALL"] = "C"
        if self.cib_file is not None:
            env["CIB_file"] = self.cib_file
        return env

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float | None = None,
        stdin: str | None = None,
        check: bool = True,
    ) -> ToolResult:
        """Run ``argv``; with ``check``, a non-zero exit raises the error of its kind."""
        full = (*self.prefix, *argv)
        limit = self.timeout if timeout is None else timeout
        started = time.monotonic()
        try:
            rc, out, err = self.backend(full, self.env(), limit, stdin)
        except FileNotFoundError:
            raise ToolMissingError(
                f"{full[0]} is not installed (running {' '.join(argv)})",
                "install pacemaker-cli-utils (and pacemaker) and check PATH",
            ) from None
        except subprocess.TimeoutExpired:
            raise PacemakerTimeoutError(
                f"{argv[0]} did not finish within {limit:g}s ({' '.join(argv)})",
                f"check that the cluster is responsive ({cmd.quoted(cmd.cluster_state())}), "
                "then retry",
                argv=argv,
                rc=-1,
            ) from None
        result = ToolResult(tuple(argv), rc, out, err)
        if trace.enabled():
            trace.note(f"{time.monotonic() - started:.3f}s rc={rc} {_shown(argv)}")
        if check and rc != 0:
            raise tool_error(result)
        return result


def _shown(argv: Sequence[str]) -> str:
    """``argv`` for a trace line: an XML argument shortened to its first element."""
    return " ".join(a if not a.startswith("<") else a.split(">", 1)[0][:60] + ">..." for a in argv)


CIB_ENV_PREFIX = "CIB_"
"""Pacemaker's tools read the CIB named by these variables (CIB_file, CIB_shadow,
CIB_shadow_dir, CIB_server, CIB_port, CIB_user, CIB_passwd, CIB_encrypted): never passed on."""


def cib_variables(environ: Mapping[str, str]) -> list[str]:
    """The ``CIB_*`` variables set (non-empty) in ``environ``, sorted."""
    return sorted(k for k, v in environ.items() if k.startswith(CIB_ENV_PREFIX) and v)


def runner_for(
    cib_file: str | None, *, read_only: bool, environ: Mapping[str, str] = os.environ
) -> Runner:
    """The runner of one command: live, or offline on a saved CIB.

    The offline mode is for read-only commands: ``cib_file`` (``--cib-file``), else
    ``CIB_file`` from the environment. Refused (:class:`CibEnvironmentError`, exit 2) for a
    command that changes anything, and any other ``CIB_*`` variable (a shadow CIB, a remote
    CIB connection) is refused for every command: the CIB changes would go there while the
    image stores' changes are real.
    """
    others = [k for k in cib_variables(environ) if k != "CIB_file"]
    if others:
        names = ", ".join(others)  # names only: CIB_passwd's value stays unprinted
        raise CibEnvironmentError(
            f"{names} {'is' if len(others) == 1 else 'are'} set: pcmkimg reads and changes the "
            "live cluster's CIB only (a shadow CIB or another CIB connection is refused: the "
            "image stores' changes would be real)",
            f"unset it ({cmd.shown(['unset', *others])}); "
            "status and check read a saved CIB with --cib-file",
        )
    path = cib_file or environ.get("CIB_file") or None
    if path is None:
        return Runner()
    origin = f"--cib-file {path}" if cib_file else f"CIB_file={path}"
    if not read_only:
        raise CibEnvironmentError(
            f"{origin}: only status and check work on a saved CIB; this command changes the "
            "cluster or the nodes' image stores",
            "run it on a cluster node without --cib-file, with CIB_file unset",
        )
    if not os.path.isfile(path):
        raise CibEnvironmentError(
            f"{origin}: no such file", "give a CIB saved with: cibadmin --query > FILE"
        )
    return Runner(cib_file=os.path.abspath(path))


def tool_error(result: ToolResult) -> ToolError:
    """The error of the kind a failed tool run reports (exit code first, then stderr)."""
    argv, rc = result.argv, result.rc
    stderr = " ".join(result.stderr.split()) or " ".join(result.stdout.split())[:500]
    what = f"{' '.join(argv)} failed (rc {rc}): {stderr or 'no message'}"
    text = stderr.lower()
    kind: type[ToolError] = ToolError
    fix = f"see the tool's message; {cmd.quoted(cmd.cluster_state())} shows the cluster state"
    if (
        rc == RC_OLD
        or "older than existing configuration" in text
        or "application of update diff failed" in text
    ):
        kind, fix = CibChangedError, "the CIB changed meanwhile: read it again and retry"
    elif rc == RC_QUORUM or "quorum" in text:
        kind, fix = NoQuorumError, "restore quorum (bring nodes back online), then retry"
    elif rc == RC_TIMEOUT or "timed out" in text:
        kind, fix = (
            PacemakerTimeoutError,
            f"the cluster did not settle: check {cmd.quoted(cmd.cluster_state())}",
        )
    elif rc == RC_DISCONNECT or "could not connect" in text or "not connected" in text:
        kind, fix = ClusterUnreachableError, "start the cluster on this node, or " + FIX_ROOT
    elif rc == RC_NOSUCH or "not found" in text or "does not exist" in text:
        kind, fix = (
            NotFoundError,
            f"check the name ({cmd.quoted(cmd.cluster_state())} lists resources and nodes)",
        )
    return kind(what, fix, argv=argv, rc=rc, stderr=result.stderr)


# --------------------------------------------------------------------------- snapshot reads

VERSION_ARGV = ("cibadmin", "--query", "--no-children")
"""The ``<cib>`` element alone, with its version attributes."""
CONFIG_ARGV = ("cibadmin", "--query", "--scope", "configuration")
MON_ARGV = ("crm_mon", "-1", "--output-as=xml")
WHOLE_ARGV = ("cibadmin", "--query")
TICKET_ARGV = (
    "cibadmin",
    "--query",
    "--xpath",
    f"/cib/status/tickets/ticket_state[@id='{LEASE_TICKET}']",
)
"""The lease's ticket state alone (the status section can be 50 MB); exit 105 when none."""


@dataclass(frozen=True)
class RawSnapshot:
    """What the calls of one snapshot read printed, unparsed. Live: the version before
    (``head``), the configuration section and ``crm_mon`` (read at once), the version after
    (``tail``). Offline: the whole saved CIB as ``config`` and ``crm_mon``, no versions."""

    config: str
    mon: str
    head: str | None = None
    tail: str | None = None
    ticket: ToolResult | None = None
    """Live: what ``cibadmin`` gave for the lease's ticket state (:data:`TICKET_ARGV`; exit
    105: there is none); offline it is in ``config``."""


def _both(first: Callable[[], str], second: Callable[[], str]) -> tuple[str, str]:
    """``first()`` in a thread while ``second()`` runs here; its error is raised here."""
    out: list[object] = []

    def run() -> None:
        try:
            out.append(first())
        except BaseException as exc:  # handed to the caller below
            out.append(exc)

    thread = threading.Thread(target=run, name="pcmkimg-cib-read", daemon=True)
    thread.start()
    try:
        other = second()
    finally:
        thread.join()
    if isinstance(out[0], BaseException):
        raise out[0]
    return str(out[0]), other


def read_snapshot(runner: Runner) -> RawSnapshot:
    """Run the calls of one snapshot read. Live: the version, then the configuration and
    crm_mon at once (both lie between the two version reads), then the version again.
    The lease's ticket state is read after the configuration, in the same thread. Offline,
    the saved CIB is one file that nothing changes: one ``cibadmin --query`` (every call would
    parse the whole file again) and crm_mon."""
    if runner.offline:
        whole = runner.run(WHOLE_ARGV).stdout
        return RawSnapshot(whole, runner.run(MON_ARGV).stdout)
    head = runner.run(VERSION_ARGV).stdout
    ticket: list[ToolResult] = []

    def config_then_ticket() -> str:
        config = runner.run(CONFIG_ARGV).stdout
        ticket.append(runner.run(TICKET_ARGV, check=False))  # beside crm_mon, the slower one
        return config

    config, mon = _both(config_then_ticket, lambda: runner.run(MON_ARGV).stdout)
    return RawSnapshot(config, mon, head, runner.run(VERSION_ARGV).stdout, ticket[0])


def read_early(runner: Runner) -> Early[RawSnapshot]:
    """:func:`read_snapshot` started now, in a thread (``pcmkimg-snapshot``), for a command
    whose first act is a read of the cluster: its answer is taken once
    (:class:`pcmkimg.adapters.pacemaker.Pacemaker`'s first ``read_cluster``)."""
    return Early(lambda: read_snapshot(runner), "pcmkimg-snapshot")
