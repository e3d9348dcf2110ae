"""What a broker knows of each partition replica it hosts, as a file (kafkalab only).

Every `REPORT_INTERVAL_S` the broker writes `<log dir>/replica-state.json` when
something changed: for every partition its role, leader, leader epoch,
partition epoch, log start offset, LEO, HW, the ISR as it knows it, the leader
epoch cache and, on the leader, each follower's LEO as the leader last saw it.
LocalCluster.describe() reads these files, so a table of the whole cluster needs
no extra protocol, and a paused or killed broker still shows what it last knew.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

REPLICA_STATE_FILE = "replica-state.json"
REPORT_INTERVAL_S = 0.1


def snapshot(broker_id: int, partitions: dict[tuple[str, int], Any]) -> dict:
    out = []
    for (topic, index), p in sorted(partitions.items()):
        log = p.log
        out.append(
            {
                "topic": topic,
                "partition": index,
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
        )
    return {"broker": broker_id, "partitions": out}


class ReplicaStateReporter:
    def __init__(self, log_dir: Path) -> None:
        self.path = log_dir / REPLICA_STATE_FILE
        self._last: dict | None = None

    def report(self, broker_id: int, partitions: dict) -> None:
        state = snapshot(broker_id, partitions)
        if state == self._last:
            return
        self._last = state
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({**state, "time_ms": int(time.time() * 1000)}))
        os.replace(tmp, self.path)


def read_replica_state(log_dir: Path) -> dict | None:
    try:
        return json.loads((log_dir / REPLICA_STATE_FILE).read_text())
    except FileNotFoundError:
        return None
