"""Running an agent: from ``argv`` and the environment to an exit code.

Rules (see :func:`run`):

- ``meta-data`` prints the metadata and returns 0; it reads nothing else (no environment, no
  logging, no files).
- ``usage``, ``help``, ``-h``, ``--help`` print the usage line on stdout and return 0.
- no action, or more than one argument: usage on stderr, ``ERR_ARGS`` (2).
- an action without a handler: usage on stderr, ``ERR_UNIMPLEMENTED`` (3).
- configuration problems (a required parameter unset or empty, an integer or boolean parameter
  that does not parse): ``ERR_CONFIGURED`` (6) with an exit reason, including for
  ``validate-all``. Two exceptions, by OCF convention:

  * ``stop`` must not fail because of its configuration: a failed stop gets the node fenced (or,
    without fencing, the resource blocked).
    The handler is called anyway, with the problems in :attr:`Context.config_errors`; it
    should return ``SUCCESS`` when the resource cannot be running with such a configuration.
  * a probe (``monitor`` with interval 0) is called too, with the problems in
    :attr:`Context.config_errors`: it should answer ``NOT_RUNNING`` when it cannot be running.
    A probe's ``ERR_CONFIGURED`` would ban the resource from every node.

  Both are logged as a warning first.
- ``validate-all``: after the parameter checks, the ``validate-all`` handler when given, else 0.
- a handler's :class:`OCFError` returns its code and prints its reason as the exit reason; any
  other exception returns ``ERR_GENERIC`` with an exit reason naming it (the traceback goes to
  the log); a handler returning something else than an int is ``ERR_GENERIC`` too (a monitor
  that forgets to return must not report "running").
"""

from __future__ import annotations

import os
import sys

from ocf.agent import Agent, ParamType, check_value, parse_bool, parse_int
from ocf.env import DEFAULT_EXIT_REASON_PREFIX, Environment, parse_environment
from ocf.log import Level, Logger
from ocf.rc import OCFRC, OCFError

TYPE_CHECKING = False  # no run-time import of typing, collections.abc or dataclasses (ocf.agent)
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from dataclasses import dataclass, field
    from typing import TextIO
else:
    from ocf._light import dataclass, field

USAGE_ACTIONS = frozenset({"usage", "help", "-h", "--help"})
LENIENT_ACTIONS = frozenset({"stop"})


def sanitize_reason(text: str) -> str:
    """An exit reason as one line: control characters (newlines too) become spaces."""
    cleaned = "".join(" " if (ord(c) < 0x20 or ord(c) == 0x7F) else c for c in str(text))
    return " ".join(cleaned.split())


@dataclass
class Context:
    """One action's request, handed to the handler."""

    agent: Agent
    action: str
    env: Environment
    log: Logger
    stderr: TextIO
    #: Configuration problems found before the handler ran (only ever non-empty for stop and
    #: probes, which are called anyway; see the module documentation).
    config_errors: tuple[str, ...] = ()
    _reason_given: bool = field(default=False, repr=False)

    @property
    def is_probe(self) -> bool:
        return self.env.is_probe(self.action)

    @property
    def params(self) -> Mapping[str, str]:
        return self.env.params

    @property
    def instance(self) -> str | None:
        return self.env.resource_instance

    @property
    def node(self) -> str | None:
        return self.env.node

    @property
    def check_level(self) -> int:
        return self.env.check_level

    def param(self, name: str, default: str | None = None) -> str | None:
        """The parameter's value (declared defaults already applied), else ``default``."""
        return self.env.params.get(name, default)

    def int_param(self, name: str) -> int | None:
        """An integer parameter; None when unset or empty. Raises ``OCFError(ERR_CONFIGURED)``."""
        value = self._checked(name, ParamType.INTEGER)
        return None if value is None else parse_int(value)

    def bool_param(self, name: str) -> bool:
        """A boolean parameter; False when unset or empty. Raises ``OCFError(ERR_CONFIGURED)``."""
        value = self._checked(name, ParamType.BOOLEAN)
        return value is not None and parse_bool(value) is True

    def _checked(self, name: str, ptype: ParamType) -> str | None:
        value = self.env.params.get(name)
        if not value:
            return None
        problem = check_value(ptype, value)
        if problem:
            raise OCFError(OCFRC.ERR_CONFIGURED, f"parameter {name}: {problem}")
        return value

    def exit_reason(self, reason: str) -> None:
        """Print ``ocf-exit-reason:<reason>`` on stderr (the first call only) and log it.

        Pacemaker takes the first such line; later calls are only logged.
        """
        text = sanitize_reason(reason)
        if not text:
            return
        if not self._reason_given:
            self._reason_given = True
            _write(self.stderr, f"{self.env.exit_reason_prefix}{text}\n")
            self.log.log(Level.ERROR, text, to_stderr=False)
        else:
            self.log.error(text)


def run(
    agent: Agent,
    argv: Sequence[str],
    environ: Mapping[str, str] | None = None,
    *,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """Run the action in ``argv`` (the arguments without the program name); return the code."""
    out = sys.stdout if stdout is None else stdout
    err = sys.stderr if stderr is None else stderr
    if len(argv) != 1:
        _write(err, agent.usage() + "\n")
        return int(OCFRC.ERR_ARGS)
    action = argv[0]
    if action == "meta-data":
        from ocf.metadata import render_metadata  # only here: every other action skips it

        _write(out, render_metadata(agent))
        return int(OCFRC.SUCCESS)
    if action in USAGE_ACTIONS:
        _write(out, agent.usage() + "\n")
        return int(OCFRC.SUCCESS)
    if action != "validate-all" and action not in agent.handlers:
        _write(err, agent.usage() + "\n")
        return int(OCFRC.ERR_UNIMPLEMENTED)

    try:
        env = parse_environment(agent, os.environ if environ is None else environ)
        log = Logger.from_env(agent.name, env, err)
    except Exception as exc:  # the toolkit's own failure: still an OCF answer
        reason = sanitize_reason(f"{action} failed: {type(exc).__name__}: {exc}")
        _write(err, f"{DEFAULT_EXIT_REASON_PREFIX}{reason}\n")
        return int(OCFRC.ERR_GENERIC)
    ctx = Context(agent=agent, action=action, env=env, log=log, stderr=err)
    try:
        return _dispatch(ctx)
    except Exception as exc:
        ctx.exit_reason(f"{action} failed: {type(exc).__name__}: {exc}")
        return int(OCFRC.ERR_GENERIC)


def _dispatch(ctx: Context) -> int:
    agent, action = ctx.agent, ctx.action
    errors = tuple(ctx.env.config_errors(agent))
    if errors:
        if action in LENIENT_ACTIONS or ctx.is_probe:
            ctx.config_errors = errors
            what = "probe" if ctx.is_probe else action
            ctx.log.warning(f"{what} despite configuration problems: {'; '.join(errors)}")
        else:
            ctx.exit_reason("; ".join(errors))
            return int(OCFRC.ERR_CONFIGURED)
    handler = agent.handlers.get(action)
    if handler is None:  # validate-all without a handler of its own
        return int(OCFRC.SUCCESS)
    try:
        rc = handler(ctx)
    except OCFError as exc:
        if exc.reason:
            ctx.exit_reason(exc.reason)
        return int(exc.rc)
    except Exception as exc:
        import traceback

        for line in traceback.format_exc().splitlines():
            ctx.log.log(Level.ERROR, line, to_stderr=False)
        ctx.exit_reason(f"{action} failed: {type(exc).__name__}: {exc}")
        return int(OCFRC.ERR_GENERIC)
    if isinstance(rc, bool) or not isinstance(rc, int) or not 0 <= rc <= 255:
        ctx.exit_reason(f"{action} handler returned {rc!r}, not an OCF return code")
        return int(OCFRC.ERR_GENERIC)
    return int(rc)


def main(agent: Agent) -> None:
    """Entry point of an agent script: ``sys.exit(run(agent, sys.argv[1:], os.environ))``."""
    sys.exit(run(agent, sys.argv[1:], os.environ))


def _write(stream: TextIO, text: str) -> None:
    try:
        stream.write(text)
        stream.flush()
    except (OSError, ValueError):
        pass
