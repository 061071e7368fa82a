"""The pcmkimg configuration file: where each node's podman API is, and how to reach it.

The file is ``/etc/pcmkimg/pcmkimg.conf`` unless the environment variable ``PCMKIMG_CONF`` or
the ``path`` argument of :func:`load` names another. A missing default file is not an error:
every setting has a default, and the local node is reached through its local podman socket. A
file that ``PCMKIMG_CONF`` or ``path`` names must exist. The file
is INI (Python's configparser) with ``=`` as the only delimiter, so that keys may hold a ``:``
(``host:port``). Keys are case-sensitive; ``#`` and ``;`` start comment lines. Every section is
optional::

    # Pacemaker node name (crm_node -n) = URL of that node's podman API service.
    # unix://PATH       a local socket (the local node, or a test store)
    # ssh://USER@HOST[:PORT]/PATH
    #                   the socket PATH on HOST, through an ssh tunnel that pcmkimg runs
    #                   itself (host keys always checked, never podman's ssh transport);
    #                   HOST must not start with '-', PORT is 1 to 65535
    # A node that is not listed is reachable only if it is the local node, through
    # unix:///run/podman/podman.sock.
    [nodes]
    controller-0 = unix:///run/podman/podman.sock
    controller-1 = ssh://root@controller-1.example.com/run/podman/podman.sock
    controller-2 = ssh://root@192.0.2.12:2222/run/podman/podman.sock

    # How floating names are made: PREFIX/SERVICE:TAG, the previous image as
    # PREFIX/SERVICE:ROLLBACK_TAG. The first component of the prefix must contain a dot.
    [scheme]
    prefix = cluster.common.tag
    tag = pcmklatest
    rollback_tag = pcmkprevious

    # One line per registry HOST[:PORT] that needs other than the defaults. The only option
    # today is tls_verify (default true). There is no global switch: a registry not listed
    # here is always verified.
    [registries]
    registry.example.com:8787 = tls_verify=false

    # The ssh client used for ssh:// nodes. Host keys are always checked
    # (StrictHostKeyChecking=yes, BatchMode=yes).
    # known_hosts: absolute path; default: ssh's own known_hosts files.
    # identity_file: absolute path; default: ssh's own identities.
    # connect_timeout: seconds, 1 to 120; default 10.
    [ssh]
    known_hosts = /etc/pcmkimg/known_hosts
    identity_file = /etc/pcmkimg/id_ed25519
    connect_timeout = 10

    # The update lease (the ticket state pcmkimg-lease): its holder renews it every
    # third of the period; a holder that died stops blocking the others after one period.
    # period: seconds, 0.1 to 3600 (short periods are for tests); default 30.
    [lease]
    period = 30

    # Metrics: node_exporter's textfile directory (absolute path), where
    # `pcmkimg outdated --record` (the pcmkimg-outdated timer) writes pcmkimg.prom after each
    # check; default: none (nothing is written).
    [metrics]
    textfile_dir = /var/lib/prometheus/node-exporter

Comments stand on lines of their own: a ``#`` after a value is part of the value. A malformed
file raises :class:`ConfigError`, naming the file, the section and key, and the fix.
"""

from __future__ import annotations

import configparser
import os
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from pcmkimg import PODMAN_SOCKET
from pcmkimg.adapters.errors import ConfigError, NodeNotConfigured, TunnelFailed
from pcmkimg.adapters.sshurl import parse_url
from pcmkimg.core.errors import InvalidReference, InvalidScheme
from pcmkimg.core.lease import DEFAULT_PERIOD, MAX_PERIOD, MIN_PERIOD, check_period
from pcmkimg.core.naming import (
    Scheme,
)
from pcmkimg.core.reference import (
    validate_domain,
)
from pcmkimg.records import dataclass, field

DEFAULT_PATH = Path("/etc/pcmkimg/pcmkimg.conf")
"""Where the configuration file is read from unless told otherwise."""

ENV_VAR = "PCMKIMG_CONF"
"""The environment variable that names another configuration file."""

LOCAL_URL = PODMAN_SOCKET
"""The podman API socket of the local node."""

DEFAULT_CONNECT_TIMEOUT = 10

_SECTIONS = ("nodes", "scheme", "registries", "ssh", "lease", "metrics")
_SCHEME_KEYS = ("prefix", "tag", "rollback_tag")
_SSH_KEYS = ("known_hosts", "identity_file", "connect_timeout")
_BOOLEANS = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}


@dataclass(frozen=True)
class RegistrySettings:
    """How to talk to one registry."""

    tls_verify: bool = True


@dataclass(frozen=True)
class SshSettings:
    """The ssh client options for ``ssh://`` nodes."""

    known_hosts: Path | None = None
    identity_file: Path | None = None
    connect_timeout: int = DEFAULT_CONNECT_TIMEOUT


def _frozen(mapping: Mapping[str, object] | None = None) -> Mapping:  # type: ignore[type-arg]
    return MappingProxyType(dict(mapping or {}))


@dataclass(frozen=True)
class Config:
    """The whole configuration; the defaults are what a missing file means."""

    nodes: Mapping[str, str] = field(default_factory=_frozen)
    scheme: Scheme = field(default_factory=Scheme)
    registries: Mapping[str, RegistrySettings] = field(default_factory=_frozen)
    ssh: SshSettings = field(default_factory=SshSettings)
    lease_period: float = DEFAULT_PERIOD
    """[lease] period: seconds; the holder renews every third of it, a dead holder stops
    blocking after it."""
    textfile_dir: Path | None = None
    """[metrics] textfile_dir: where ``outdated --record`` writes the metrics, or None."""
    path: Path | None = None
    """The file this was read from, or None when no file was read."""

    def url_for(self, node: str, *, local_node: str | None = None) -> str:
        """The podman URL of ``node``; the local socket for the local node when not listed."""
        url = self.nodes.get(node)
        if url is not None:
            return url
        if node == local_node:
            return LOCAL_URL
        where = self.path or _default_path()
        raise NodeNotConfigured(
            f"node {node!r} has no podman URL in {where} and is not the local node",
            fix=f"add '{node} = ssh://root@HOST/run/podman/podman.sock' to the [nodes] "
            f"section of {where}",
        )

    def tls_verify(self, registry: str | None) -> bool:
        """Whether TLS is verified for ``registry`` (host[:port]); True unless configured."""
        if registry is None:
            return True
        settings = self.registries.get(registry.lower())
        return True if settings is None else settings.tls_verify


def _default_path(default: Path = DEFAULT_PATH) -> Path:
    return Path(os.environ.get(ENV_VAR) or default)


def load(path: str | os.PathLike[str] | None = None, *, default: Path = DEFAULT_PATH) -> Config:
    """Read the configuration from ``path``, else ``$PCMKIMG_CONF``, else ``default`` (the
    default path, :data:`DEFAULT_PATH`).

    Only the default path may be absent (the defaults then: the local node alone is reachable).
    A file named by ``path`` or ``$PCMKIMG_CONF`` that does not exist, and any file that cannot
    be read or parsed, raises ConfigError naming it.
    """
    named = "--conf" if path is not None else ENV_VAR if os.environ.get(ENV_VAR) else None
    where = Path(path) if path is not None else _default_path(default)
    try:
        text = where.read_text(encoding="utf-8")
    except FileNotFoundError as err:
        if named is None:
            return Config()
        raise ConfigError(
            f"the configuration file {where} (given by {named}) does not exist",
            fix=f"create {where}, or give the path of an existing file with {named}",
        ) from err
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(
            f"cannot read the configuration file {where}: {err}",
            fix=f"make {where} a readable UTF-8 text file, or point {ENV_VAR} at one",
        ) from err
    return parse(text, where)


def parse(text: str, path: Path | None = None) -> Config:
    """Parse the text of a configuration file (``path`` is only used in messages)."""
    where = str(path) if path is not None else "<config>"
    parser = configparser.ConfigParser(
        delimiters=("=",), comment_prefixes=("#", ";"), interpolation=None, strict=True
    )
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # node names keep case
    try:
        parser.read_string(text, source=where)
    except configparser.Error as err:
        raise ConfigError(
            f"malformed configuration file {where}: {' '.join(str(err).split())}",
            fix="write INI sections [nodes], [scheme], [registries], [ssh], [lease], [metrics] "
            "with 'key = value' "
            "lines (see the pcmkimg.adapters.config documentation)",
        ) from err
    unknown = [s for s in parser.sections() if s not in _SECTIONS]
    if unknown:
        raise ConfigError(
            f"{where}: unknown section [{unknown[0]}]",
            fix=f"use only the sections {', '.join(f'[{s}]' for s in _SECTIONS)}",
        )
    section = {name: dict(parser[name]) if parser.has_section(name) else {} for name in _SECTIONS}
    return Config(
        nodes=_frozen(_nodes(section["nodes"], where)),
        scheme=_scheme(section["scheme"], where),
        registries=_frozen(_registries(section["registries"], where)),
        ssh=_ssh(section["ssh"], where),
        lease_period=_lease_period(section["lease"], where),
        textfile_dir=_textfile_dir(section["metrics"], where),
        path=path,
    )


def _nodes(items: dict[str, str], where: str) -> dict[str, str]:
    for node, url in items.items():
        if url.startswith("unix:///") and len(url) > len("unix:///"):
            continue
        if url.startswith("ssh://") and _ssh_url_ok(url):
            continue
        raise ConfigError(
            f"{where}: [nodes] {node} = {url!r} is not a podman URL",
            fix=f"in [nodes] of {where}, write {node} = unix:///run/podman/podman.sock for a "
            f"local socket or {node} = ssh://USER@HOST[:PORT]/run/podman/podman.sock for a "
            "remote node (HOST not starting with '-', PORT 1 to 65535)",
        )
    return items


def _ssh_url_ok(url: str) -> bool:
    """Whether the tunnel accepts ``url``: the same check at load time as at run time."""
    try:
        parse_url(url)
    except TunnelFailed:
        return False
    return True


def _unknown_keys(items: dict[str, str], known: tuple[str, ...], section: str, where: str) -> None:
    for key in items:
        if key not in known:
            raise ConfigError(
                f"{where}: unknown key {key!r} in [{section}]",
                fix=f"use only {', '.join(known)} in [{section}]",
            )


def _scheme(items: dict[str, str], where: str) -> Scheme:
    _unknown_keys(items, _SCHEME_KEYS, "scheme", where)
    try:
        return Scheme(**items)
    except InvalidScheme as err:
        raise ConfigError(f"{where}: [scheme]: {err.message}", fix=err.fix) from err


def _boolean(value: str, what: str, where: str) -> bool:
    try:
        return _BOOLEANS[value.strip().lower()]
    except KeyError:
        raise ConfigError(
            f"{where}: {what} = {value!r} is not a boolean", fix="write true or false"
        ) from None


def _registries(items: dict[str, str], where: str) -> dict[str, RegistrySettings]:
    found = {}
    for registry, options in items.items():
        try:
            validate_domain(registry)
        except InvalidReference as err:
            raise ConfigError(f"{where}: [registries]: {err.message}", fix=err.fix) from err
        tls_verify = True
        for option in options.replace(",", " ").split():
            key, eq, value = option.partition("=")
            if key != "tls_verify" or not eq:
                raise ConfigError(
                    f"{where}: [registries] {registry}: unknown option {option!r}",
                    fix=f"write '{registry} = tls_verify=false' (the only option)",
                )
            tls_verify = _boolean(value, f"[registries] {registry} tls_verify", where)
        found[registry.lower()] = RegistrySettings(tls_verify=tls_verify)
    return found


def _lease_period(items: dict[str, str], where: str) -> float:
    _unknown_keys(items, ("period",), "lease", where)
    text = items.get("period", f"{DEFAULT_PERIOD:g}")
    try:
        return check_period(float(text))
    except ValueError:
        raise ConfigError(
            f"{where}: [lease] period = {text!r} is not {MIN_PERIOD:g} to {MAX_PERIOD:g} seconds",
            fix="write a number of seconds, e.g. period = 30",
        ) from None


def _textfile_dir(items: dict[str, str], where: str) -> Path | None:
    _unknown_keys(items, ("textfile_dir",), "metrics", where)
    value = items.get("textfile_dir", "").strip()
    if value and not os.path.isabs(value):
        raise ConfigError(
            f"{where}: [metrics] textfile_dir = {value!r} is not an absolute path",
            fix="give node_exporter's --collector.textfile.directory, e.g. "
            "textfile_dir = /var/lib/prometheus/node-exporter",
        )
    return Path(value) if value else None


def _ssh(items: dict[str, str], where: str) -> SshSettings:
    _unknown_keys(items, _SSH_KEYS, "ssh", where)
    timeout_text = items.get("connect_timeout", str(DEFAULT_CONNECT_TIMEOUT))
    try:
        timeout = int(timeout_text)
    except ValueError:
        timeout = 0
    if not 1 <= timeout <= 120:
        raise ConfigError(
            f"{where}: [ssh] connect_timeout = {timeout_text!r} is not 1 to 120 seconds",
            fix="write a whole number of seconds, e.g. connect_timeout = 10",
        )
    paths = {}
    for key in ("known_hosts", "identity_file"):
        value = items.get(key, "").strip()
        if value and not os.path.isabs(value):
            raise ConfigError(
                f"{where}: [ssh] {key} = {value!r} is not an absolute path",
                fix=f"give the full path, e.g. {key} = /etc/pcmkimg/{key}",
            )
        paths[key] = Path(value) if value else None
    return SshSettings(paths["known_hosts"], paths["identity_file"], timeout)
