"""Storm's small ready-made components, under the class names Flux files use.

Storm's Flux examples wire ``org.apache.storm.testing.TestWordSpout``,
``org.apache.storm.testing.TestWordCounter`` and
``org.apache.storm.flux.wrappers.bolts.LogInfoBolt`` between their shell
components; these are their Python counterparts, so such files run unchanged
(squall.deploy.flux maps the names).
"""

from __future__ import annotations

import logging
import random
import time
from collections import Counter
from typing import Any

from .components import BasicBolt, Spout

log = logging.getLogger("squall.testing")


class TestWordSpout(Spout):
    """Emits a random word of five every 100 ms, unanchored (Storm's TestWordSpout)."""

    __test__ = False  # not a pytest class, whatever its name

    WORDS = ("nathan", "mike", "jackson", "golda", "bertels")

    def __init__(self, is_distributed: bool = True):
        self.is_distributed = is_distributed

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.rng = random.Random()

    def next_tuple(self) -> None:
        time.sleep(0.1)
        self.collector.emit([self.rng.choice(self.WORDS)])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["word"])


class TestWordCounter(BasicBolt):
    """Counts the first field's values and emits ``[word, count]`` (Storm's TestWordCounter)."""

    __test__ = False

    def prepare(self, conf: Any, context: Any) -> None:
        self.counts: Counter = Counter()

    def execute(self, tup: Any, collector: Any) -> None:
        word = tup.values[0]
        self.counts[word] += 1
        collector.emit([word, self.counts[word]])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["word", "count"])


class LogInfoBolt(BasicBolt):
    """Logs every tuple at INFO to the worker log (Flux's LogInfoBolt)."""

    def execute(self, tup: Any, collector: Any) -> None:
        log.info("%s", tup)
