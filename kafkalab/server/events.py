"""EventLog: what a broker or the controller did, when, as one JSON line each.

A kafkalab instrument, not a Kafka file. Kafka's own logs say the same things
in prose (state-change.log, controller.log); kafkalab writes them also as
`<data dir>/events.jsonl`, so a lab, a benchmark and a test can rebuild a
failover's timeline from the processes' own records:

    controller  fenced            broker (silent for broker.session.timeout.ms, or
                                  asking for a controlled shutdown)
                partition_change  topic, partition, leader, leader_epoch, isr, reason
                                  (an election when the leader epoch grew)
    a quorum    quorum_state      state, epoch, leader, from, from_epoch (a Raft
    controller                    transition: follower -> prospective is a fetch
                                  timeout, prospective -> candidate a won pre-vote,
                                  candidate -> leader a won vote, leader -> resigned
                                  check-quorum or a graceful resignation)
                leader_change_committed  epoch, offset (the leader's LeaderChange
                                  record, the first of its epoch, is committed)
                controller_activated / controller_renounced  epoch
                broker_heartbeat  broker, epoch (the first heartbeat of that broker
                                  to reach this controller since it activated)
    broker      leader            topic, partition, leader_epoch (applied an election)
                follower          topic, partition, leader, leader_epoch
                truncated         topic, partition, from, to
                fetching          topic, partition, leader (first fetch answered after
                                  becoming a follower)
                controller_leader controller (the one it now sends to; null: none
                                  known), epoch, how (hint, answered, unreachable,
                                  not_controller), named_by, sent (requests sent to
                                  each controller so far): controller_channel.py
                controller_unreachable  controller, sent (a request it did not
                                  answer: a broken connection or a cut link)

Times are wall-clock milliseconds (`time.time()`), comparable across the
processes of one machine. Only state changes are recorded, so the file stays
small; it is appended to and never rewritten.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

EVENTS_FILE = "events.jsonl"


class EventLog:
    def __init__(self, data_dir: str | Path, source: str) -> None:
        self.path = Path(data_dir) / EVENTS_FILE
        self.source = source
        self._file = None

    def record(self, event: str, **fields) -> None:
        if self._file is None:
            self._file = open(self.path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115
        line = {"time_ms": round(time.time() * 1000, 3), "source": self.source, "event": event}
        self._file.write(json.dumps({**line, **fields}) + "\n")

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def read_events(data_dir: str | Path) -> list[dict]:
    """Every event a process recorded in `data_dir`, oldest first ([] if none)."""
    try:
        with open(Path(data_dir) / EVENTS_FILE, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []
