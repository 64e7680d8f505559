"""Writing batches into state and reading it back: state updaters and query functions.

Storm's ``StateUpdater`` (``update_state(state, tuples, collector)``, called once per
batch and partition inside ``begin_commit``/``commit``, in txid order),
``MapCombinerAggStateUpdater`` / ``MapReducerAggStateUpdater`` (what
``persistent_aggregate`` uses: the batch's tuples folded per group, then one
``multi_update`` of the map state) and ``QueryFunction`` with the built-in
:class:`MapGet`.
"""

from __future__ import annotations

from typing import Any, Sequence

from .operation import CombinerAggregator, Operation, ReducerAggregator, TridentTuple


class StateUpdater(Operation):
    def update_state(self, state: Any, tuples: list[TridentTuple], collector: Any) -> None:
        raise NotImplementedError


class MapStateUpdater(StateUpdater):
    """Per group of the batch: combine (or reduce) into the stored value; emits
    ``group values + [new value]`` for each group (the state's new-values stream)."""

    def __init__(self, agg: CombinerAggregator | ReducerAggregator, group_fields: Sequence[str],
                 input_fields: Sequence[str]):
        self.agg = agg
        self.group_fields = list(group_fields)
        self.input_fields = list(input_fields)

    def prepare(self, conf: Any, context: Any) -> None:
        self.agg.prepare(conf, context)

    def update_state(self, state: Any, tuples: list[TridentTuple], collector: Any) -> None:
        groups: dict[tuple, list[TridentTuple]] = {}
        if not tuples:
            return
        fields = self.input_fields
        index = {f: i for i, f in enumerate(fields)}
        # Positions looked up once a batch; the runtime gives every tuple of a batch the
        # same fields (the persist node's input).
        first = tuples[0]
        same = list(first.fields) == fields
        gpos = [first._index[f] for f in self.group_fields]
        ipos = [first._index[f] for f in fields]
        for t in tuples:
            if t.fields is not first.fields and t.fields != first.fields:
                gpos = [t._index[f] for f in self.group_fields]
                ipos = [t._index[f] for f in fields]
                same = list(t.fields) == fields
            vals = t.values
            key = tuple([vals[i] for i in gpos])
            groups.setdefault(key, []).append(
                t if same else TridentTuple._of([vals[i] for i in ipos], fields, index))
        keys = list(groups)
        stored = [state_key(state, k) for k in keys]
        values = state.multi_update(stored, [self._updater(groups[k]) for k in keys])
        for key, value in zip(keys, values):
            collector.emit([*key, value])

    def _updater(self, group: list[TridentTuple]):
        agg = self.agg
        if isinstance(agg, CombinerAggregator):
            batch_value = agg.zero()
            for t in group:
                batch_value = agg.combine(batch_value, agg.init(t))
            return lambda old: batch_value if old is None else agg.combine(old, batch_value)

        def reduce(old: Any) -> Any:
            curr = agg.init() if old is None else old
            for t in group:
                curr = agg.reduce(curr, t)
            return curr
        return reduce


def state_key(state: Any, key: tuple) -> tuple:
    """A global aggregate (no group fields) lives under the state's global key, where
    ``SnapshottableMap.get()`` reads it."""
    return key if key else tuple(getattr(state, "global_key", ()))


class QueryFunction(Operation):
    """``batch_retrieve(state, tuples)`` -> one result per tuple; ``execute(tuple, result,
    collector)`` emits the values appended to the tuple (default: ``[result]``)."""

    def batch_retrieve(self, state: Any, tuples: list[TridentTuple]) -> list[Any]:
        raise NotImplementedError

    def execute(self, tup: TridentTuple, result: Any, collector: Any) -> None:
        collector.emit([result])


class MapGet(QueryFunction):
    """The map state's value for each tuple's input fields as the key."""

    def batch_retrieve(self, state: Any, tuples: list[TridentTuple]) -> list[Any]:
        return state.multi_get([state_key(state, tuple(t.values)) for t in tuples])
