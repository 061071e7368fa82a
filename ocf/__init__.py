"""A small toolkit for writing OCF resource agents in Python (stdlib only).

An agent script declares an :class:`Agent` and calls :func:`main`::

    #!/usr/bin/python3
    from ocf import Action, Agent, OCFRC, Parameter, main

    def monitor(ctx):
        return OCFRC.NOT_RUNNING

    AGENT = Agent(
        name="example",
        shortdesc="An example",
        parameters=[Parameter("state", "State file", required=True, unique=True)],
        actions=[Action("monitor", timeout=20, interval=10)],
        handlers={"monitor": monitor},
    )

    if __name__ == "__main__":
        main(AGENT)
"""

from __future__ import annotations

from ocf.agent import (
    Action,
    Agent,
    Parameter,
    ParamType,
    parse_bool,
    parse_int,
)
from ocf.dispatch import Context, main, run, sanitize_reason
from ocf.env import Environment, parse_environment
from ocf.log import Level, Logger
from ocf.rc import OCFRC, OCFError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ocf.agent import Handler
    from ocf.metadata import escape_attr, escape_text, render_metadata

#: Names of :mod:`ocf.metadata`, imported on first use: only ``meta-data`` needs them.
_METADATA_NAMES = frozenset({"escape_attr", "escape_text", "render_metadata"})


def __getattr__(name: str) -> object:
    if name in _METADATA_NAMES:
        from ocf import metadata

        return getattr(metadata, name)
    if name == "Handler":  # a type alias on collections.abc: built on first use
        from ocf import agent

        return agent.Handler
    raise AttributeError(f"module 'ocf' has no attribute {name!r}")


__all__ = [
    "OCFRC",
    "Action",
    "Agent",
    "Context",
    "Environment",
    "Handler",
    "Level",
    "Logger",
    "OCFError",
    "ParamType",
    "Parameter",
    "escape_attr",
    "escape_text",
    "main",
    "parse_bool",
    "parse_environment",
    "parse_int",
    "render_metadata",
    "run",
    "sanitize_reason",
]
