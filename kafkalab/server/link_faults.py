"""Cut replication links between brokers (a kafkalab fault, not a Kafka feature).

A network partition between two brokers is modelled at the receiving end: a
broker that is *deaf to* broker A hears nothing from A. As a leader it drops
the connection on any request that carries `replica_id = A` (Fetch,
OffsetForLeaderEpoch); as a follower of A it throws away A's responses. So

    cut A -> B (one way)   B is deaf to A: B's fetches reach A (A sees B's
                           fetch offset), but B never gets the records back
    cut B -> A (one way)   A is deaf to B: B's fetches never reach A, so A
                           stops hearing from its follower
    cut A <-> B            both

Client and controller traffic is not affected. The difference from a real
partition: a cut connection fails at once (the sender sees a network error and
retries) instead of after a socket timeout.

The state lives in `<log dir>/link-faults.json` (`{"deaf_to": [2, 3]}`), written
by LocalCluster / `kafkalab cluster cut|heal` and re-read by the broker whenever
the file's modification time changes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

LINK_FAULTS_FILE = "link-faults.json"


def read_deaf_to(log_dir: Path) -> set[int]:
    try:
        return set(json.loads((log_dir / LINK_FAULTS_FILE).read_text())["deaf_to"])
    except FileNotFoundError:
        return set()


def write_deaf_to(log_dir: Path, deaf_to: set[int]) -> None:
    """Write atomically (the broker may read at any moment)."""
    tmp = log_dir / (LINK_FAULTS_FILE + ".tmp")
    tmp.write_text(json.dumps({"deaf_to": sorted(deaf_to)}))
    os.replace(tmp, log_dir / LINK_FAULTS_FILE)


class LinkFaults:
    """The broker's view of the file: `hears(broker_id)`; call `refresh()` often."""

    def __init__(self, log_dir: Path) -> None:
        self.path = log_dir / LINK_FAULTS_FILE
        self.deaf_to: frozenset[int] = frozenset()
        self._mtime: int | None = None

    def refresh(self) -> bool:
        """Re-read the file if it changed; True when the set changed."""
        try:
            mtime = self.path.stat().st_mtime_ns
        except FileNotFoundError:
            mtime = None
        if mtime == self._mtime:
            return False
        self._mtime = mtime
        before = self.deaf_to
        self.deaf_to = frozenset(read_deaf_to(self.path.parent))
        return self.deaf_to != before

    def hears(self, broker_id: int) -> bool:
        return broker_id not in self.deaf_to
