"""wait_for_replicas_in_sync reads the brokers' reports, which lag what the brokers
hold: right after a flush every report may still show the log before the sends, all
in sync at its old end. Given the end the caller knows was acknowledged, it waits
for reports written after it."""

from __future__ import annotations

import pandas as pd
import pytest

from kafkalab.cluster.local_cluster import DESCRIBE_COLUMNS, ProcessState
from kafkalab.cluster.workload import wait_for_replicas_in_sync


def rows(leo: int, hw: int) -> pd.DataFrame:
    """Three running replicas of t-0, led by broker 1, each at `leo` with `hw`."""
    return pd.DataFrame(
        [
            {
                "topic": "t",
                "partition": 0,
                "broker": b,
                "status": str(ProcessState.RUNNING),
                "role": "leader" if b == 1 else "follower",
                "leader": 1,
                "leader epoch": 0,
                "LEO": leo,
                "HW": hw,
                "ISR": [1, 2, 3],
                "lag": 0,
                "epochs": "0@0",
            }
            for b in (1, 2, 3)
        ],
        columns=DESCRIBE_COLUMNS,
    )


class Reports:
    """A cluster whose describe() answers from a list of tables (the last repeats)."""

    def __init__(self, *tables: pd.DataFrame) -> None:
        self.tables, self.asked = list(tables), 0

    def describe(self, topic: str) -> pd.DataFrame:
        self.asked += 1
        return self.tables.pop(0) if len(self.tables) > 1 else self.tables[0]


def test_reports_from_before_the_sends_are_not_in_sync_at_the_acknowledged_end():
    before, copying, after = rows(0, 0), rows(50, 0), rows(50, 50)
    cluster = Reports(before, before, copying, after)
    found = wait_for_replicas_in_sync(cluster, "t", log_end_offset=50, timeout=10)
    assert list(found.LEO) == [50, 50, 50] and list(found.HW) == [50, 50, 50]
    assert cluster.asked == 4


def test_without_an_end_the_first_agreeing_reports_do():
    cluster = Reports(rows(0, 0), rows(50, 50))
    assert list(wait_for_replicas_in_sync(cluster, "t", timeout=10).LEO) == [0, 0, 0]


def test_replicas_that_never_reach_the_end_time_out():
    with pytest.raises(TimeoutError, match="at or past offset 50"):
        wait_for_replicas_in_sync(Reports(rows(0, 0)), "t", log_end_offset=50, timeout=0.3)
