"""KafkaRaftManager: a KafkaRaftClient on the network (Kafka: kafka.raft.KafkaRaftManager,
its RaftIoThread, KafkaNetworkChannel).

kafkalab.raft's client is sans-IO; this module gives it a clock, sockets and a log on
disk, on the asyncio loop of the controller process that owns it:

    - the log is KafkaMetadataLog in `<metadata.log.dir>/__cluster_metadata-0`, the
      `quorum-state` file beside its segments (where Kafka keeps it);
    - a poll task calls `client.poll(now)` every `retry_backoff_ms` (or at once when
      woken) and sends what it returns: each request goes to its voter over an
      InterBrokerConnection (kafkalab's inter-broker machinery, one request in flight
      per voter), as Kafka's request bodies (raft_wire: Vote v2, BeginQuorumEpoch
      v1, EndQuorumEpoch v1, Fetch v16, FetchSnapshot v1), and the response is handed back with
      `client.handle`; a connection error drops the request, which the client sends
      again after its request timeout, as Kafka's does;
    - inbound requests arrive through `handle_request(header, body)`, called by the
      controller's listener (ControllerApis, or RaftApis alone): Vote,
      BeginQuorumEpoch, EndQuorumEpoch, Fetch v12+ from a voter, FetchSnapshot,
      DescribeQuorum. A
      leader holds a Fetch that has nothing new for up to its MaxWaitMs (a long poll,
      as Kafka's leader parks it) and answers once the log grows.

`controller.quorum.voters` (Kafka's static voter set: `1@host:port,2@host:port,...`)
names the voters and where they listen; `parse_quorum_voters` reads it.

Listeners (`add_listener`) are called after every step with the manager: the
controller learns there that it became leader (activate), lost it (renounce), or
that the high watermark moved (replay committed records). `wait_for_commit(offset)`
returns once the high watermark passes `offset`, or raises NotLeaderError if this
voter stops leading first. `create_snapshot(end_offset, records)` writes the state
machine's snapshot (KIP-630) and drops the log below it; a voter that installed its
leader's snapshot shows it in `client.snapshots_installed` (the state machine reloads
from `log.latest_snapshot_id`).

Given an EventLog (`events`), the manager records each of its voter's Raft
transitions there (`quorum_state`: state, epoch, leader, from, from_epoch; a
Follower that turns Prospective is a fetch timeout, a Prospective that turns
Candidate won its pre-vote) and, on a leader, the moment its LeaderChange record is
committed (`leader_change_committed`: epoch, offset), so a controller failover can
be taken apart from the processes' own records (kafkalab.cluster.controller_failover).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from kafkalab.errors import KafkaError
from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.protocol.header import RequestHeader
from kafkalab.protocol.messages import RAFT_APIS, Api
from kafkalab.protocol.messages.fetch import FETCH_REQUEST, FETCH_RESPONSE
from kafkalab.raft.errors import NotLeaderError
from kafkalab.raft.kafka_metadata_log import METADATA_LOG_DIR, KafkaMetadataLog
from kafkalab.raft.kafka_raft_client import KafkaRaftClient
from kafkalab.raft.leader_state import LeaderState
from kafkalab.raft.quorum_config import QuorumConfig
from kafkalab.raft.quorum_state_store import FileQuorumStateStore
from kafkalab.raft.raft_log import LogEntry, OffsetAndEpoch
from kafkalab.raft.raft_message import (
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    RaftMessage,
    VoteRequest,
)
from kafkalab.raft.raft_wire import (
    FETCH_MAX_WAIT_MS,
    describe_quorum_to_body,
    request_from_body,
    request_to_body,
    response_from_body,
    response_to_body,
)
from kafkalab.server.events import EventLog
from kafkalab.server.inter_broker_connection import InterBrokerConnection
from kafkalab.server.link_faults import CutMode, LinkFaults
from kafkalab.server.socket_server import CLOSE_CONNECTION, DROP_REQUEST

log = logging.getLogger(__name__)

#: What a voter's listener speaks to other voters: KRaft's APIs and Fetch up to v17.
RAFT_CHANNEL_APIS: dict[ApiKeys, Api] = {
    **RAFT_APIS,
    ApiKeys.FETCH: Api(ApiKeys.FETCH, "Fetch", 0, 17, FETCH_REQUEST, FETCH_RESPONSE),
}
#: The requests a voter answers through KafkaRaftManager.handle_request.
RAFT_REQUEST_KEYS = frozenset(RAFT_APIS) | {ApiKeys.FETCH}
#: How often a sole voter that leads polls its client unwoken (it has nothing timed to
#: do; a 20 ms poll would cost an idle single controller ten times the CPU).
SOLE_LEADER_IDLE_POLL_S = 1.0
FIRST_RAFT_FETCH_VERSION = 12  # Fetch v12 added LastFetchedEpoch and the tagged KRaft fields


def parse_quorum_voters(value: str) -> dict[int, tuple[str, int]]:
    """`controller.quorum.voters`: `id@host:port,...` -> {id: (host, port)} (Kafka:
    QuorumConfig.parseVoterConnections)."""
    voters: dict[int, tuple[str, int]] = {}
    for item in (v.strip() for v in value.split(",")):
        if not item:
            continue
        try:
            node, address = item.split("@", 1)
            host, port = address.rsplit(":", 1)
            voters[int(node)] = (host.strip("[]"), int(port))
        except ValueError:
            raise ValueError(
                f"controller.quorum.voters entry {item!r} is not id@host:port"
            ) from None
    if not voters:
        raise ValueError("controller.quorum.voters names no voter")
    return voters


def format_quorum_voters(voters: dict[int, tuple[str, int]]) -> str:
    return ",".join(f"{v}@{h}:{p}" for v, (h, p) in sorted(voters.items()))


def _now_ms() -> int:
    return int(time.time() * 1000)


def source_of(data: Any) -> int:
    """Who sent a KRaft request: the replica or leader id it carries."""
    if isinstance(data, VoteRequest | FetchRequest | FetchSnapshotRequest):
        return data.replica_id
    if isinstance(data, BeginQuorumEpochRequest | EndQuorumEpochRequest):
        return data.leader_id
    raise TypeError(f"not a KRaft request: {data!r}")


class KafkaRaftManager:
    """One voter of `voters` ({id: (host, port)}), its log in `directory`."""

    def __init__(
        self,
        node_id: int,
        voters: dict[int, tuple[str, int]],
        directory: str | Path,
        config: QuorumConfig | None = None,
        cluster_id: str | None = None,
        clock: Callable[[], int] = _now_ms,
        link_faults: LinkFaults | None = None,
        events: EventLog | None = None,
        segment_bytes: int | None = None,
    ) -> None:
        """`link_faults`: the voters this one is deaf to (kafkalab's cut links, see
        link_faults.py): their requests are refused (the connection closed) or
        dropped (never answered: the sender's request times out), and their
        answers thrown away. `events`: where the voter's transitions are
        recorded (see above). `segment_bytes`: metadata.log.segment.bytes."""
        if node_id not in voters:
            raise ValueError(f"node {node_id} is not one of controller.quorum.voters {voters}")
        self.node_id = node_id
        self.link_faults = link_faults
        self.voters = dict(voters)
        self.clock = clock
        self.config = config or QuorumConfig()
        self.log = KafkaMetadataLog(directory, segment_bytes=segment_bytes)
        self.store = FileQuorumStateStore.in_directory(Path(directory) / METADATA_LOG_DIR)
        self.client = KafkaRaftClient(
            node_id,
            voters,
            self.log,
            self.store,
            self.config,
            random.Random(),
            clock(),
            cluster_id,
        )
        self._connections = {
            v: InterBrokerConnection(
                h,
                p,
                RAFT_CHANNEL_APIS,
                lambda: f"raft-voter-{node_id}",
                # a dropped request (link faults) is given up on, as the client does
                self.config.request_timeout_ms,
            )
            for v, (h, p) in voters.items()
            if v != node_id
        }
        self._listeners: list[Callable[[KafkaRaftManager], None]] = []
        self._wake: asyncio.Event | None = None
        self._changed: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self._sends: set[asyncio.Task] = set()
        self._closed = False
        self.events = events
        self._recorded_state = (self.client.state_name.value, self.client.epoch, self.leader_id)
        self._recorded_commit_epoch = -1

    # -- reading ---------------------------------------------------------------------------

    @property
    def leader_id(self) -> int:
        return self.client.leader_id

    @property
    def epoch(self) -> int:
        return self.client.epoch

    @property
    def high_watermark(self) -> int:
        return self.client.high_watermark

    def is_leader(self) -> bool:
        return self.client.is_leader()

    def committed_entries(self, start: int) -> tuple[LogEntry, ...]:
        """The entries from `start` up to the high watermark."""
        hw = self.client.high_watermark
        return self.log.read(start, max(0, hw - start)) if start < hw else ()

    def add_listener(self, listener: Callable[[KafkaRaftManager], None]) -> None:
        self._listeners.append(listener)

    # -- running ---------------------------------------------------------------------------

    async def start(self) -> None:
        self._wake = asyncio.Event()
        self._changed = asyncio.Event()
        self._task = asyncio.create_task(self._run(), name=f"raft-io-{self.node_id}")

    async def stop(self) -> None:
        self._closed = True
        if self._changed is not None:
            self._changed.set()  # parked fetches and commit waits return now
        for task in [self._task, *self._sends]:
            if task is not None:
                task.cancel()
        for task in [self._task, *self._sends]:
            if task is not None:
                try:
                    await task
                except (asyncio.CancelledError, Exception):
                    pass
        for conn in self._connections.values():
            conn.close()
        self.log.close()

    async def _run(self) -> None:
        assert self._wake is not None
        while not self._closed:
            try:
                self._dispatch(self.client.poll(self.clock()))
            except Exception:
                log.exception("raft poll failed on voter %d", self.node_id)
                raise
            self._notify()
            self._wake.clear()
            wait_s = self.config.retry_backoff_ms / 1000
            if not self._connections and self.client.is_leader():
                # a quorum of one that leads has no timer to run (no voter to hear from,
                # no check-quorum): it steps when woken, by an append or a request
                wait_s = SOLE_LEADER_IDLE_POLL_S
            try:
                await asyncio.wait_for(self._wake.wait(), wait_s)
            except TimeoutError:
                pass

    def wake(self) -> None:
        if self._wake is not None:
            self._wake.set()

    def _record_transitions(self) -> None:
        """Record a new Raft state, and a leader's LeaderChange once committed."""
        if self.events is None:
            return
        now = (self.client.state_name.value, self.client.epoch, self.leader_id)
        if now != self._recorded_state:
            self.events.record(
                "quorum_state",
                state=now[0],
                epoch=now[1],
                leader=now[2],
                **{"from": self._recorded_state[0], "from_epoch": self._recorded_state[1]},
            )
            self._recorded_state = now
        state = self.client.quorum.state
        if (
            isinstance(state, LeaderState)
            and state.epoch != self._recorded_commit_epoch
            and self.client.high_watermark > state.epoch_start_offset
        ):
            self._recorded_commit_epoch = state.epoch
            self.events.record(
                "leader_change_committed",
                epoch=state.epoch,
                offset=state.epoch_start_offset,
                high_watermark=self.client.high_watermark,
            )

    def _notify(self) -> None:
        self._record_transitions()
        for listener in self._listeners:
            listener(self)
        if self._changed is not None:
            self._changed.set()
            self._changed = asyncio.Event()

    async def wait_for_change(self, timeout_s: float) -> None:
        """Return at the next step of the client, or after `timeout_s`."""
        changed = self._changed
        if changed is None:
            return
        try:
            await asyncio.wait_for(changed.wait(), timeout_s)
        except TimeoutError:
            pass

    # -- the leader's API ------------------------------------------------------------------

    def append(self, records: Sequence[object]) -> int:
        """Append on the leader (raises NotLeaderError elsewhere); the offset of the last."""
        offset = self.client.append(list(records), self.clock())
        self.wake()
        return offset

    def create_snapshot(self, end_offset: int, records: Sequence[object]) -> OffsetAndEpoch:
        """Snapshot the state after every record below `end_offset` (committed) as
        `records`; the log drops the entries below it. The snapshot's id."""
        snapshot_id = self.client.create_snapshot(end_offset, list(records))
        self._notify()
        return snapshot_id

    async def wait_for_commit(self, offset: int, timeout_s: float = 30.0) -> None:
        """Return once the high watermark is past `offset`. Raises NotLeaderError when
        this voter stops leading in the epoch it had (the record may never commit) and
        TimeoutError after `timeout_s`."""
        epoch = self.client.epoch
        deadline = time.monotonic() + timeout_s
        while self.client.high_watermark <= offset:
            if not self.client.is_leader() or self.client.epoch != epoch:
                raise NotLeaderError(self.node_id, self.client.leader_id, self.client.epoch)
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"offset {offset} not committed within {timeout_s} s")
            await self.wait_for_change(min(left, 0.5))

    # -- outbound --------------------------------------------------------------------------

    def _dispatch(self, messages: Iterable[RaftMessage]) -> None:
        for m in messages:
            if m.is_request and m.destination_id in self._connections and not self._closed:
                task = asyncio.create_task(self._send(m))
                self._sends.add(task)
                task.add_done_callback(self._sends.discard)

    async def _send(self, m: RaftMessage) -> None:
        key, version, body = request_to_body(m.data)  # type: ignore[arg-type]
        try:
            answer = await self._connections[m.destination_id].request(key, version, body)
            data = response_from_body(key, answer)
        except (KafkaError, ValueError) as e:
            log.debug("voter %d: %s to %d failed: %s", self.node_id, key.name, m.destination_id, e)
            return  # dropped: the client sends again after its request timeout
        if self._closed or not self.hears(m.destination_id):
            return
        reply = RaftMessage(m.correlation_id, m.destination_id, self.node_id, data)
        self._dispatch(self.client.handle(reply, self.clock()))
        self._notify()

    # -- inbound ---------------------------------------------------------------------------

    def handles(self, header: RequestHeader) -> bool:
        """Is this request the quorum's (a Fetch only from v12 on: older ones are a
        broker's metadata fetch)?"""
        if header.api_key == ApiKeys.FETCH:
            return header.api_version >= FIRST_RAFT_FETCH_VERSION
        return header.api_key in RAFT_REQUEST_KEYS

    def hears(self, node_id: int) -> bool:
        """False while a cut link makes this voter deaf to `node_id`."""
        if self.link_faults is None:
            return True
        self.link_faults.refresh()
        return self.link_faults.hears(node_id)

    def unheard(self, node_id: int) -> object:
        """The answer to a request from a node this one is deaf to: CLOSE_CONNECTION
        (a refused cut) or DROP_REQUEST (a dropped one)."""
        assert self.link_faults is not None
        if self.link_faults.mode(node_id) == CutMode.DROP:
            return DROP_REQUEST
        return CLOSE_CONNECTION

    def handle_request(self, header: RequestHeader, body: dict) -> Any:
        """The response body for an inbound KRaft request (a coroutine for a parked
        Fetch; CLOSE_CONNECTION or DROP_REQUEST from a voter this one is deaf to)."""
        if header.api_key == ApiKeys.DESCRIBE_QUORUM:
            return describe_quorum_to_body(self.client.describe_quorum(self.clock()))
        data = request_from_body(ApiKeys(header.api_key), body)
        if not self.hears(source_of(data)):
            return self.unheard(source_of(data))
        answer = self._handle(header.correlation_id, data)
        if (
            isinstance(data, FetchRequest)
            and isinstance(answer, FetchResponse)
            and not answer.records
            and answer.diverging_epoch is None
            and answer.snapshot_id is None
            and self.client.is_leader()
            and data.fetch_offset >= self.log.end_offset
            and body.get("max_wait_ms", 0) > 0
        ):
            # never so long that the follower's request times out meanwhile (its answer
            # would come too late to count, and it would start an election)
            wait_ms = min(
                body["max_wait_ms"], FETCH_MAX_WAIT_MS, self.config.request_timeout_ms // 2
            )
            return self._parked_fetch(header, data, wait_ms)
        return response_to_body(answer)

    def _handle(self, correlation_id: int, data: Any) -> Any:
        source = source_of(data)
        message = RaftMessage(correlation_id, source, self.node_id, data)
        out = self.client.handle(message, self.clock())
        reply = [o for o in out if not o.is_request and o.destination_id == source]
        self._dispatch(o for o in out if o.is_request)
        self._notify()
        self.wake()
        return reply[0].data if reply else None

    async def _parked_fetch(self, header: RequestHeader, data: FetchRequest, wait_ms: int) -> dict:
        """A Fetch with nothing new: answer when the log grows or the high watermark
        moves, or after `wait_ms` (Kafka: the leader's fetch purgatory)."""
        end, hw = self.log.end_offset, self.client.high_watermark
        deadline = time.monotonic() + wait_ms / 1000
        while self.log.end_offset == end and self.client.high_watermark == hw:
            left = deadline - time.monotonic()
            if left <= 0 or self._closed or not self.client.is_leader():
                break
            await self.wait_for_change(left)
        return response_to_body(self._handle(header.correlation_id, data))


class RaftApis:
    """A listener's handler that serves the quorum alone (tests, a lab): what
    ControllerApis does for the KRaft requests."""

    def __init__(self, manager: KafkaRaftManager) -> None:
        self.manager = manager

    def handle(self, header: RequestHeader, body: dict) -> Any:
        return self.manager.handle_request(header, body)
