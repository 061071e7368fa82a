"""pcmkimg: per-node floating image names for Pacemaker container bundles.

The few constants that the agent (whose meta-data must import nothing else), the CLI and the
CIB edits share live here, once.
"""

__version__ = "0.1.0"

PODMAN_SOCKET = "unix:///run/podman/podman.sock"
"""The local node's podman API socket: the agent's default and a local node's store."""

GUARD_TIMEOUTS = {"start": 60, "stop": 30, "monitor": 30, "validate-all": 30}
"""Seconds per operation of the guard agent: its meta-data and the CIB ``guard add`` writes."""

GUARD_MONITOR_INTERVAL = 30
"""Seconds between the guard's monitors."""

LEASE_TICKET = "pcmkimg-lease"
"""The cluster-wide update lease's ticket state: ``/cib/status/tickets/ticket_state`` with this
id (the lease module writes it; the light snapshot read asks for it alone)."""
