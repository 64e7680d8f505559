"""Tuple value types beyond msgpack's: serializers the topology registers, and pickle.

msgpack carries None, bool, int, float, str, bytes, list and dict. Any other type a tuple
carries between workers needs a serializer registered in ``topology.serializers`` (Storm's
``topology.kryo.register`` in spirit)::

    topology.serializers:
      geo.Point: geo.PointSerializer          # an object or class with pack(obj) / unpack(v)
      money.Amount: [money.to_wire, money.from_wire]   # or the two functions

``pack`` returns any msgpack value (registered types may nest); ``unpack`` gets it back.
Each registered type travels as a msgpack ext type whose code is fixed by the sorted class
names, so every worker of a topology agrees on it without a handshake.

Pickle (``topology.fall.back.on.java.serialization``) is off by default: unpickling runs
whatever the bytes say, so a worker accepts a pickled value only when the topology turned it
on *and* its channel admits only the topology's own workers (CurveZMQ); otherwise a frame
carrying one is refused before anything is unpickled.

Resolving the names imports the user's modules: only workers (and the submitting client,
which already runs the user's code) build a :class:`ValueTypes` from conf; Nimbus checks the
names' shape only (:func:`squall.client.config.validate`).
"""

from __future__ import annotations

import importlib
import pickle
from typing import Any, Callable, Mapping, Sequence

import msgpack

from . import config as cfg
from .errors import ConfigError, SerializationError

EXT_PICKLE = 1
#: Ext code of the first registered type (0-15 stay Squall's own).
FIRST_REGISTERED = 16


class BadValue(ValueError):
    """An ext value this worker will not decode; the frame carrying it is dropped."""


Entry = tuple[type, Callable[[Any], Any], Callable[[Any], Any]]


def resolve(name: str, key: str = cfg.TOPOLOGY_SERIALIZERS) -> Any:
    """The object a dotted name points at: the longest importable module, then attributes
    (so ``pkg.mod.Outer.Inner`` works)."""
    parts = name.split(".")
    for i in range(len(parts) - 1, 0, -1):
        module = ".".join(parts[:i])
        try:
            obj: Any = importlib.import_module(module)
        except ModuleNotFoundError as e:
            if e.name is not None and module.startswith(e.name):
                continue  # not a module: try a shorter prefix
            raise ConfigError(key, f"importing {module!r} for {name!r} failed: {e}") from None
        except Exception as e:  # noqa: BLE001 - the user's module failed to import
            raise ConfigError(key, f"importing {module!r} for {name!r} failed: "
                                   f"{type(e).__name__}: {e}") from None
        for attr in parts[i:]:
            try:
                obj = getattr(obj, attr)
            except AttributeError:
                raise ConfigError(key, f"{module!r} has no {attr!r} (from {name!r})") from None
        return obj
    raise ConfigError(key, f"{name!r} names no importable module.attribute")


def entries_from_conf(conf: Mapping[str, Any]) -> list[Entry]:
    """``topology.serializers`` resolved to (type, pack, unpack), sorted by class name."""
    spec = conf.get(cfg.TOPOLOGY_SERIALIZERS) or {}
    out: list[Entry] = []
    for cls_name in sorted(spec):
        cls = resolve(cls_name)
        if not isinstance(cls, type):
            raise ConfigError(cfg.TOPOLOGY_SERIALIZERS, f"{cls_name!r} is not a class")
        ser = spec[cls_name]
        if isinstance(ser, str):
            obj = resolve(ser)
            pack, unpack = getattr(obj, "pack", None), getattr(obj, "unpack", None)
        else:
            pack, unpack = resolve(ser[0]), resolve(ser[1])
        if not callable(pack) or not callable(unpack):
            raise ConfigError(cfg.TOPOLOGY_SERIALIZERS,
                              f"serializer of {cls_name!r} needs callable pack and unpack")
        out.append((cls, pack, unpack))
    return out


#: Types msgpack carries as they are (int is checked for its 64 bits).
_PLAIN = frozenset({type(None), bool, float, str, bytes, bytearray, memoryview})
#: Nesting a value check walks (msgpack's own limit is far deeper; deeper values are rare).
_MAX_DEPTH = 32


class ValueTypes:
    """The encode (``default``) and decode (``ext_hook``) hooks of one topology's values."""

    def __init__(self, entries: Sequence[Entry] = (), *, pickle_out: bool = False,
                 pickle_in: bool = False):
        self._pack: dict[type, tuple[int, Callable[[Any], Any]]] = {}
        self._unpack: dict[int, Callable[[Any], Any]] = {}
        for i, (cls, pack, unpack) in enumerate(entries):
            self._pack[cls] = (FIRST_REGISTERED + i, pack)
            self._unpack[FIRST_REGISTERED + i] = unpack
        self.pickle_out = pickle_out
        self.pickle_in = pickle_in

    @classmethod
    def from_conf(cls, conf: Mapping[str, Any], channel_authenticated: bool) -> "ValueTypes":
        fallback = bool(conf.get(cfg.TOPOLOGY_FALL_BACK_ON_PICKLE, False))
        return cls(entries_from_conf(conf), pickle_out=fallback,
                   pickle_in=fallback and channel_authenticated)

    def problem(self, value: Any, depth: int = 0) -> str | None:
        """What in ``value`` another worker could not receive (``"a builtins.set"``,
        ``"an int beyond 64 bits"``), or None when it travels: what msgpack carries, nested
        lists and dicts of it, the registered types, anything with the pickle fallback on."""
        t = type(value)
        if t in _PLAIN or depth > _MAX_DEPTH:
            return None
        if t is int:
            return None if -(1 << 63) <= value < (1 << 64) else "an int beyond 64 bits"
        if t is list or t is tuple:
            for x in value:
                p = self.problem(x, depth + 1)
                if p is not None:
                    return p
            return None
        if t is dict:
            for k, v in value.items():
                p = self.problem(k, depth + 1) or self.problem(v, depth + 1)
                if p is not None:
                    return p
            return None
        if self.pickle_out or t in self._pack or any(isinstance(value, c) for c in self._pack):
            return None
        if isinstance(value, (int, float, str, bytes, list, tuple, dict)):
            return None  # a subclass (an IntEnum, a namedtuple): msgpack takes it as its base
        return f"a {t.__module__}.{t.__qualname__}"

    def _inner(self, value: Any) -> bytes:
        return msgpack.packb(value, default=self.default, use_bin_type=True)

    def default(self, obj: Any) -> msgpack.ExtType:
        """msgpack's hook for a value it cannot encode itself."""
        found = self._pack.get(type(obj))
        if found is None:
            for t, f in self._pack.items():  # a subclass of a registered type
                if isinstance(obj, t):
                    found = f
                    break
        if found is not None:
            code, pack = found
            try:
                return msgpack.ExtType(code, self._inner(pack(obj)))
            except SerializationError:
                raise
            except Exception as exc:
                raise SerializationError(f"the registered serializer of {type(obj).__name__} "
                                         f"failed: {type(exc).__name__}: {exc}") from None
        if self.pickle_out:
            try:
                return msgpack.ExtType(EXT_PICKLE,
                                       pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))
            except Exception as exc:
                raise SerializationError(f"tuple value of type {type(obj).__name__} cannot be "
                                         f"serialized: {exc}") from None
        raise SerializationError(
            f"tuple value of type {type(obj).__module__}.{type(obj).__qualname__} cannot be "
            "sent to another worker: msgpack carries None, bool, int, float, str, bytes, list "
            "and dict; register a serializer for it in topology.serializers")

    def ext_hook(self, code: int, data: bytes) -> Any:
        """msgpack's hook for an ext value: a registered type, or pickle where allowed."""
        unpack = self._unpack.get(code)
        if unpack is not None:
            value = msgpack.unpackb(data, ext_hook=self.ext_hook, raw=False,
                                    strict_map_key=False)
            try:
                return unpack(value)
            except Exception as exc:
                raise BadValue(f"registered type (ext {code}) failed to unpack: "
                               f"{type(exc).__name__}: {exc}") from None
        if code == EXT_PICKLE:
            if self.pickle_in:
                return pickle.loads(data)
            raise BadValue("pickled value refused: this worker unpickles only with "
                           "topology.fall.back.on.java.serialization on and encrypted worker "
                           "traffic")
        raise BadValue(f"unknown ext type {code}")


#: No registered types, no pickle: what a frame from outside the topology gets.
PLAIN = ValueTypes()
