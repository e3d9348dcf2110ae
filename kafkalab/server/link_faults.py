"""Cut links between brokers, between controllers and between brokers and controllers,
and hold client requests (kafkalab faults, not Kafka features).

A network partition between two brokers is modelled at the receiving end: a
broker that is *deaf to* broker A hears nothing from A. As a leader it drops
the connection on any request that carries `replica_id = A` (Fetch,
OffsetForLeaderEpoch); as a follower of A it throws away A's responses. So

    cut A -> B (one way)   B is deaf to A: B's fetches reach A (A sees B's
                           fetch offset), but B never gets the records back
    cut B -> A (one way)   A is deaf to B: B's fetches never reach A, so A
                           stops hearing from its follower
    cut A <-> B            both

Client traffic is not affected (controller traffic: below). The difference from a real
partition: a cut connection fails at once (the sender sees a network error and
retries) instead of after a socket timeout.

**Held requests** model a slow network for client traffic (Jepsen's delayed
messages, KAFKA-17754): `hold` names an API key, how many of its next client
requests to hold and for how long. A held request waits in its connection's
processor, before it reaches the request channel: the broker goes on serving
every other connection (so a client's retry on a new connection overtakes it,
as a retry through a different network path does), and the held request is then
handled as if it had just arrived. Rewriting the file (`release_requests`) lets
every held request go at once. Requests between brokers are never held.

**Between a broker and a controller** (a controller is named by its node id: a
quorum's voter, 3001, 3002, ..., or the single controller, 3001), each direction
alone:

    cut B -> C (one way)   controller C is deaf to broker B: it drops B's requests
                           (the connection closed), so B's heartbeats never
                           arrive; C fences B after broker.session.timeout.ms
                           (B's replicas leave every ISR, its leaderships move),
                           and B's AlterPartition and metadata fetches fail too
    cut C -> B (one way)   broker B is deaf to controller C: B's requests reach C
                           and C acts on them, but B throws C's answers away. B's
                           heartbeats arrive and keep it registered and unfenced,
                           but it learns nothing: its metadata goes stale (a topic
                           created, a leader elected, an ISR shrunk are not
                           applied on B) until the cut heals
    cut B <-> C            both: B is fenced and stale

With a quorum the cut is from one controller: a broker deaf to the active one still
asks it (the standbys name it the leader) and still is not answered; a broker the
active controller is deaf to is fenced by it, and the standbys only name the leader.
Between two controllers a cut is of their Raft traffic (kafka_raft_manager.py).

The state lives in `<log dir>/link-faults.json` (`{"deaf_to": [2, 3], "hold":
[{"api_key": 26, "count": 1, "ms": 60000}]}`), written by LocalCluster /
`kafkalab cluster cut|heal` and re-read by the broker whenever the file's
modification time changes (for a hold, also as each client request arrives, so
a hold written before a request was sent holds it).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from pathlib import Path

LINK_FAULTS_FILE = "link-faults.json"
log = logging.getLogger(__name__)


def _read(log_dir: Path) -> dict:
    try:
        return json.loads((log_dir / LINK_FAULTS_FILE).read_text())
    except FileNotFoundError:
        return {}


def _write(log_dir: Path, faults: dict) -> None:
    """Write atomically (the broker may read at any moment)."""
    tmp = log_dir / (LINK_FAULTS_FILE + ".tmp")
    tmp.write_text(json.dumps(faults))
    os.replace(tmp, log_dir / LINK_FAULTS_FILE)


def read_deaf_to(log_dir: Path) -> set[int]:
    return set(_read(log_dir).get("deaf_to", []))


def write_deaf_to(log_dir: Path, deaf_to: set[int]) -> None:
    """The brokers this one is deaf to (the holds are kept)."""
    _write(log_dir, {**_read(log_dir), "deaf_to": sorted(deaf_to)})


def hold_requests(log_dir: Path, api_key: int, count: int = 1, ms: int = 60_000) -> None:
    """Hold the broker's next `count` client requests of `api_key` for `ms` each
    (or until `release_requests`)."""
    faults = _read(log_dir)
    holds = [h for h in faults.get("hold", []) if h["api_key"] != int(api_key)]
    holds.append({"api_key": int(api_key), "count": count, "ms": ms})
    _write(log_dir, {**faults, "hold": holds})


def release_requests(log_dir: Path) -> None:
    """Hold nothing more, and let every held request go now."""
    faults = _read(log_dir)
    faults.pop("hold", None)
    _write(log_dir, faults)


class LinkFaults:
    """The broker's view of the file: `hears(broker_id)`; call `refresh()` often."""

    def __init__(self, log_dir: Path) -> None:
        self.path = log_dir / LINK_FAULTS_FILE
        self.deaf_to: frozenset[int] = frozenset()
        self._mtime: int | None = None
        #: api key -> [requests still to hold, ms]; from the file, counted down here
        self.holds: dict[int, list[int]] = {}
        self.generation = 0  # bumped at every re-read: a held request's release

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
        faults = _read(self.path.parent)
        self.deaf_to = frozenset(faults.get("deaf_to", []))
        self.holds = {h["api_key"]: [h["count"], h["ms"]] for h in faults.get("hold", [])}
        self.generation += 1
        if self.holds:
            log.info("link faults: holding client requests %s", self.holds)
        if self.deaf_to != before:  # logged here: a client request may be the one to re-read
            log.info("link faults: deaf to brokers %s", sorted(self.deaf_to))
        return self.deaf_to != before

    def take_hold(self, api_key: int) -> float | None:
        """The seconds to hold a client request of `api_key` that arrives now (None:
        not held); counts it against the hold."""
        self.refresh()
        hold = self.holds.get(api_key)
        if not hold or hold[0] <= 0:
            return None
        hold[0] -= 1
        return hold[1] / 1000

    async def wait_held(self, seconds: float, poll_s: float = 0.05) -> None:
        """Hold a request: `seconds`, or until the file is rewritten (released)."""
        generation = self.generation
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            await asyncio.sleep(poll_s)
            self.refresh()
            if self.generation != generation:
                return

    def hears(self, broker_id: int) -> bool:
        return broker_id not in self.deaf_to
