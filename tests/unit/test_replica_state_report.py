"""The replica-state report looks only at the partitions the ReplicaManager names as
changed: a broker of many idle partitions does no work a report."""

from __future__ import annotations

import json

from kafkalab.records import SimpleRecord, build_batch
from kafkalab.replication.replica_manager import ReplicaManager
from kafkalab.server import replica_state
from kafkalab.server.replica_state import (
    REPLICA_STATE_FILE,
    REPORT_BUDGET_FACTOR,
    REPORT_INTERVAL_S,
    ReplicaStateReporter,
)
from kafkalab.storage import LogConfig, LogManager


class Timers:
    class Handle:
        def cancel(self) -> None:
            pass

    def __call__(self, delay_s, fn):
        return self.Handle()


def test_only_changed_partitions_are_looked_at(tmp_path, monkeypatch):
    rm = ReplicaManager(LogManager(tmp_path / "logs", LogConfig()), Timers(), broker_id=1)
    for p in range(20):
        rm.make_leader(("t", p), 0, [1], [1], 0)
    reporter = ReplicaStateReporter(tmp_path)
    assert reporter.report(1, rm.partitions, rm.take_changed())
    looked_at = []
    build = replica_state.partition_state
    monkeypatch.setattr(
        replica_state, "partition_state", lambda p: looked_at.append(p.partition) or build(p)
    )
    for _ in range(10):  # idle
        assert not reporter.report(1, rm.partitions, rm.take_changed())
    assert looked_at == []

    rm.append_records("t", 7, build_batch([SimpleRecord(b"v")]), required_acks=1)
    assert reporter.report(1, rm.partitions, rm.take_changed())
    assert looked_at == [7]
    state = json.loads((tmp_path / REPLICA_STATE_FILE).read_text())
    assert [p["log_end_offset"] for p in state["partitions"] if p["partition"] == 7] == [1]
    assert len(state["partitions"]) == 20

    rm.remove_partition(("t", 3))
    assert reporter.report(1, rm.partitions, rm.take_changed())
    state = json.loads((tmp_path / REPLICA_STATE_FILE).read_text())
    assert sorted(p["partition"] for p in state["partitions"]) == sorted(set(range(20)) - {3})
    # A full rebuild (changed=None) finds nothing new either.
    assert not reporter.report(1, rm.partitions, None)


class SteppedClock:
    """A clock that a report (and json.dumps inside it) moves on by `step_s` a read."""

    def __init__(self) -> None:
        self.now = 0.0
        self.step_s = 0.0

    def __call__(self) -> float:
        self.now += self.step_s
        return self.now


def test_a_costly_report_spaces_out_the_next(tmp_path):
    """Writing the file costs in proportion to the partitions: the broker waits
    REPORT_BUDGET_FACTOR times what the last report took (never less than
    REPORT_INTERVAL_S), so a broker of thousands of partitions under load does not
    spend a fifth of its event loop rewriting replica-state.json every 100 ms."""
    rm = ReplicaManager(LogManager(tmp_path / "logs", LogConfig()), Timers(), broker_id=1)
    for p in range(5):
        rm.make_leader(("t", p), 0, [1], [1], 0)
    clock = SteppedClock()
    reporter = ReplicaStateReporter(tmp_path, clock=clock)
    assert reporter.next_delay() == REPORT_INTERVAL_S  # nothing measured yet

    clock.step_s = 0.04  # a report that takes 40 ms (start and end: one step)
    assert reporter.report(1, rm.partitions, rm.take_changed())
    assert reporter.next_delay() == REPORT_BUDGET_FACTOR * 0.04

    clock.step_s = 0.0001  # a cheap one brings the pace back to REPORT_INTERVAL_S
    rm.append_records("t", 2, build_batch([SimpleRecord(b"v")]), required_acks=1)
    assert reporter.report(1, rm.partitions, rm.take_changed())
    assert reporter.next_delay() == REPORT_INTERVAL_S
