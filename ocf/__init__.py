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

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ocf.agent import (
        Action,
        Agent,
        Handler,
        Parameter,
        ParamType,
        parse_bool,
        parse_int,
    )
    from ocf.dispatch import Context, main, run, sanitize_reason
    from ocf.env import Environment, parse_environment
    from ocf.log import Level, Logger
    from ocf.metadata import escape_attr, escape_text, render_metadata
    from ocf.rc import OCFRC, OCFError

#: Where each public name lives. They are imported on first use, so that a program that uses
#: only the light stand-ins (``ocf._light``, pcmkimg's records) loads none of the toolkit; an
#: agent's action loads what it names (``meta-data`` alone needs :mod:`ocf.metadata`).
_HOMES = {
    **dict.fromkeys(
        ("Action", "Agent", "Handler", "Parameter", "ParamType", "parse_bool", "parse_int"),
        "agent",
    ),
    **dict.fromkeys(("Context", "main", "run", "sanitize_reason"), "dispatch"),
    **dict.fromkeys(("Environment", "parse_environment"), "env"),
    **dict.fromkeys(("Level", "Logger"), "log"),
    **dict.fromkeys(("escape_attr", "escape_text", "render_metadata"), "metadata"),
    **dict.fromkeys(("OCFRC", "OCFError"), "rc"),
}


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'ocf' has no attribute {name!r}")
    value = getattr(__import__(f"ocf.{home}", fromlist=[name]), name)
    globals()[name] = value
    return value


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
