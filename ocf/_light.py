"""Run-time stand-ins for :func:`dataclasses.dataclass` and :class:`enum.Enum` (private).

An agent's monitor runs every few seconds on every node, in a fresh interpreter: importing
``dataclasses`` costs it ``inspect``, ``ast``, ``dis`` and ``tokenize``, and ``enum`` costs it
``functools`` and ``collections``; together most of an action's import time. The toolkit's
modules declare their classes with the standard decorators and bases as type checkers see them
(``TYPE_CHECKING``) and get these at run time, which behave the same for what the toolkit uses:

- :func:`dataclass` (``frozen``) and :func:`field` (``default``, ``default_factory``, ``repr``,
  ``compare``): ``__init__`` (positional or keyword, defaults, ``__post_init__``), ``__repr__``,
  ``__eq__``, and for frozen classes ``__setattr__``/``__delattr__`` raising
  :class:`FrozenInstanceError` (an AttributeError, as dataclasses' own) and ``__hash__``;
  :func:`replace`. No inheritance between them.
- :class:`Enum` and :class:`IntEnum`: members from the class body's public attributes, ``name``
  and ``value``, lookup by value (``OCFRC(7)``), iteration in definition order, ``len``, ``in``,
  ``Cls["NAME"]``, ``__members__``, members compared and hashed as their value when mixed with
  ``int`` or ``str``, Python 3.11's ``str()`` (an IntEnum member prints as its number).

pcmkimg's own records use them too (:mod:`pcmkimg.records`): every command is a fresh
interpreter, and the standard decorator compiles each class's methods (about 0.6 ms a class,
against 0.05 ms here); an instance is made in about twice the time of a dataclass's.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_MISSING: Any = object()


class FrozenInstanceError(AttributeError):
    """Assignment to a field of a frozen instance (as ``dataclasses.FrozenInstanceError``)."""


class _Field:
    __slots__ = ("default", "factory", "repr", "compare")

    def __init__(self, default: Any, factory: Any, repr: bool, compare: bool) -> None:
        self.default = default
        self.factory = factory
        self.repr = repr
        self.compare = compare


def field(
    *,
    default: Any = _MISSING,
    default_factory: Any = _MISSING,
    repr: bool = True,
    compare: bool = True,
) -> Any:
    return _Field(default, default_factory, repr, compare)


def replace(obj: Any, /, **changes: Any) -> Any:
    """A copy of ``obj`` with ``changes`` (as :func:`dataclasses.replace`): made by its
    ``__init__``, so that ``__post_init__`` checks it again."""
    for name in obj._light_fields_:
        if name not in changes:
            changes[name] = getattr(obj, name)
    return obj.__class__(**changes)


def dataclass(cls: Any = None, /, *, frozen: bool = False) -> Any:
    def wrap(klass: Any) -> Any:
        return _process(klass, frozen)

    return wrap if cls is None else wrap(cls)


def _process(cls: Any, frozen: bool) -> Any:
    specs = []  # (name, default, factory, shown, compared)
    for name, annotation in cls.__dict__.get("__annotations__", {}).items():
        if str(annotation).startswith(("ClassVar", "typing.ClassVar")):
            continue
        value = cls.__dict__.get(name, _MISSING)
        if isinstance(value, _Field):
            spec = (name, value.default, value.factory, value.repr, value.compare)
        else:
            spec = (name, value, _MISSING, True, True)
        if spec[1] is _MISSING:
            if name in cls.__dict__:
                delattr(cls, name)
        else:
            setattr(cls, name, spec[1])
        specs.append(spec)
    names = tuple(s[0] for s in specs)
    shown = tuple(s[0] for s in specs if s[3])
    compared = tuple(s[0] for s in specs if s[4])
    set_attr = object.__setattr__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if len(args) > len(names):
            raise TypeError(
                f"{cls.__name__}() takes {len(names)} arguments but {len(args)} were given"
            )
        values = dict(zip(names, args))
        for key, value in kwargs.items():
            if key not in names:
                raise TypeError(f"{cls.__name__}() got an unexpected keyword argument {key!r}")
            if key in values:
                raise TypeError(f"{cls.__name__}() got multiple values for argument {key!r}")
            values[key] = value
        for name, default, factory, _, _ in specs:
            if name in values:
                value = values[name]
            elif factory is not _MISSING:
                value = factory()
            elif default is not _MISSING:
                value = default
            else:
                raise TypeError(f"{cls.__name__}() missing required argument: {name!r}")
            set_attr(self, name, value)
        post = getattr(self, "__post_init__", None)
        if post is not None:
            post()

    def __repr__(self: Any) -> str:
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in shown)
        return f"{cls.__qualname__}({inner})"

    def _astuple(self: Any) -> tuple[Any, ...]:
        return tuple(getattr(self, n) for n in compared)

    def __eq__(self: Any, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return bool(_astuple(self) == _astuple(other))

    cls._light_fields_ = names
    cls.__init__ = __init__
    cls.__repr__ = __repr__
    cls.__eq__ = __eq__
    if frozen:

        def __setattr__(self: Any, name: str, value: Any) -> None:
            raise FrozenInstanceError(f"cannot assign to field {name!r}")

        def __delattr__(self: Any, name: str) -> None:
            raise FrozenInstanceError(f"cannot delete field {name!r}")

        def __hash__(self: Any) -> int:
            return hash(_astuple(self))

        cls.__setattr__ = __setattr__
        cls.__delattr__ = __delattr__
        cls.__hash__ = __hash__
    else:
        cls.__hash__ = None
    return cls


_MEMBER_METHODS = ("__repr__", "__str__", "__format__", "__reduce_ex__", "__copy__", "__deepcopy__")


class _EnumType(type):
    _member_map_: dict[str, Any]
    _value2member_map_: dict[Any, Any]

    def __new__(mcs, name: str, bases: tuple[type, ...], ns: dict[str, Any]) -> Any:
        members = {
            key: value
            for key, value in ns.items()
            if not key.startswith("_")
            and not callable(value)
            and not isinstance(value, (classmethod, staticmethod, property))
        }
        body = {k: v for k, v in ns.items() if k not in members}
        cls: Any = super().__new__(mcs, name, bases, body)
        data: Any = next(
            (b for b in cls.__mro__[1:] if not isinstance(b, _EnumType) and b is not object),
            object,
        )
        # The members' own methods come before the data type's (``str.__repr__`` would win
        # in the MRO of ``class Level(str, Enum)``), unless the class body has its own.
        for method in _MEMBER_METHODS:
            if method not in body:
                owner = next((b for b in cls.__mro__ if method in b.__dict__), None)
                enum_owner = next(
                    (b for b in cls.__mro__ if isinstance(b, _EnumType) and method in b.__dict__),
                    None,
                )
                if enum_owner is not None and owner is not enum_owner:
                    type.__setattr__(cls, method, enum_owner.__dict__[method])
        cls._member_map_ = {}
        cls._value2member_map_ = {}
        for key, value in members.items():
            member = object.__new__(cls) if data is object else data.__new__(cls, value)
            member._name_ = key
            member._value_ = value
            cls._member_map_[key] = member
            cls._value2member_map_.setdefault(value, member)
            type.__setattr__(cls, key, member)
        return cls

    def __call__(cls, value: Any) -> Any:
        try:
            return cls._value2member_map_[value]
        except (KeyError, TypeError):
            raise ValueError(f"{value!r} is not a valid {cls.__qualname__}") from None

    def __iter__(cls) -> Any:
        return iter(tuple(cls._member_map_.values()))

    def __len__(cls) -> int:
        return len(cls._member_map_)

    def __contains__(cls, member: object) -> bool:
        return isinstance(member, cls) and member._name_ in cls._member_map_

    def __getitem__(cls, name: str) -> Any:
        return cls._member_map_[name]

    @property
    def __members__(cls) -> dict[str, Any]:
        return dict(cls._member_map_)

    def __setattr__(cls, name: str, value: Any) -> None:
        if name in cls.__dict__.get("_member_map_", {}):
            raise AttributeError(f"cannot reassign member {name!r}")
        super().__setattr__(name, value)

    def __repr__(cls) -> str:
        return f"<enum {cls.__name__!r}>"


class Enum(metaclass=_EnumType):
    _name_: str
    _value_: Any

    @property
    def name(self) -> str:
        return self._name_

    @property
    def value(self) -> Any:
        return self._value_

    def __repr__(self) -> str:
        return f"<{type(self).__name__}.{self._name_}: {self._value_!r}>"

    def __str__(self) -> str:
        return f"{type(self).__name__}.{self._name_}"

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)

    def __reduce_ex__(self, protocol: Any) -> Any:
        return type(self), (self._value_,)

    def __copy__(self) -> Any:
        return self

    def __deepcopy__(self, memo: Any) -> Any:
        return self


class IntEnum(int, Enum):
    def __str__(self) -> str:
        return int.__repr__(self)

    def __format__(self, spec: str) -> str:
        return int.__format__(self, spec)
