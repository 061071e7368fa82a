"""The command line's wiring: the environment a command runs in (its options, the
configuration read on first use, the runner), the early reads that ``status`` and ``check``
start before anything else, and the factory of the context every command's ``run`` gets
(:func:`live_context`, or the tests' fakes given to :func:`pcmkimg.cli.main`).

Nothing here imports lxml or the CIB model at module level: ``status`` and ``check`` start
their cluster read first and import the rest while the tools run (docs/benchmarks.md, budget 5).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import click

from pcmkimg.adapters.runner import Runner, read_early, runner_for
from pcmkimg.errors import PcmkimgError
from pcmkimg.records import dataclass

if TYPE_CHECKING:
    from pcmkimg.adapters import config, podman, storeview
    from pcmkimg.adapters.early import Early
    from pcmkimg.adapters.runner import RawSnapshot
    from pcmkimg.workflows.context import Context


#: The commands that change nothing: the only ones that work on a saved CIB (--cib-file, CIB_file).
OFFLINE_COMMANDS = frozenset({"status", "check", "history", "metrics", "outdated"})


#: Makes the context of a command from its environment (and the pull display of ``update``).
ContextFactory = Callable[["Env", "Callable[[Any], None] | None"], "Context"]


@dataclass
class Env:
    """The environment of a command: its global options, and what is made of them on first
    use (the runner, the configuration, the early reads); its output (stdout, stderr)."""

    json: bool
    conf_path: str | None
    journal_dir: str
    cib_file: str | None = None
    command: str | None = None
    contexts: ContextFactory | None = None
    """What makes the commands' context (:func:`pcmkimg.cli.main`'s ``context``); None:
    :func:`live_context`."""
    early: Early[RawSnapshot] | None = None
    """The cluster read :meth:`read_early` started, for the live context's first read."""
    early_views: dict[str, storeview.StoreView] | None = None
    """The nodes' views :meth:`read_stores_early` started, for the live context's views."""

    @functools.cached_property
    def runner(self) -> Runner:
        """Made on first use (so that `--help` works in any environment): live, or offline on a
        saved CIB for a read-only command; refuses a CIB_* variable it cannot honour."""
        return runner_for(self.cib_file, read_only=self.command in OFFLINE_COMMANDS)

    @functools.cached_property
    def conf(self) -> config.Config:
        """Read on first use, so that `--help` works even with a broken file."""
        from pcmkimg.adapters import config

        return config.load(self.conf_path)

    def read_early(self) -> None:
        """Start the snapshot read of the live context's first ``read_cluster`` now, in a
        thread, so that the tools run while Python reads the configuration and imports the
        command (read-only; a runner it can't make is left to raise where it did)."""
        if self.contexts is not None or self.early is not None:
            return  # another context (the tests' fakes) reads its own way
        try:
            made = self.runner
        except PcmkimgError:
            return
        self.early = read_early(made)

    def read_stores_early(self) -> None:
        """Start reading the stores behind local sockets (after the configuration, which says
        where they are; :func:`pcmkimg.adapters.storeview.read_early`), for the live context."""
        if self.contexts is not None or self.early_views is not None:
            return
        from pcmkimg.adapters import storeview

        self.early_views = storeview.read_early(self.conf)

    def out(self, doc: Any, lines: Sequence[str]) -> None:
        if self.json:
            click.echo(json.dumps(doc, indent=2, sort_keys=True))
        else:
            for line in lines:
                click.echo(line)

    def say(self, text: str) -> None:
        """Progress for a person: stderr, so that --json stdout stays one document."""
        click.echo(text, err=True)


def environment(cib_file: str | None = None, *, read_early: bool = False) -> Env:
    """The environment of the running command, its configuration read: every command calls
    this first, so that a bad or missing configuration file is exit 2 before anything else runs
    (and after click has answered ``--help``). ``read_early``: the command's first act is a
    read of the cluster (``status``, ``check``); it starts now (:meth:`Env.read_early`), and
    only its answer waits for the configuration; then the stores behind local sockets."""
    env: Env = click.get_current_context().find_object(Env)  # type: ignore[assignment]
    if cib_file is not None:  # the command's own --cib-file (before the runner is made)
        env.cib_file = cib_file
    if read_early:
        env.read_early()
    env.conf  # noqa: B018 - read now: it raises ConfigError
    if read_early:
        env.read_stores_early()
    return env


def context(env: Env, *, progress: Callable[[Any], None] | None = None) -> Context:
    """The context the command's ``run`` gets (made by ``env.contexts``, by default
    :func:`live_context`)."""
    return (env.contexts or live_context)(env, progress)


def live_context(env: Env, progress: Callable[[Any], None] | None = None) -> Context:
    """The context of a command on this host: the cluster port on the command's runner, the
    nodes' stores and views opened on first use, the journal's directory, the settings."""
    from pathlib import Path

    from pcmkimg.adapters import pacemaker
    from pcmkimg.workflows.context import Context

    return Context(
        cluster=pacemaker.Pacemaker(env.runner, early=env.early),
        open_stores=functools.partial(_stores, env),
        open_views=functools.partial(_views, env),
        open_registry=functools.partial(_registry, env),
        journal_dir=Path(env.journal_dir),
        scheme=env.conf.scheme,
        lease_period=env.conf.lease_period,
        say=env.say,
        progress=progress,
    )


@contextmanager
def _views(env: Env) -> Iterator[storeview.StoreViews]:
    """Read-only views of the stores, for status and check (no podman-py: it starts fast); the
    local node is asked only for a node the configuration does not list."""
    from pcmkimg.adapters import pacemaker, storeview
    from pcmkimg.adapters.errors import PacemakerError

    def local() -> str | None:
        try:
            return pacemaker.local_node(env.runner)
        except PacemakerError:
            return None

    with storeview.open_views(env.conf, local, env.early_views) as views:
        yield views


def _registry(env: Env) -> Any:
    """The registry port: skopeo, with the registries' TLS settings of the configuration."""
    from pcmkimg.adapters import registry

    return registry.Skopeo(env.conf)


@contextmanager
def _stores(env: Env) -> Iterator[podman.Stores]:
    from pcmkimg.adapters import pacemaker, podman
    from pcmkimg.adapters.errors import PacemakerError

    try:
        local = pacemaker.local_node(env.runner)
    except PacemakerError:
        local = None
    with podman.open_stores(env.conf, local) as stores:
        yield stores
