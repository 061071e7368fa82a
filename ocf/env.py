"""The environment Pacemaker (or ``ocf-tester``, or ``crm_resource --force-*``) gives an agent."""

from __future__ import annotations

from ocf.agent import Agent, check_value, parse_int

TYPE_CHECKING = False  # no run-time import of typing, collections.abc or dataclasses (ocf.agent)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from dataclasses import dataclass, field
else:
    from ocf._light import dataclass, field

RESKEY = "OCF_RESKEY_"
META = "OCF_RESKEY_CRM_meta_"
DEFAULT_DATEFMT = "%b %d %T "
DEFAULT_EXIT_REASON_PREFIX = "ocf-exit-reason:"


@dataclass(frozen=True)
class Environment:
    """What an agent reads from its environment, parsed once.

    ``params`` holds every ``OCF_RESKEY_<name>`` except Pacemaker's ``CRM_meta_*`` (those are in
    ``meta``, without the prefix), with the defaults of declared parameters applied to those
    that are absent (an empty value stays empty, as in shell agents' ``${X=default}``).
    """

    params: Mapping[str, str] = field(default_factory=dict)
    meta: Mapping[str, str] = field(default_factory=dict)
    resource_instance: str | None = None
    resource_type: str | None = None
    check_level: int = 0
    #: ``CRM_meta_interval`` in milliseconds; None when absent or empty (a probe, for monitor),
    #: -1 when it is not a number (taken as a recurring monitor, never as a probe).
    interval_ms: int | None = None
    #: ``OCF_RESKEY_CRM_meta_on_node``: the Pacemaker node name, when Pacemaker passed it.
    node: str | None = None
    #: ``HA_LOGFACILITY``; None when unset, empty or ``none``.
    log_facility: str | None = None
    log_file: str | None = None
    debug: bool = False
    datefmt: str = DEFAULT_DATEFMT
    exit_reason_prefix: str = DEFAULT_EXIT_REASON_PREFIX

    def is_probe(self, action: str) -> bool:
        """A monitor with interval 0 (or none given) is a probe: the resource may be anywhere."""
        return action == "monitor" and not self.interval_ms

    def missing_required(self, agent: Agent) -> list[str]:
        """Names of the required parameters that are unset or empty."""
        return [p.name for p in agent.parameters if p.required and not self.params.get(p.name)]

    def config_errors(self, agent: Agent) -> list[str]:
        """Configuration problems: missing required parameters and values of the wrong type."""
        errors = [f"required parameter {name} is not set" for name in self.missing_required(agent)]
        for param in agent.parameters:
            value = self.params.get(param.name)
            if not value:
                continue
            problem = check_value(param.type, value)
            if problem:
                errors.append(f"parameter {param.name}: {problem}")
        return errors


def _nonempty(environ: Mapping[str, str], key: str) -> str | None:
    value = environ.get(key)
    return value if value else None


def _is_on(value: str | None) -> bool:
    return value is not None and value.strip().lower() not in ("", "0", "no", "false", "off")


def parse_environment(agent: Agent, environ: Mapping[str, str]) -> Environment:
    """Parse ``environ`` (normally ``os.environ``) for ``agent``."""
    params: dict[str, str] = {}
    meta: dict[str, str] = {}
    for key, value in environ.items():
        if key.startswith(META):
            meta[key[len(META) :]] = value
        elif key.startswith(RESKEY):
            params[key[len(RESKEY) :]] = value
    for param in agent.parameters:
        default = param.default_text
        if default is not None and param.name not in params:
            params[param.name] = default

    level_text = _nonempty(environ, "OCF_CHECK_LEVEL") or params.get("OCF_CHECK_LEVEL") or "0"
    level = parse_int(level_text)
    interval_text = meta.get("interval") or environ.get("CRM_meta_interval") or ""
    interval = parse_int(interval_text) if interval_text.strip() else None

    facility = _nonempty(environ, "HA_LOGFACILITY")
    if facility is not None and facility.strip().lower() == "none":
        facility = None
    return Environment(
        params=params,
        meta=meta,
        resource_instance=_nonempty(environ, "OCF_RESOURCE_INSTANCE"),
        resource_type=_nonempty(environ, "OCF_RESOURCE_TYPE"),
        check_level=level if level is not None and level >= 0 else 0,
        interval_ms=interval if interval is not None or not interval_text.strip() else -1,
        node=meta.get("on_node") or None,
        log_facility=facility,
        log_file=_nonempty(environ, "HA_LOGFILE"),
        debug=_is_on(environ.get("HA_debug")),
        datefmt=environ.get("HA_DATEFMT") or DEFAULT_DATEFMT,
        exit_reason_prefix=environ.get("OCF_EXIT_REASON_PREFIX") or DEFAULT_EXIT_REASON_PREFIX,
    )
