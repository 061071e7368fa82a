"""The error kinds of the adapters: one type per kind that a caller tells apart.

Each kind is in one exit family of :mod:`pcmkimg.errors` (the CLI maps the family to an exit
code) and carries its fix: the Pacemaker tools' failures (:mod:`pcmkimg.adapters.pacemaker`),
the stores' own (a refused host key, an answer of the API socket too slow or too large), the ssh
tunnel's, the configuration's, the journal's and the textfile's. The pure kinds, a store's among
them, are in :mod:`pcmkimg.core.errors`. The transport errors of the one podman API client stay
in :mod:`pcmkimg.adapters.apisocket`: the agent's monitor imports it and nothing more.
"""

from __future__ import annotations

from pcmkimg.core.errors import NodeUnreachable, StoreError
from pcmkimg.errors import BadInput, LeftBehind, NodeFailed, Refused, Unreachable

# typing is not imported at run time: the agent's podman-command fallback imports this module.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from pcmkimg.core import cib

# ---------------------------------------------------------------------------------------------
# A store reached over our ssh tunnel.


class HostKeyRejected(NodeUnreachable):
    """ssh refused the node's host key: it is unknown or it changed."""


# ---------------------------------------------------------------------------------------------
# The Pacemaker tools (pcmkimg.adapters.pacemaker).


class PacemakerError(Unreachable):
    """Base of the errors of this adapter."""


class ToolMissingError(PacemakerError):
    """A Pacemaker tool is not installed (or not on PATH)."""


class ToolError(PacemakerError):
    """A tool failed; carries the argv, exit code and stderr."""

    def __init__(
        self,
        message: str,
        fix: str = "",
        *,
        argv: Sequence[str] = (),
        rc: int = 0,
        stderr: str = "",
    ) -> None:
        self.argv = tuple(argv)
        self.rc = rc
        self.stderr = stderr
        super().__init__(message, fix)


class CibChangedError(ToolError):
    """The CIB changed between our read and our write: the write was refused."""


class NotFoundError(ToolError):
    """A resource, node or attribute does not exist."""


class NoQuorumError(ToolError, Refused):
    """The cluster (partition) has no quorum."""


class ClusterUnreachableError(ToolError):
    """The tool could not talk to the cluster daemons on this node."""


class PacemakerTimeoutError(ToolError):
    """A tool (or the cluster, for ``--wait``/``--restart``) did not finish in time."""


class OfflineError(PacemakerError, Refused):
    """The operation needs a live cluster but the runner works on a CIB file."""


class CibEnvironmentError(BadInput):
    """A ``CIB_*`` variable or ``--cib-file`` that this command cannot honour."""


class RestartFailedError(PacemakerError, NodeFailed):
    """The replica did not come back: a failed operation, or not active on its node."""

    def __init__(self, message: str, fix: str = "", *, failures: Sequence[cib.Failure] = ()):
        self.failures = tuple(failures)
        super().__init__(message, fix)


class BanNotRemovedError(PacemakerError, LeftBehind):
    """The ``cli-ban`` left by a restart could not be removed."""


# ---------------------------------------------------------------------------------------------
# The podman API socket, the ssh tunnel, the configuration, the journal, the textfile.


class AnswerTooSlow(NodeUnreachable):
    """The podman API socket did not give its whole answer within the deadline."""


class AnswerTooLarge(StoreError):
    """The podman API socket's answer is larger than
    :data:`pcmkimg.adapters.localstore.MAX_ANSWER`."""


class TunnelFailed(Unreachable):
    """ssh could not open the tunnel. ``stderr`` is what ssh said; ``host_key`` is True when
    ssh refused the host's key."""

    def __init__(self, message: str, fix: str = "", *, stderr: str = "", host_key: bool = False):
        self.stderr = stderr
        self.host_key = host_key
        super().__init__(message, fix)


class ConfigError(BadInput):
    """The configuration file cannot be read or is malformed."""


class NodeNotConfigured(BadInput):
    """No podman URL is known for a node."""


class UnsafeStateDir(Refused):
    """The state directory could be written by someone else."""


class TextfileError(BadInput):
    """The directory is missing, not a directory, or the file can't be written there."""
