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

Client traffic is not affected here (controller traffic: below).

**Two kinds of failure** (Jepsen's): a cut is `refuse` or `drop`.

    refuse   the connection is closed at once: the sender sees a network error
             and retries (connections refused, a host that is down)
    drop     the request is read and never answered, and the connection stays
             open and silent until its sender gives up on it: the sender waits
             for its request timeout (replica.socket.timeout.ms for a follower,
             the quorum's request timeout for a voter, request.timeout.ms for a
             client), which is what makes timeouts matter (packets silently
             dropped, a firewall's DROP). An answer from a node the receiver is
             deaf to is likewise thrown away, and the receiver waits out its
             request timeout before it asks again. A dropped request is lost,
             not delayed: it never reaches the broker's handlers, even after a
             heal. Between a broker and a controller a cut is refused in
             either mode for now: a broker's channel to its controllers has no
             request timeout yet, so a dropped request would hold it for good.

**Clients cut off** (`isolate_clients`): a broker deaf to clients, all of them
or those whose client.id starts with a prefix (Jepsen's clients are
processes; ours tell them apart by client.id), in either mode. Requests
between brokers (on the inter-broker listener) are never cut this way.

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

The state lives in `<log dir>/link-faults.json` (`{"deaf_to": [2, 3], "drop": [3],
"clients": {"mode": "drop", "client_id_prefix": "p1-"}, "hold": [{"api_key": 26,
"count": 1, "ms": 60000}]}`: `drop` names the cuts of `deaf_to` in drop mode, the
others refuse), written by LocalCluster /
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

from kafkalab.kinds import Kind

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


class CutMode(Kind):
    """How a cut link fails (see the module's docstring)."""

    REFUSE = "refuse"  # the connection closed at once
    DROP = "drop"  # never answered: the sender waits for its request timeout


def cut(log_dir: Path, senders: set[int], mode: CutMode | str = CutMode.REFUSE) -> None:
    """Make this node deaf to `senders`, in `mode` (a sender already cut takes the
    new mode)."""
    mode = CutMode.parse(mode, "cut mode")
    faults = _read(log_dir)
    deaf = set(faults.get("deaf_to", [])) | set(senders)
    drop = set(faults.get("drop", [])) & deaf
    drop = drop | set(senders) if mode == CutMode.DROP else drop - set(senders)
    _write(log_dir, {**faults, "deaf_to": sorted(deaf), "drop": sorted(drop)})


def read_cuts(log_dir: Path) -> dict[int, CutMode]:
    """Every node this one is deaf to, with the mode of its cut."""
    faults = _read(log_dir)
    drop = set(faults.get("drop", []))
    return {
        n: CutMode.DROP if n in drop else CutMode.REFUSE for n in sorted(faults.get("deaf_to", []))
    }


def isolate_clients(
    log_dir: Path, mode: CutMode | str = CutMode.REFUSE, client_id_prefix: str | None = None
) -> None:
    """Make this broker deaf to its clients: all of them, or those whose client.id
    starts with `client_id_prefix`."""
    faults = _read(log_dir)
    clients = {"mode": CutMode.parse(mode, "cut mode").value, "client_id_prefix": client_id_prefix}
    _write(log_dir, {**faults, "clients": clients})


def read_clients_cut(log_dir: Path) -> dict | None:
    """{"mode", "client_id_prefix"} while this broker is deaf to clients, else None."""
    return _read(log_dir).get("clients")


def uncut(log_dir: Path, senders: set[int]) -> None:
    """Hear `senders` again (other cuts stay: faults that overlap heal one by one)."""
    faults = _read(log_dir)
    deaf = set(faults.get("deaf_to", [])) - set(senders)
    drop = set(faults.get("drop", [])) & deaf
    _write(log_dir, {**faults, "deaf_to": sorted(deaf), "drop": sorted(drop)})


def connect_clients(log_dir: Path) -> None:
    """Hear clients again (the cut links stay)."""
    faults = _read(log_dir)
    if faults.pop("clients", None) is not None:
        _write(log_dir, faults)


def heal(log_dir: Path) -> None:
    """Hear every node and every client again (held requests stay as they are)."""
    faults = _read(log_dir)
    for key in ("drop", "clients"):
        faults.pop(key, None)
    _write(log_dir, {**faults, "deaf_to": []})


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
        self.dropped: frozenset[int] = frozenset()  # the cuts of deaf_to in drop mode
        #: (mode, client.id prefix or None) while deaf to clients
        self.clients: tuple[CutMode, str | None] | None = None
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
        self.dropped = frozenset(faults.get("drop", [])) & self.deaf_to
        clients = faults.get("clients")
        self.clients = (
            (CutMode(clients["mode"]), clients.get("client_id_prefix")) if clients else None
        )
        if clients:
            log.info("link faults: deaf to clients %s", clients)
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

    def mode(self, node_id: int) -> CutMode | None:
        """How the link from `node_id` is cut (None: it is not)."""
        if node_id not in self.deaf_to:
            return None
        return CutMode.DROP if node_id in self.dropped else CutMode.REFUSE

    def client_cut(self, client_id: str | None) -> CutMode | None:
        """How a client request with this client.id is cut (None: it is heard)."""
        if self.clients is None:
            return None
        mode, prefix = self.clients
        if prefix is not None and not (client_id or "").startswith(prefix):
            return None
        return mode
