"""The click options and arguments that several commands share, each defined once (the help
text, which says what the option means for that command, is each command's own)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from pcmkimg.completion import complete_bundle, complete_node, complete_service, completes

Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


def timeout_option(default: int, text: str) -> Decorator:
    return click.option(
        "--timeout", default=default, show_default=True, type=click.IntRange(10, 3600), help=text
    )


cib_file_option: Decorator = click.option(
    "--cib-file",
    type=click.Path(dir_okay=False),
    default=None,
    help="Offline: read this saved CIB (cibadmin --query > FILE) instead of the live cluster; "
    "status, check, metrics and outdated only (default $CIB_file).",
)


def dry_run_option(text: str = "Print the plan and stop.") -> Decorator:
    return click.option("--dry-run", is_flag=True, help=text)


def nodes_option(text: str) -> Decorator:
    """``--node NODE``, repeatable (``nodes``)."""
    return click.option("--node", "nodes", multiple=True, **completes(complete_node), help=text)


def every_option(text: str) -> Decorator:
    """``--all`` (``every``)."""
    return click.option("--all", "every", is_flag=True, help=text)


def textfile_option(text: str) -> Decorator:
    """``--textfile DIR``: where node_exporter's textfile collector reads."""
    return click.option("--textfile", type=click.Path(), default=None, metavar="DIR", help=text)


def service_argument(name: str = "service", **kwargs: Any) -> Decorator:
    """A SERVICE (``services`` with ``nargs=-1``: any number), completed from the CIB."""
    return click.argument(name, **kwargs, **completes(complete_service))


bundle_argument: Decorator = click.argument("bundle", **completes(complete_bundle))
