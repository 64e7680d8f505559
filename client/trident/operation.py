"""What Trident users write: functions, filters and aggregators over TridentTuples.

Storm's ``org.apache.storm.trident.operation``: :class:`Function` (``execute(tuple,
collector)`` emits zero or more value lists, appended to the input's fields),
:class:`Filter` (``is_keep``), :class:`MapFunction` / :class:`FlatMapFunction`
(replace the tuple), and three aggregator shapes: :class:`CombinerAggregator`
(``init(tuple)``, ``combine(a, b)``, ``zero()``; combinable, so partial
aggregates travel instead of tuples), :class:`ReducerAggregator` (``init()``,
``reduce(curr, tuple)``) and the general :class:`Aggregator` (``init(batch_id,
collector)``, ``aggregate(state, tuple, collector)``, ``complete(state,
collector)``). :class:`Count` and :class:`Sum` are the built-ins. Operations are
pickled with the topology; ``prepare(conf, context)`` runs once per task in the
worker. A :class:`~squall.client.errors.FailedException` raised by an operation
fails the batch, which the master coordinator then replays. The collector given
to functions, aggregators and state updaters has ``emit(values)``,
``report_error(error)`` and ``batch``, the batch's
:class:`~squall.client.trident.attempt.TransactionAttempt` (txid, attempt id).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence


class TridentTuple:
    """Values with field names: ``t[0]``, ``t["word"]``, ``t.values``, ``t.fields``."""

    __slots__ = ("values", "fields", "_index")

    def __init__(self, values: Sequence[Any], fields: Sequence[str],
                 index: Mapping[str, int] | None = None):
        self.values = list(values)
        self.fields = list(fields)
        self._index = index if index is not None else {f: i for i, f in enumerate(fields)}

    @classmethod
    def _of(cls, values: list[Any], fields: list[str], index: Mapping[str, int]
            ) -> "TridentTuple":
        """The runtime's constructor: ``values`` is a fresh list and ``fields``/``index`` the
        node's own (never mutated), so nothing is copied; one per tuple and node."""
        t = cls.__new__(cls)
        t.values, t.fields, t._index = values, fields, index
        return t

    def __getitem__(self, key: int | str) -> Any:
        return self.values[self._index[key] if isinstance(key, str) else key]

    def __len__(self) -> int:
        return len(self.values)

    def select(self, fields: Iterable[str]) -> list[Any]:
        return [self.values[self._index[f]] for f in fields]

    def __repr__(self) -> str:
        return f"TridentTuple({dict(zip(self.fields, self.values))})"


class Operation:
    def prepare(self, conf: Mapping[str, Any], context: Any) -> None:
        """Once per task in the worker, before the first batch."""

    def cleanup(self) -> None:
        pass


class Function(Operation):
    """Emits zero or more value lists per input; they are appended to the input's values."""

    def execute(self, tup: TridentTuple, collector: Any) -> None:
        raise NotImplementedError


class Filter(Operation):
    def is_keep(self, tup: TridentTuple) -> bool:
        raise NotImplementedError


class FilterNull(Filter):
    """Storm's builtin: drops tuples with a None among the fields it reads."""

    def is_keep(self, tup: TridentTuple) -> bool:
        return all(v is not None for v in tup.values)


class MapFunction(Operation):
    """Replaces the tuple's values with ``execute(tuple)`` (a list of values)."""

    def execute(self, tup: TridentTuple) -> Sequence[Any]:
        raise NotImplementedError


class FlatMapFunction(Operation):
    """Replaces the tuple with each value list of ``execute(tuple)``."""

    def execute(self, tup: TridentTuple) -> Iterable[Sequence[Any]]:
        raise NotImplementedError


class CombinerAggregator(Operation):
    def init(self, tup: TridentTuple) -> Any:
        raise NotImplementedError

    def combine(self, a: Any, b: Any) -> Any:
        raise NotImplementedError

    def zero(self) -> Any:
        raise NotImplementedError


class ReducerAggregator(Operation):
    def init(self) -> Any:
        raise NotImplementedError

    def reduce(self, curr: Any, tup: TridentTuple) -> Any:
        raise NotImplementedError


class Aggregator(Operation):
    """The general shape: per batch (and per group) a state, fed every tuple, completed once."""

    def init(self, batch_id: Any, collector: Any) -> Any:
        raise NotImplementedError

    def aggregate(self, state: Any, tup: TridentTuple, collector: Any) -> Any:
        """Fold ``tup`` into ``state``; returns the new state (states may be immutable)."""
        raise NotImplementedError

    def complete(self, state: Any, collector: Any) -> None:
        raise NotImplementedError


class Count(CombinerAggregator):
    """How many tuples."""

    def init(self, tup: TridentTuple) -> int:
        return 1

    def combine(self, a: int, b: int) -> int:
        return a + b

    def zero(self) -> int:
        return 0


class Sum(CombinerAggregator):
    """The sum of the first input field."""

    def init(self, tup: TridentTuple) -> Any:
        return tup[0]

    def combine(self, a: Any, b: Any) -> Any:
        return a + b

    def zero(self) -> Any:
        return 0


class CombinedPartials(CombinerAggregator):
    """``agg`` over partial aggregates of itself: what a state updater combines after
    Storm's partial aggregation (each partition folds its batch per group before the
    repartition, so one tuple per group and partition crosses, not every tuple)."""

    def __init__(self, agg: CombinerAggregator):
        self.agg = agg

    def prepare(self, conf: Mapping[str, Any], context: Any) -> None:
        self.agg.prepare(conf, context)

    def init(self, tup: TridentTuple) -> Any:
        return tup.values[0]

    def combine(self, a: Any, b: Any) -> Any:
        return self.agg.combine(a, b)

    def zero(self) -> Any:
        return self.agg.zero()


def as_aggregator(agg: Operation) -> Aggregator:
    """Any of the three aggregator shapes as the general :class:`Aggregator`."""
    if isinstance(agg, Aggregator):
        return agg
    if isinstance(agg, CombinerAggregator):
        return _CombinerAsAggregator(agg)
    if isinstance(agg, ReducerAggregator):
        return _ReducerAsAggregator(agg)
    raise TypeError(f"{type(agg).__name__} is not a CombinerAggregator, ReducerAggregator or "
                    "Aggregator")


class _CombinerAsAggregator(Aggregator):
    def __init__(self, agg: CombinerAggregator):
        self.agg = agg

    def prepare(self, conf: Mapping[str, Any], context: Any) -> None:
        self.agg.prepare(conf, context)

    def init(self, batch_id: Any, collector: Any) -> Any:
        return self.agg.zero()

    def aggregate(self, state: Any, tup: TridentTuple, collector: Any) -> Any:
        return self.agg.combine(state, self.agg.init(tup))

    def complete(self, state: Any, collector: Any) -> None:
        collector.emit([state])


class _ReducerAsAggregator(Aggregator):
    def __init__(self, agg: ReducerAggregator):
        self.agg = agg

    def prepare(self, conf: Mapping[str, Any], context: Any) -> None:
        self.agg.prepare(conf, context)

    def init(self, batch_id: Any, collector: Any) -> Any:
        return self.agg.init()

    def aggregate(self, state: Any, tup: TridentTuple, collector: Any) -> Any:
        return self.agg.reduce(state, tup)

    def complete(self, state: Any, collector: Any) -> None:
        collector.emit([state])
