"""What a broker knows of each partition replica it hosts, as a file (kafkalab only).

Every `REPORT_INTERVAL_S` the broker writes `<log dir>/replica-state.json` when
something changed (only the partitions the ReplicaManager names as changed are
looked at, so idle partitions cost nothing): for every partition its role, leader, leader epoch,
partition epoch, log start offset, LEO, HW, the ISR as it knows it, the leader
epoch cache and, on the leader, each follower's LEO as the leader last saw it.
LocalCluster.describe() reads these files, so a table of the whole cluster needs
no extra protocol, and a paused or killed broker still shows what it last knew.

The file holds every partition, so writing it costs in proportion to them (about
a millisecond for twenty, tens of milliseconds for three thousand) and, under a
load that changes some partition every 100 ms, it would be written every 100 ms:
a fifth of a broker's event loop at 3,000 partitions. So the broker waits
`REPORT_BUDGET_FACTOR` times as long as its last report took before the next one
(`ReplicaStateReporter.next_delay`), never less than `REPORT_INTERVAL_S`: the
report takes at most about a tenth of the loop, and a small broker still reports
every 100 ms. Changes named meanwhile wait in the ReplicaManager, none is lost.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

REPLICA_STATE_FILE = "replica-state.json"
REPORT_INTERVAL_S = 0.1
#: the pause after a report, in multiples of what that report took
REPORT_BUDGET_FACTOR = 10
#: how often every entry is rebuilt, changed or not
FULL_REPORT_S = 5.0


def partition_state(p: Any) -> dict:
    """One partition replica as the report shows it."""
    log = p.log
    return {
        "topic": p.topic,
        "partition": p.partition,
        "role": p.role,
        "leader": p.leader_id,
        "leader_epoch": p.leader_epoch,
        "partition_epoch": p.partition_epoch,
        "log_start_offset": log.log_start_offset,
        "log_end_offset": log.log_end_offset,
        "high_watermark": log.high_watermark,
        "isr": list(p.isr),
        "pending_isr": p.pending_isr,
        "epochs": [[e.epoch, e.start_offset] for e in log.leader_epoch_cache.entries],
        "follower_leos": {str(b): r.log_end_offset for b, r in p.remote.items()},
    }


def snapshot(broker_id: int, partitions: dict[tuple[str, int], Any]) -> dict:
    return {
        "broker": broker_id,
        "partitions": [partition_state(p) for _, p in sorted(partitions.items())],
    }


class ReplicaStateReporter:
    """Keeps each partition's entry and rebuilds only the ones named as changed
    (ReplicaManager.take_changed), so a broker of a thousand idle partitions does
    no work a report; every FULL_REPORT_S it rebuilds all of them anyway, for a
    change that came another way (retention moving a log start offset)."""

    def __init__(self, log_dir: Path, clock: Any = time.perf_counter) -> None:
        self.path = log_dir / REPLICA_STATE_FILE
        self._entries: dict[tuple[str, int], dict] = {}
        self._written = False
        self._clock = clock  # seconds, to measure what a report costs
        self._last_cost_s = 0.0

    def next_delay(self) -> float:
        """How long the broker waits before the next report: REPORT_BUDGET_FACTOR
        times what the last one took, at least REPORT_INTERVAL_S."""
        return max(REPORT_INTERVAL_S, REPORT_BUDGET_FACTOR * self._last_cost_s)

    def report(
        self,
        broker_id: int,
        partitions: dict,
        changed: set[tuple[str, int]] | None = None,
    ) -> bool:
        """Write the file if an entry changed. `changed`: the partitions that may
        have; None rebuilds every entry. Returns whether it wrote."""
        start = self._clock()
        try:
            return self._report(broker_id, partitions, changed)
        finally:
            self._last_cost_s = self._clock() - start

    def _report(
        self, broker_id: int, partitions: dict, changed: set[tuple[str, int]] | None
    ) -> bool:
        dirty = not self._written
        names = set(partitions) | set(self._entries) if changed is None else changed
        for tp in names:
            part = partitions.get(tp)
            if part is None:
                dirty |= self._entries.pop(tp, None) is not None
                continue
            entry = partition_state(part)
            if self._entries.get(tp) != entry:
                self._entries[tp] = entry
                dirty = True
        if not dirty:
            return False
        state = {
            "broker": broker_id,
            "partitions": [self._entries[tp] for tp in sorted(self._entries)],
            "time_ms": int(time.time() * 1000),
        }
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state))
        os.replace(tmp, self.path)
        self._written = True
        return True


def read_replica_state(log_dir: Path) -> dict | None:
    try:
        return json.loads((log_dir / REPLICA_STATE_FILE).read_text())
    except FileNotFoundError:
        return None
