"""A pystorm Bolt subclass, unchanged from how streamparse users write one: splits a
sentence into words (auto-anchored, auto-acked). $PYSTORM_SERIALIZER picks json or msgpack."""
import os

from pystorm import Bolt


class SplitBolt(Bolt):
    outputs = ["word"]

    def process(self, tup):
        for word in tup.values[0].split(" "):
            self.emit([word])


if __name__ == "__main__":
    SplitBolt(serializer=os.environ.get("PYSTORM_SERIALIZER", "json")).run()
