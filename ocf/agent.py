"""Declarations of an OCF resource agent: its parameters, its actions and their handlers.

Everything here is checked when it is built, so that the metadata rendered from it is valid
against both ``ra-api-1.dtd`` (what ``ocf-tester`` checks) and pcs's OCF 1.1 RelaxNG schema.
"""

from __future__ import annotations

# Neither typing, collections.abc, re, dataclasses nor enum is imported at run time: every
# action of an agent would pay for them (dataclasses alone pulls in inspect, ast and dis), and
# annotations are not evaluated (PEP 563). Type checkers see the standard dataclass and Enum;
# the run time gets their light stand-ins (ocf._light).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from dataclasses import dataclass, field
    from enum import Enum
    from typing import Union

    from ocf.dispatch import Context

    Duration = Union[int, str]
    Default = Union[str, int, bool, None]

    #: A handler gets the parsed request and returns an exit code (an :class:`ocf.OCFRC`).
    Handler = Callable[["Context"], int]
else:
    from ocf._light import Enum, dataclass, field


def __getattr__(name: str) -> object:
    if name == "Handler":  # built on first use: collections.abc costs every action otherwise
        from collections.abc import Callable

        handler = Callable[["Context"], int]
        globals()["Handler"] = handler
        return handler
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: The action names ``ra-api-1.dtd`` allows in metadata (OCF 1.1 adds ``reload-agent``, which
#: ``xmllint --valid`` rejects, so it is left out).
DTD_ACTION_NAMES = frozenset(
    {
        "start",
        "stop",
        "recover",
        "monitor",
        "restart",
        "migrate_to",
        "migrate_from",
        "promote",
        "demote",
        "notify",
        "status",
        "reload",
        "meta-data",
        "usage",
        "methods",
        "validate-all",
    }
)

#: Actions the toolkit answers itself (see :func:`ocf.run`); no handler may be given for them.
BUILTIN_ACTIONS = frozenset({"meta-data", "usage", "help"})

#: Values OCF agents accept as true / false (``ocf_is_true`` and friends), lower case.
TRUE_WORDS = frozenset({"1", "yes", "true", "on", "y", "ja"})
FALSE_WORDS = frozenset({"0", "no", "false", "off", "n", "nein"})

#: The unit suffixes of a duration, longest first (``20``, ``20s``, ``500ms``, ``2min``).
_DURATION_UNITS = ("msec", "min", "sec", "ms", "hr", "s", "m", "h")


def _is_digits(text: str) -> bool:
    """``[0-9]+``: ASCII digits only (``str.isdigit`` accepts other scripts' digits too)."""
    return text.isascii() and text.isdigit()


def _is_param_name(text: str) -> bool:
    """``[A-Za-z_][A-Za-z0-9_]*``: an ASCII identifier is exactly that."""
    return text.isascii() and text.isidentifier()


def _is_duration(text: str) -> bool:
    """``[0-9]+(ms|msec|s|sec|m|min|h|hr)?``"""
    for unit in _DURATION_UNITS:
        if text.endswith(unit):
            return _is_digits(text[: -len(unit)])
    return _is_digits(text)


def _is_integer(text: str) -> bool:
    """``[+-]?[0-9]+``"""
    return _is_digits(text[1:] if text[:1] in ("+", "-") else text)


class ParamType(str, Enum):
    """Content types of OCF 1.1 parameters (all three are valid for ra-api-1.dtd too)."""

    STRING = "string"
    INTEGER = "integer"
    BOOLEAN = "boolean"


def parse_bool(value: str) -> bool | None:
    """An OCF boolean word as a bool, or None when it is not one (case-insensitive)."""
    word = value.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    return None


def parse_int(value: str) -> int | None:
    """A decimal integer, or None when ``value`` is not one."""
    text = value.strip()
    return int(text) if _is_integer(text) else None


def check_value(ptype: ParamType, value: str) -> str | None:
    """Why ``value`` is not valid for ``ptype``, or None when it is."""
    if ptype is ParamType.INTEGER and parse_int(value) is None:
        return f"{value!r} is not an integer"
    if ptype is ParamType.BOOLEAN and parse_bool(value) is None:
        return f"{value!r} is not a boolean (true/false, yes/no, 1/0, on/off)"
    return None


def duration_text(value: Duration) -> str:
    """A timeout or interval as metadata text: an int is seconds (``20`` -> ``20s``)."""
    if isinstance(value, bool):
        raise ValueError(f"not a duration: {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"negative duration: {value}")
        return f"{value}s"
    if not isinstance(value, str) or not _is_duration(value):
        raise ValueError(f"not a duration: {value!r} (use e.g. 20, '20s', '500ms', '2min')")
    return value


@dataclass(frozen=True)
class Parameter:
    """One instance attribute of the resource (``OCF_RESKEY_<name>``)."""

    name: str
    shortdesc: str
    longdesc: str = ""
    type: ParamType = ParamType.STRING
    default: Default = None
    required: bool = False
    unique: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _is_param_name(self.name):
            raise ValueError(f"invalid parameter name: {self.name!r}")
        if self.name.startswith("CRM_meta_"):
            raise ValueError(f"{self.name}: the CRM_meta_ prefix belongs to Pacemaker")
        object.__setattr__(self, "type", ParamType(self.type))
        if self.required and self.default is not None:
            raise ValueError(f"{self.name}: a required parameter cannot have a default")
        if self.default is not None:
            problem = check_value(self.type, self.default_text or "")
            if problem:
                raise ValueError(f"{self.name}: default {problem}")

    @property
    def default_text(self) -> str | None:
        """The default as the string the agent would get from the environment."""
        if self.default is None:
            return None
        if isinstance(self.default, bool):
            return "true" if self.default else "false"
        return str(self.default)


@dataclass(frozen=True)
class Action:
    """One action as advertised in the metadata (the defaults Pacemaker shows to operators).

    ``timeout`` and ``interval`` are seconds when given as int, else text such as ``"20s"``.
    """

    name: str
    timeout: Duration
    interval: Duration | None = None
    depth: int | None = None
    role: str | None = None

    def __post_init__(self) -> None:
        if self.name not in DTD_ACTION_NAMES:
            raise ValueError(
                f"action {self.name!r} is not allowed by ra-api-1.dtd "
                f"(allowed: {', '.join(sorted(DTD_ACTION_NAMES))})"
            )
        duration_text(self.timeout)
        if self.interval is not None:
            duration_text(self.interval)
        if self.depth is not None and (isinstance(self.depth, bool) or self.depth < 0):
            raise ValueError(f"{self.name}: depth must be a non-negative int")
        if self.role is not None and not (
            isinstance(self.role, str) and self.role.isascii() and self.role.isalpha()
        ):
            raise ValueError(f"{self.name}: invalid role {self.role!r}")


@dataclass(frozen=True)
class Agent:
    """A resource agent: its description, parameters, advertised actions and handlers.

    Every advertised action needs a handler, except ``meta-data`` (answered by the toolkit)
    and ``validate-all`` (the toolkit checks the parameters, then calls the handler if any).
    ``meta-data`` and ``validate-all`` are advertised automatically when not declared.
    """

    name: str
    shortdesc: str
    longdesc: str = ""
    version: str = "1.0"
    parameters: Sequence[Parameter] = ()
    actions: Sequence[Action] = ()
    handlers: Mapping[str, Handler] = field(default_factory=dict)
    #: The OCF version in ``<version>``: pcs picks its schema by it.
    ocf_version: str = "1.1"

    def __post_init__(self) -> None:
        object.__setattr__(self, "parameters", tuple(self.parameters))
        object.__setattr__(self, "actions", tuple(self.actions))
        object.__setattr__(self, "handlers", dict(self.handlers))
        if not self.name:
            raise ValueError("an agent needs a name")
        if self.ocf_version not in ("1.0", "1.1"):
            raise ValueError(f"unsupported OCF version {self.ocf_version!r}")
        _no_duplicates("parameter", [p.name for p in self.parameters])
        # The same action may be advertised more than once (monitor at two depths, or per role).
        _no_duplicates("action", [(a.name, a.depth, a.role, a.interval) for a in self.actions])
        for action in self.actions:
            if action.name in ("meta-data", "validate-all"):
                continue
            if action.name not in self.handlers:
                raise ValueError(f"action {action.name!r} is advertised but has no handler")
        for name, handler in self.handlers.items():
            if name in BUILTIN_ACTIONS:
                raise ValueError(f"{name!r} is answered by the toolkit; remove its handler")
            if not callable(handler):
                raise ValueError(f"handler for {name!r} is not callable")

    @property
    def advertised_actions(self) -> tuple[Action, ...]:
        """The declared actions plus ``meta-data`` and ``validate-all`` when missing."""
        names = {a.name for a in self.actions}
        extra = []
        if "validate-all" not in names:
            extra.append(Action("validate-all", timeout=20))
        if "meta-data" not in names:
            extra.append(Action("meta-data", timeout=5))
        return tuple(self.actions) + tuple(extra)

    def parameter(self, name: str) -> Parameter | None:
        """The declared parameter ``name``, if any."""
        for param in self.parameters:
            if param.name == name:
                return param
        return None

    def usage(self) -> str:
        """The one-line usage text."""
        actions = list(self.handlers)
        for builtin in ("validate-all", "meta-data", "usage"):
            if builtin not in actions:
                actions.append(builtin)
        return f"usage: {self.name} {{{'|'.join(actions)}}}"


def _no_duplicates(what: str, keys: Sequence[object]) -> None:
    seen: set[object] = set()
    for key in keys:
        if key in seen:
            raise ValueError(f"{what} {key!r} declared twice")
        seen.add(key)
