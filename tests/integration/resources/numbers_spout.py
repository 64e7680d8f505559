"""A reliable spout on Storm's storm.py: emits "i even" or "i odd" for i in 0..N-1
(numbers.total) with i as the message id, one every numbers.sleep seconds, re-emits what
fails, and appends every acked id to $ACKED_FILE (one per line) if set."""
import os
import time

import storm


class NumbersSpout(storm.Spout):
    def initialize(self, conf, context):
        self.total = int(conf.get("numbers.total", 100))
        self.sleep = float(conf.get("numbers.sleep", 0))
        tasks = sorted(int(t) for t, c in context["task->component"].items()
                       if c == context["componentid"])
        self.step = len(tasks)
        self.next = tasks.index(context["taskid"])
        self.replay = []
        self.acked = open(os.environ["ACKED_FILE"], "a") if os.environ.get("ACKED_FILE") else None

    def nextTuple(self):
        if self.replay:
            i = self.replay.pop()
        elif self.next < self.total:
            i = self.next
            self.next += self.step
        else:
            time.sleep(0.001)  # nothing to emit: the protocol leaves the pause to us
            return
        if self.sleep:
            time.sleep(self.sleep)
        storm.emit([f"{i} {'odd' if i % 2 else 'even'}"], id=i)

    def ack(self, id):
        if self.acked:
            self.acked.write(f"{id}\n")
            self.acked.flush()

    def fail(self, id):
        self.replay.append(id)


NumbersSpout().run()
