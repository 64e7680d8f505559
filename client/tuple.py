# cython: annotation_typing=False
"""The tuple a bolt receives, and Storm's system component and stream names.

A :class:`Tuple` is deliberately light (``__slots__``, no per-tuple dicts
beyond its anchor ids): inside a worker it is handed from executor to executor
without serialization, so its cost is paid once per delivery.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

try:
    import cython
    _COMPILED = cython.compiled
except ImportError:  # pragma: no cover (Cython is a build dependency)
    _COMPILED = False

DEFAULT_STREAM = "default"

# Storm's system names, kept so Storm users recognise them (storm Constants / Acker).
ACKER_COMPONENT_ID = "__acker"
ACKER_INIT_STREAM_ID = "__ack_init"
ACKER_ACK_STREAM_ID = "__ack_ack"
ACKER_FAIL_STREAM_ID = "__ack_fail"
ACKER_RESET_TIMEOUT_STREAM_ID = "__ack_reset_timeout"
SYSTEM_COMPONENT_ID = "__system"
SYSTEM_TASK_ID = -1
SYSTEM_TICK_STREAM_ID = "__tick"
#: The Topology Master (JStorm's): one system task per topology in barrier checkpointing
#: (worker/topology_master.py). Tasks report to it on ``__tm``; it commands on ``__ctl``.
TOPOLOGY_MASTER_ID = "__topology_master"
TM_REPORT_STREAM_ID = "__tm"
TM_CONTROL_STREAM_ID = "__ctl"
#: Every component's system stream (Storm's SYSTEM_STREAM_ID, fields ["event"]): bolts may
#: subscribe to it; nothing is emitted on it.
SYSTEM_STREAM_ID = "__system"
SYSTEM_STREAM_FIELDS = ("event",)


class Fields:
    """An ordered list of field names with O(1) name -> index lookup."""

    __slots__ = ("names", "index")

    def __init__(self, names: Sequence[str]):
        self.names = list(names)
        self.index = {n: i for i, n in enumerate(self.names)}

    def __len__(self) -> int:
        return len(self.names)

    def __iter__(self):
        return iter(self.names)

    def __contains__(self, name: object) -> bool:
        return name in self.index

    def __repr__(self) -> str:
        return f"Fields({self.names!r})"

    def select(self, selected: Sequence[str], values: Sequence[Any]) -> list[Any]:
        idx = self.index
        return [values[idx[f]] for f in selected]

    def __reduce__(self) -> tuple:
        # Spelt out so the compiled class (tuple.pxd) and the source pickle alike.
        return Fields, (self.names,)


_NO_FIELDS = Fields([])
_U64 = 1 << 64


def one_tree(ids: Any) -> tuple[int, int] | None:
    """``(root, edge)`` when ``ids`` is the map of a tuple in exactly one tree with 64-bit
    ids (root 0 is not one), else None: what a Tuple and a worker's outbound batch keep as
    two integers instead of a map."""
    if type(ids) is dict and len(ids) == 1:
        for r, e in ids.items():
            if type(r) is int and type(e) is int and 0 < r < _U64 and 0 <= e < _U64:
                return r, e
    return None


class Tuple:
    """A tuple received by a bolt.

    ``values`` is the list of values (read-only, as Storm's tuple is immutable: emit a new
    list rather than rebind it); access by position (``t[0]``), by field
    name (``t["word"]``, ``t.get("word")``) or as a dict (``t.as_dict()``).
    ``source_component``, ``source_stream`` and ``source_task`` say where it
    came from. ``ids`` maps each root (spout tuple tree) id to this tuple's
    edge id; it is ``None`` for an untracked tuple.

    A tuple of one tree, nearly every tracked tuple, holds its root and edge ids as two
    64-bit integers (``root``, ``edge``; ``root`` 0: not so) and builds the ``ids`` map only
    when asked for it: the collectors, the transfer and the receiver read the pair, so a
    tracked tuple costs no dict on its way.
    """

    __slots__ = ("values", "source_component", "source_stream", "source_task", "_ids",
                 "root", "edge", "ack_val", "fields", "acked")

    def __init__(self, values: list, source_component: str, source_stream: str,
                 source_task: int, ids: dict | None, fields: Fields = _NO_FIELDS):
        if _COMPILED:
            self.values = values
        else:
            _VALUES_SLOT.__set__(self, values)  # noqa: F821  (read-only outside: below)
        self.source_component = source_component
        self.source_stream = source_stream
        self.source_task = source_task
        #: The one tree's root and edge ids (root 0: untracked, or several trees in _ids).
        self.root = 0
        self.edge = 0
        #: root id -> edge id when the tuple is in several trees (else None).
        self._ids = None
        if ids:
            self.ids = ids
        else:
            self._ids = ids
        #: XOR of the edge ids of tuples anchored to this one (Storm's outAckVal).
        self.ack_val = 0
        self.fields = fields
        #: Acked already (a second ack is refused: its XOR would undo the first).
        self.acked = False

    @property
    def ids(self) -> dict | None:
        """Root id -> edge id for every tuple tree this tuple belongs to (None: untracked)."""
        if self.root:
            return {self.root: self.edge}
        return self._ids

    @ids.setter
    def ids(self, ids: dict | None) -> None:
        pair = one_tree(ids)
        if pair is not None:
            self.root, self.edge = pair
            self._ids = None
        else:
            self.root = 0
            self.edge = 0
            self._ids = ids

    # Storm-style accessors -------------------------------------------------
    @property
    def id(self) -> tuple:
        """A stable identifier of this tuple: its (root, edge) id pairs."""
        return tuple(sorted(self.ids.items())) if self.ids else ()

    @property
    def stream(self) -> str:
        return self.source_stream

    @property
    def component(self) -> str:
        return self.source_component

    @property
    def task(self) -> int:
        return self.source_task

    @property
    def is_tick(self) -> bool:
        return self.source_stream == SYSTEM_TICK_STREAM_ID and \
            self.source_component == SYSTEM_COMPONENT_ID

    def __getitem__(self, key: int | str) -> Any:
        if type(key) is str:
            try:
                return self.values[self.fields.index[key]]
            except KeyError:
                raise KeyError(f"stream {self.source_component}:{self.source_stream} has no "
                               f"field {key!r}; it declares {self.fields.names}") from None
        return self.values[key]

    def get(self, name: str, default: Any = None) -> Any:
        i = self.fields.index.get(name)
        return default if i is None else self.values[i]

    def value_by_field(self, name: str) -> Any:
        return self[name]

    def select(self, names: Sequence[str]) -> list[Any]:
        return self.fields.select(names, self.values)

    def contains(self, name: str) -> bool:
        return name in self.fields.index

    def as_dict(self) -> Mapping[str, Any]:
        return dict(zip(self.fields.names, self.values))

    def __len__(self) -> int:
        return len(self.values)

    def __iter__(self):
        return iter(self.values)

    def __repr__(self) -> str:
        return (f"Tuple(source={self.source_component}:{self.source_task}, "
                f"stream={self.source_stream}, values={self.values!r})")

    def __reduce__(self) -> tuple:
        # Spelt out so the compiled class (tuple.pxd) and the source pickle alike.
        return _restore, (self.values, self.source_component, self.source_stream,
                          self.source_task, self.ids, self.fields, self.ack_val)


# ``values`` read-only, and read as cheaply as the language allows: compiled, a member
# descriptor over the struct's field (Python's attribute cache specialises a member
# descriptor, not the property Cython makes of a public attribute: 48 -> 23 ns a read, and
# every bolt reads it per tuple); from source, the slot behind a getter-only property.
if _COMPILED:
    _install_values(Tuple, _VALUES_OFFSET)  # noqa: F821  (tuple.pxd)
else:
    _VALUES_SLOT = Tuple.values
    Tuple.values = property(_VALUES_SLOT.__get__, None, None,
                            "The tuple's values, a list (read-only).")


def new_tuple(values: list, source_component: str, source_stream: str, source_task: int,
              fields: Fields) -> Tuple:
    """A Tuple of no tree (set ``root``/``edge`` after for one): the runtime's own way to
    make the tuples it delivers. Compiled, it calls the type's allocator and fills the
    fields in C, without ``__init__``'s argument parsing; a tuple a worker delivers is
    always made here or by ``Tuple(...)``, alike."""
    t = Tuple.__new__(Tuple)
    if _COMPILED:
        t.values = values
    else:
        _VALUES_SLOT.__set__(t, values)  # noqa: F821
    t.source_component = source_component
    t.source_stream = source_stream
    t.source_task = source_task
    t._ids = None
    t.root = 0
    t.edge = 0
    t.ack_val = 0
    t.fields = fields
    t.acked = False
    return t


def _restore(values: list, source_component: str, source_stream: str, source_task: int,
             ids: dict | None, fields: Fields, ack_val: int) -> Tuple:
    t = Tuple(values, source_component, source_stream, source_task, ids, fields)
    t.ack_val = ack_val
    return t
