"""The records that cross a process boundary: each round-trips through JSON, a newer format
is refused with a clear error, and a malformed one is a ContractError, never a KeyError."""

from __future__ import annotations

import json
import os

import pytest

from squall.client.contract import (ASSIGNMENT_FILE, HEARTBEAT_FILE, STATUS_FILE, Assignment,
                                    ContractError, HeartbeatState, SupervisorInfo,
                                    WorkerAssignment, WorkerHeartbeat, WorkerStatus, read_status,
                                    write_status)

ASSIGNMENT = Assignment("wc-1-17", {"h1:6700": (1, 2, 5), "h2:6700": (3, 4)},
                        {"h1:6700": "sup-1", "h2:6700": "sup-2"},
                        (("count", (1, 2)), ("split", (3,)), ("split", (4,)), ("words", (5,))),
                        {"h1:6700": 100.0, "h2:6700": 101.0}, revision=3)
WORKER = WorkerAssignment("wc-1-17", "h1:6700", "h1", 6700, {"h1:6700": [1, 2, 5],
                                                             "h2:6700": [3, 4]},
                          {"topology.workers": 2}, code_paths=["/x/package.zip"],
                          executors=[[1, 2], [5]])
HEARTBEAT = WorkerHeartbeat(1700000000.5, 4242, HeartbeatState.RUNNING, "wc-1-17", "h1:6700",
                            uptime_secs=3.0, tasks={"1": {"component": "count", "acked": 3}},
                            errors=[{"time": 1.0, "component": "count", "task": 1,
                                     "error": "ValueError: x"}],
                            stalled=["spout s: next_tuple has not returned for 12 s"])
SUPERVISOR = SupervisorInfo("h1", (6700, 6701), (6700,), 12.5, 1700000000.0)


@pytest.mark.parametrize("record", [ASSIGNMENT, WORKER, HEARTBEAT, SUPERVISOR],
                         ids=lambda r: type(r).__name__)
def test_every_record_round_trips_through_json_with_its_version(record):
    data = json.loads(json.dumps(record.to_json()))
    assert data["version"] == record.VERSION == 1
    assert type(record).from_json(data) == record


@pytest.mark.parametrize("cls, data", [
    (Assignment, ASSIGNMENT.to_json()), (WorkerAssignment, WORKER.to_json()),
    (WorkerHeartbeat, HEARTBEAT.to_json()), (SupervisorInfo, SUPERVISOR.to_json())],
    ids=lambda x: getattr(x, "__name__", ""))
def test_a_newer_format_is_refused_naming_the_upgrade(cls, data):
    with pytest.raises(ContractError, match="format version 2, newer than this Squall reads "
                                            r"\(1\): upgrade Squall on this host"):
        cls.from_json(dict(data, version=2))


@pytest.mark.parametrize("cls, data, what", [
    (Assignment, {"topology_id": "t"}, "assignment of t is malformed: KeyError: 'workers'"),
    (WorkerAssignment, {"topology_id": "t", "worker_id": "h:1", "host": "h", "port": "x",
                        "workers": {}, "conf": {}}, "assignment.json is malformed: ValueError"),
    (SupervisorInfo, {"host": "h", "slots": ["a"]}, "supervisor info is malformed"),
    (WorkerHeartbeat, {"time": 1, "pid": 2, "state": "dancing"}, "heartbeat.json is malformed"),
    (SupervisorInfo, ["not", "an", "object"], "must be a JSON object"),
])
def test_a_malformed_record_is_a_contract_error(cls, data, what):
    with pytest.raises(ContractError) as exc:
        cls.from_json(data)
    assert what in str(exc.value)


def test_records_without_a_version_read_as_the_first_format():
    data = SUPERVISOR.to_json()
    del data["version"]
    assert SupervisorInfo.from_json(data) == SUPERVISOR


def test_which_workers_and_executors_belong_to_a_supervisor():
    assert ASSIGNMENT.workers_of("sup-1", "h1", [6700, 6701]) == [6700]
    assert ASSIGNMENT.workers_of("sup-3", "h1", [6700]) == []  # owned by sup-1, not by host
    no_owners = Assignment("t", {"h1:6700": (1,), "h2:6700": (2,)}, {})
    assert no_owners.workers_of("any", "h1", [6700]) == [6700]
    assert ASSIGNMENT.executors_on("h1:6700") == [[1, 2], [5]]
    assert ASSIGNMENT.worker_of_task()[4] == "h2:6700"


def test_worker_files_are_written_atomically_and_only_on_change(tmp_path):
    d = str(tmp_path)
    assert WORKER.write(d) is True and WORKER.write(d) is False
    assert WorkerAssignment.read(d) == WORKER
    assert read_status(d) is None
    assert write_status(d, WorkerStatus.ACTIVE) is True
    assert write_status(d, WorkerStatus.ACTIVE) is False  # the worker follows the mtime
    assert read_status(d) is WorkerStatus.ACTIVE
    HEARTBEAT.write(d)
    assert WorkerHeartbeat.read(d) == HEARTBEAT
    assert WorkerHeartbeat.read(d, pid=HEARTBEAT.pid) == HEARTBEAT
    assert WorkerHeartbeat.read(d, pid=1) is None  # left by another process
    leftovers = set(os.listdir(d)) - {ASSIGNMENT_FILE, STATUS_FILE, HEARTBEAT_FILE}
    assert not leftovers, leftovers


def test_the_worker_status_follows_the_topology_status():
    assert [WorkerStatus.for_topology(s) for s in ("active", "inactive", "killed",
                                                   "rebalancing", "ACTIVE")] == [
        WorkerStatus.ACTIVE, WorkerStatus.INACTIVE, WorkerStatus.KILLED, WorkerStatus.INACTIVE,
        WorkerStatus.ACTIVE]
