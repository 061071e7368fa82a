"""Shell completion of the cluster's names: SERVICE, BUNDLE and --node values.

click's own completion (``_PCMKIMG_COMPLETE=bash_source pcmkimg``; the RPM ships the script as
/usr/share/bash-completion/completions/pcmkimg) calls the ``complete_*`` callbacks below while
the user presses TAB. They read the CIB once with a short timeout and offer what it holds;
when the CIB can't be read (no cluster, not root, a broken configuration file) they offer
nothing, at once and silently: a completion must never print an error or hang a shell.

The pure part (``services``, ``bundle_ids``, ``member_nodes``) works on a parsed CIB. The CLI
imports this module on every run: the CIB model (and lxml) are imported by the callbacks only.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from pcmkimg.core import cib, naming

TIMEOUT = 2.0
"""Seconds a completion waits for ``cibadmin --query``."""

Kind = Callable[["cib.Element", "naming.Scheme"], list[str]]
Callback = Callable[[click.Context, Any, str], list[str]]

# click 8 takes shell_complete=(ctx, param, incomplete); click 7 (RHEL 9's python3-click 7.1)
# takes autocompletion=(ctx, args, incomplete) and refuses the other keyword.
_CLICK_8 = "shell_complete" in inspect.signature(click.Parameter.__init__).parameters


def completes(callback: Callback, *, click_8: bool = _CLICK_8) -> dict[str, Any]:
    """The keyword argument that gives a click argument or option ``callback``'s candidates
    (``click_8``: whether the click in use is 8 or later; detected at import)."""
    if click_8:
        return {"shell_complete": callback}

    def click7(ctx: click.Context, args: list[str], incomplete: str) -> list[str]:
        return callback(ctx, None, incomplete)  # click 7 passes these three by name

    return {"autocompletion": click7}


def services(config: cib.Element, scheme: naming.Scheme) -> list[str]:
    """Services of the bundles that run a floating name (what SERVICE arguments take)."""
    from pcmkimg.core import cib, naming

    found = (naming.as_floating(b.image, scheme) for b in cib.bundles(config))
    return sorted({f.service for f in found if f is not None})


def bundle_ids(config: cib.Element, scheme: naming.Scheme) -> list[str]:
    """Ids of every bundle (what BUNDLE arguments take)."""
    from pcmkimg.core import cib

    return sorted(b.id for b in cib.bundles(config))


def member_nodes(config: cib.Element, scheme: naming.Scheme) -> list[str]:
    """Cluster member nodes, by Pacemaker node name (what --node takes)."""
    from pcmkimg.core import cib

    return sorted(n.uname for n in cib.nodes(config) if n.kind == "member")


def candidates(
    config: cib.Element, scheme: naming.Scheme, kind: Kind, incomplete: str
) -> list[str]:
    return [name for name in kind(config, scheme) if name.startswith(incomplete)]


def _scheme(ctx: click.Context) -> naming.Scheme:
    from pcmkimg.adapters import config
    from pcmkimg.core import naming

    try:
        return config.load(ctx.find_root().params.get("conf")).scheme
    except Exception:  # a completion never fails: the default scheme is a fair guess
        return naming.DEFAULT_SCHEME


def _read_cib() -> cib.Element | None:
    from pcmkimg.adapters import pacemaker

    try:
        return pacemaker.query_cib(pacemaker.Runner(timeout=TIMEOUT))
    except Exception:  # no cluster, no tools, no permission: nothing to offer
        return None


def _complete(kind: Kind, ctx: click.Context, incomplete: str) -> list[str]:
    try:
        config = _read_cib()
        if config is None:
            return []
        return candidates(config, _scheme(ctx), kind, incomplete)
    except Exception:  # never a traceback in the middle of a command line
        return []


def complete_service(ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[str]:
    return _complete(services, ctx, incomplete)


def complete_bundle(ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[str]:
    return _complete(bundle_ids, ctx, incomplete)


def complete_node(ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[str]:
    return _complete(member_nodes, ctx, incomplete)
