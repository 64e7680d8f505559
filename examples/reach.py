"""Reach: Storm's ReachTopology (storm-starter), a DRPC function computed in parallel.

The reach of a URL is the number of distinct people exposed to it: everyone who follows
someone who tweeted it. For each request::

    spout (DRPCSpout "reach") -> prepare-request -> GetTweeters -> GetFollowers
        -> PartialUniquer (batch: distinct followers of its share) -> CountAggregator
        (batch: sums the partial counts) -> JoinResult -> ReturnResults

PartialUniquer and CountAggregator are batch bolts: the coordination of
LinearDRPCTopologyBuilder tells them when all of one request's tuples have arrived. The
"databases" are the dicts below, as in Storm.

Run it all on this machine (a DRPC server, ZooKeeper, Nimbus and a supervisor; prints
the reach of three URLs, then stops everything)::

    python -m squall.examples.reach

Or with the daemons apart (the DRPC server on its default loopback ports)::

    squall drpc -c drpc.bind.host=127.0.0.1 &
    squall local examples/reach.py &            # CONF below names the DRPC server
    squall drpc-client reach foo.com/blog/1 --host 127.0.0.1
"""

from __future__ import annotations

import sys

from squall.client import BasicBolt
from squall.client.drpc import BatchBolt, LinearDRPCTopologyBuilder

TWEETERS_DB: dict[str, list[str]] = {
    "foo.com/blog/1": ["sally", "bob", "tim", "george", "nathan"],
    "engineering.twitter.com/blog/5": ["adam", "david", "sally", "nathan"],
    "tech.backtype.com/blog/123": ["tim", "mike", "john"],
}

FOLLOWERS_DB: dict[str, list[str]] = {
    "sally": ["bob", "tim", "alice", "adam", "jim", "chris", "jai"],
    "bob": ["sally", "nathan", "jim", "mary", "david", "vivian"],
    "tim": ["alex"],
    "nathan": ["sally", "bob", "adam", "harry", "chris", "vivian", "emily", "jordan"],
    "adam": ["david", "carissa"],
    "mike": ["john", "bob"],
    "john": ["alice", "nathan", "jim", "mike", "bob"],
}


def reach_of(url: str) -> int:
    """The answer, computed in one process (what the topology must return)."""
    return len({f for t in TWEETERS_DB.get(url, ()) for f in FOLLOWERS_DB.get(t, ())})


class GetTweeters(BasicBolt):
    """[id, url] -> [id, tweeter] for everyone who tweeted the url."""

    def execute(self, tup, collector):
        id, url = tup.values[0], tup.values[1]
        for tweeter in TWEETERS_DB.get(url, ()):
            collector.emit([id, tweeter])

    def declare_output_fields(self, declarer):
        declarer.declare(["id", "tweeter"])


class GetFollowers(BasicBolt):
    """[id, tweeter] -> [id, follower] for each of the tweeter's followers."""

    def execute(self, tup, collector):
        id, tweeter = tup.values[0], tup.values[1]
        for follower in FOLLOWERS_DB.get(tweeter, ()):
            collector.emit([id, follower])

    def declare_output_fields(self, declarer):
        declarer.declare(["id", "follower"])


class PartialUniquer(BatchBolt):
    """The distinct followers this task saw for one request, counted at the batch's end."""

    def prepare(self, conf, context, collector, id):
        self.collector, self.id = collector, id
        self.followers: set[str] = set()

    def execute(self, tup):
        self.followers.add(tup.values[1])

    def finish_batch(self):
        self.collector.emit([self.id, len(self.followers)])

    def declare_output_fields(self, declarer):
        declarer.declare(["id", "partial-count"])


class CountAggregator(BatchBolt):
    """Sums the partial counts of one request: its reach."""

    def prepare(self, conf, context, collector, id):
        self.collector, self.id = collector, id
        self.count = 0

    def execute(self, tup):
        self.count += tup.values[1]

    def finish_batch(self):
        self.collector.emit([self.id, self.count])

    def declare_output_fields(self, declarer):
        declarer.declare(["id", "reach"])


def construct() -> LinearDRPCTopologyBuilder:
    """Storm's ``ReachTopology.construct``, with its parallelism."""
    builder = LinearDRPCTopologyBuilder("reach")
    builder.add_bolt(GetTweeters(), 4)
    builder.add_bolt(GetFollowers(), 12).shuffle_grouping()
    # Same follower of one request -> same task, so each task's distinct set is disjoint.
    builder.add_bolt(PartialUniquer(), 6).fields_grouping(["id", "follower"])
    builder.add_bolt(CountAggregator(), 3).fields_grouping(["id"])
    return builder


#: For ``squall local``/``squall jar``: the DRPC server the spout reads (``squall drpc``
#: with drpc.bind.host 127.0.0.1 and its default ports).
CONF = {"topology.workers": 2, "drpc.servers": ["127.0.0.1"]}
NAME = "reach-drpc"
URLS = ["foo.com/blog/1", "engineering.twitter.com/blog/5", "notaurl.com"]


def topology():
    return construct().create_topology()


def main(argv: list[str] | None = None) -> int:
    """Storm's local mode: a DRPC server and a local cluster in this process."""
    import os

    from squall.client.drpc import DRPCClient
    from squall.deploy.local import LocalCluster
    from squall.drpc import DRPCServer

    urls = (argv if argv is not None else sys.argv[1:]) or URLS
    with DRPCServer({"drpc.request.timeout.secs": 60}, host="127.0.0.1", port=0,
                    invocations_port=0) as drpc, LocalCluster() as cluster:
        conf = {"topology.workers": 2, "drpc.servers": ["127.0.0.1"],
                "drpc.invocations.port": drpc.invocations_port}
        cluster.submit(NAME, topology(), conf, os.path.dirname(os.path.abspath(__file__)))
        with DRPCClient("127.0.0.1", drpc.port, timeout=120) as client:
            for url in urls:
                print(f"Reach of {url}: {client.execute('reach', url)} "
                      f"(expected {reach_of(url)})", flush=True)
        cluster.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
