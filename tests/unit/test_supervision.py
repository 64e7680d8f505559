"""A worker's watch on its supervisor (worker/supervision.py), as an event table: time passes,
the supervisor named in supervisor.json dies or a restarted one writes its mark; the watch
answers None (run on) or why the worker must exit."""

from __future__ import annotations

from event_table import play

from squall.client.contract import SupervisorMark
from squall.worker.supervision import SupervisorWatch


class World:
    """The clock, the mark on disk and which pids are alive."""

    def __init__(self):
        self.now = 0.0
        self.mark: SupervisorMark | None = None
        self.alive: set[int] = set()
        self.ppid = 100


class Mark(SupervisorMark):
    world: World

    def alive(self) -> bool:  # the world says which processes run, not /proc
        return self.pid in self.world.alive


def watch_in(world: World, adopt_secs: float | None) -> SupervisorWatch:
    Mark.world = world
    return SupervisorWatch("/w", parent_pid=100, adopt_secs=adopt_secs, clock=lambda: world.now,
                           read_mark=lambda d: world.mark, getppid=lambda: world.ppid)


def feed_for(world: World, watch: SupervisorWatch):
    def feed(event):
        kind, arg = event
        if kind == "at":
            world.now = arg
        elif kind == "dies":
            world.alive.discard(arg)
        elif kind == "mark":  # a supervisor (pid arg) starts and writes its mark
            world.alive.add(arg)
            world.mark = Mark(arg, "1", f"sup-{arg}")
        elif kind == "parent":
            world.ppid = arg
        return watch.check()
    return feed


GONE = ("its supervisor has been gone for {:.1f} s and none took it back "
        "(supervisor.worker.adopt.secs 10)")


def test_a_worker_runs_on_while_its_supervisor_restarts_and_exits_when_none_returns():
    world = World()
    watch = watch_in(world, adopt_secs=10.0)
    play(feed_for(world, watch), [
        (("mark", 100), None),         # launched: follows supervisor 100
        (("at", 5.0), None),
        (("dies", 100), None),         # read at most once a second: not seen yet
        (("at", 6.0), None),           # seen gone at 6: runs on
        (("at", 15.5), None),
        (("mark", 200), None),         # a restarted supervisor took it back at 15.5
        (("at", 17.0), None),
        (("dies", 200), None),
        (("at", 18.0), None),          # gone again at 18: a new wait of 10 s
        (("at", 27.5), None),          # read: 9.5 s gone; the next read is due at 28.5
        (("at", 28.0), None),
        (("at", 28.5), GONE.format(10.5)),
    ])
    assert watch.mark.pid == 200


def test_no_mark_at_all_counts_as_no_supervisor():
    world = World()
    watch = watch_in(world, adopt_secs=10.0)
    play(feed_for(world, watch), [
        (("at", 0.0), None),
        (("at", 9.0), None),
        (("at", 10.0), GONE.format(10.0)),
    ])


def test_exit_with_parent_mode_follows_the_launching_process_only():
    world = World()
    watch = watch_in(world, adopt_secs=None)
    play(feed_for(world, watch), [
        (("at", 0.0), None),
        (("mark", 300), None),         # a mark is not looked at in this mode
        (("parent", 1), "the process that launched it (pid 100) is gone"),
    ])
