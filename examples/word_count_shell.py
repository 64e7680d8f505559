"""Word count with its split bolt in another process: Storm's multi-lang protocol.

    sentences (reliable spout) --shuffle--> split (ShellBolt) --fields(word)--> count --> report

The same topology as word_count.py, except that ``split`` is
``resources/splitsentence.py`` (standard library only) run as a child process of
each split task, the way Storm's storm-starter runs its Python split bolt. With
``WORDCOUNT_SPLIT=node`` in the environment it is ``resources/splitsentence.js`` under
Node.js.
Every sentence is still tracked by the acker and the totals checked at the end.

Run it:  squall local examples/word_count_shell.py --duration 20
On a cluster:  squall jar examples word_count_shell
"""

from __future__ import annotations

import os

from squall.client import ShellBolt, TopologyBuilder
from word_count import SENTENCES_KEY, Report, SentenceSpout, WordCount

SPLIT_ENV = "WORDCOUNT_SPLIT"
COMMANDS = {"python": ["python3", "splitsentence.py"], "node": ["node", "splitsentence.js"]}

NAME = "word-count-shell"
CONF = {"topology.workers": 2, "topology.max.spout.pending": 2000, SENTENCES_KEY: 20_000}


def topology() -> TopologyBuilder:
    lang = os.environ.get(SPLIT_ENV, "python")
    if lang not in COMMANDS:
        raise ValueError(f"{SPLIT_ENV} must be one of {sorted(COMMANDS)}, got {lang!r}")
    b = TopologyBuilder()
    b.set_spout("sentences", SentenceSpout(), 2)
    b.set_bolt("split", ShellBolt(COMMANDS[lang], ["word"]), 2).shuffle_grouping("sentences")
    b.set_bolt("count", WordCount(), 2).fields_grouping("split", ["word"])
    b.set_bolt("report", Report(), 1).global_grouping("count", "increments")
    return b


def main(args: list[str]) -> None:
    """``squall jar examples word_count_shell [NAME]``: submit to the cluster in squall.yaml."""
    from squall.client.submitter import submit_topology
    submit_topology(args[0] if args else NAME, CONF, topology())
