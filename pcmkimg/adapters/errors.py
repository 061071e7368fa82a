"""The error kinds of the adapters: one type per kind that a caller tells apart.

Each kind is in one exit family of :mod:`pcmkimg.errors` (the CLI maps the family to an exit
code) and carries its fix: the Pacemaker tools' failures (:mod:`pcmkimg.adapters.pacemaker`),
the stores' own (a refused host key, an answer of the API socket too slow or too large), the ssh
tunnel's, the configuration's, the journal's and the textfile's. The pure kinds, a store's among
them, are in :mod:`pcmkimg.core.errors`. The transport errors of the one podman API client stay
in :mod:`pcmkimg.adapters.apisocket`: the agent's monitor imports it and nothing more.
"""

from __future__ import annotations

from pcmkimg.core.errors import NodeUnreachable


class HostKeyRejected(NodeUnreachable):
    """ssh refused the node's host key: it is unknown or it changed."""
