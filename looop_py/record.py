"""Frozen records for the quiet path: what `@dataclass(frozen=True)` gives, for less.

A quiet beat is mostly Python start-up, and `dataclasses` is one of its
costliest parts: importing it pulls in inspect, ast, dis and tokenize, and
every class it decorates compiles half a dozen generated methods. The classes a
beat always creates (Paths, Config, Sensor, Reading, World, BeatResult, …) are
made here instead, by plain closures and no code generation.

The type checker sees the real `dataclasses` (the names below are aliases of
it when type checking), so the classes keep their typed constructors. At run
time a record behaves as the dataclass would for what looop uses: positional
and keyword construction with defaults and default factories, field-wise
equality and hashing, the dataclass repr, frozen attributes, `replace`,
`fields` (name, type as written, default, default_factory, metadata) and
`asdict`. Only `frozen=True` records without inheritance are supported.
"""

from __future__ import annotations

__all__ = ["MISSING", "Field", "FrozenInstanceError", "asdict", "field", "fields", "record"]
__all__ += ["is_record", "replace"]

TYPE_CHECKING = False
if TYPE_CHECKING:
    from dataclasses import MISSING, Field, FrozenInstanceError, asdict, field, fields, replace
    from dataclasses import dataclass as record
    from dataclasses import is_dataclass as is_record
else:

    class _Missing:
        __slots__ = ()

        def __repr__(self):
            return "MISSING"

    MISSING = _Missing()

    class FrozenInstanceError(AttributeError):
        """Assigning to a field of a frozen record."""

    class Field:
        __slots__ = ("default", "default_factory", "metadata", "name", "type")

        def __init__(self, default=MISSING, default_factory=MISSING, metadata=None):
            self.name = ""
            self.type = ""
            self.default = default
            self.default_factory = default_factory
            self.metadata = dict(metadata or {})

        def __repr__(self):
            return f"Field(name={self.name!r}, type={self.type!r})"

    def field(*, default=MISSING, default_factory=MISSING, metadata=None):
        if default is not MISSING and default_factory is not MISSING:
            raise ValueError("cannot specify both default and default_factory")
        return Field(default, default_factory, metadata)

    def record(cls=None, /, *, frozen=True):
        if not frozen:
            raise TypeError("looop_py.record makes frozen records only")
        if cls is None:
            return _make
        return _make(cls)

    def _make(cls):
        own = cls.__dict__.get("__annotations__", {})  # noqa: RUF063 (no inspect here)
        found = []
        for name, type_ in own.items():
            if str(type_).startswith(("ClassVar", "typing.ClassVar")):
                continue
            value = cls.__dict__.get(name, MISSING)
            f = value if isinstance(value, Field) else Field(default=value)
            f.name, f.type = name, type_
            if isinstance(value, Field):
                if f.default is MISSING:
                    delattr(cls, name)
                else:
                    setattr(cls, name, f.default)
            found.append(f)
        seen_default = False
        for f in found:
            if f.default is not MISSING or f.default_factory is not MISSING:
                seen_default = True
            elif seen_default:
                raise TypeError(f"non-default argument {f.name!r} follows default argument")
        _install(cls, tuple(found))
        return cls

    def _install(cls, found):
        names = tuple(f.name for f in found)
        by_name = {f.name: f for f in found}
        qualname = cls.__qualname__

        def __init__(self, *args, **kwargs):
            if len(args) > len(names):
                raise TypeError(
                    f"{qualname}.__init__() takes {len(names) + 1} positional arguments"
                    f" but {len(args) + 1} were given"
                )
            values = dict(zip(names, args, strict=False))
            for key, value in kwargs.items():
                if key not in by_name:
                    raise TypeError(
                        f"{qualname}.__init__() got an unexpected keyword argument {key!r}"
                    )
                if key in values:
                    raise TypeError(f"{qualname}.__init__() got multiple values for {key!r}")
                values[key] = value
            for f in found[len(args) :]:
                if f.name in values:
                    continue
                if f.default is not MISSING:
                    values[f.name] = f.default
                elif f.default_factory is not MISSING:
                    values[f.name] = f.default_factory()
                else:
                    raise TypeError(
                        f"{qualname}.__init__() missing 1 required argument: {f.name!r}"
                    )
            self.__dict__.update(values)

        def __repr__(self):
            inner = ", ".join(f"{n}={self.__dict__[n]!r}" for n in names)
            return f"{self.__class__.__qualname__}({inner})"

        def _key(self):
            d = self.__dict__
            return tuple(d[n] for n in names)

        def __eq__(self, other):
            if other.__class__ is self.__class__:
                return _key(self) == _key(other)
            return NotImplemented

        def __hash__(self):
            return hash(_key(self))

        def __setattr__(self, name, value):
            raise FrozenInstanceError(f"cannot assign to field {name!r}")

        def __delattr__(self, name):
            raise FrozenInstanceError(f"cannot delete field {name!r}")

        def __reduce__(self):
            return (_rebuild, (self.__class__, _key(self)))

        for method in (__init__, __repr__, __eq__, __hash__, __setattr__, __delattr__):
            method.__qualname__ = f"{qualname}.{method.__name__}"
            if method.__name__ not in cls.__dict__:
                setattr(cls, method.__name__, method)
        cls.__reduce__ = __reduce__
        cls.__match_args__ = names
        cls.__record_fields__ = found

    def _rebuild(cls, values):
        return cls(*values)

    def is_record(obj):
        return hasattr(obj, "__record_fields__")

    def fields(obj):
        try:
            return obj.__record_fields__
        except AttributeError:
            raise TypeError("must be called with a record type or instance") from None

    def replace(obj, /, **changes):
        values = {f.name: obj.__dict__[f.name] for f in fields(obj)}
        values.update(changes)
        return obj.__class__(**values)

    def asdict(obj):
        return {f.name: _plain(obj.__dict__[f.name]) for f in fields(obj)}

    def _plain(value):
        if is_record(value) and not isinstance(value, type):
            return asdict(value)
        if isinstance(value, list | tuple):
            return type(value)(_plain(v) for v in value)
        if isinstance(value, dict):
            return {_plain(k): _plain(v) for k, v in value.items()}
        return value
