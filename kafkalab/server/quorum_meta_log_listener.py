"""The controller on a KRaft quorum (Kafka: QuorumController's QuorumMetaLogListener,
activate() and renounce(), ControllerApis on a voter).

Every controller process is one voter of a quorum (KafkaRaftManager, its Raft log in
`<log.dirs>/__cluster_metadata-0`): of `controller.quorum.voters`, or, without them, of
a quorum of one (`quorum_voters`: a single controller, as Kafka 4's
`kafka-storage format --standalone` makes one, leads at its first step). Its
QuorumController runs on it:

    - the active controller is the Raft leader, once the LeaderChange record of its
      epoch (and so every record before it) is committed and applied;
    - every batch the active controller writes goes first to Raft (QuorumController's
      `record_sink`: one Raft entry a record, each Kafka's binary metadata record;
      a batch of more than one record is a metadata transaction, KIP-868's
      BeginTransactionRecord, the records, EndTransactionRecord, so that it commits
      whole: a standby applies it at its EndTransactionRecord, and one cut short by
      a new epoch, whose leader never had its end, is dropped, as the
      AbortTransactionRecord Kafka's new active controller writes for it would.
      Kafka appends an atomic write as one batch and uses metadata transactions only
      for writes too big for one; kafkalab's Raft log keeps one batch an entry, so
      that Raft may truncate at any offset, hence a transaction for every write of
      more than one record);
      it is applied to
      the in-memory image at once (Kafka applies uncommitted records to its timeline
      structures too) but the response to the request that wrote it waits until the
      quorum's high watermark passes it: acknowledged means committed;
    - a standby controller applies committed entries as they commit (handleCommit):
      its image is the leader's, behind by what is uncommitted;
    - on activation the controller restarts every broker's session timer (Kafka's
      activate(): a new controller has seen no heartbeat yet, and must not fence
      brokers for that); on losing leadership it renounces: it stops writing and
      fencing, drops what it wrote that is not committed and rebuilds its image from
      what is (QuorumController.revert_to_committed);
    - `cut` links (kafkalab's link faults, `<log.dirs>/link-faults.json`): a controller
      deaf to a voter drops its Raft requests and answers, deaf to a broker drops
      that broker's requests (heartbeats, metadata fetches, AlterPartition);
    - a controller that is not active answers a broker's or a client's request with
      NOT_CONTROLLER (and a metadata Fetch with NOT_LEADER_OR_FOLLOWER and the
      leader it knows as CurrentLeader; the active one names itself in its answers
      too), so the broker goes to the leader (server/controller_channel.py). A Fetch
      from a replica that is not a voter is a broker's metadata fetch, at v11 or at
      v12 (the first version with CurrentLeader); a voter's is Raft's.

The brokers still fetch the metadata log in the form they always did: each controller
keeps, in `<log.dirs>/metadata-image/__cluster_metadata-0`, the committed records in
the order Raft committed them (the same offsets on every controller, so a broker
epoch, the offset of its registration, is the same everywhere). It is not fsynced as
it is written (Raft's log is, before a write counts): it is flushed only up to where a
snapshot's checkpoint (below) names it, and aligned with Raft at every start. Both logs
hold Kafka's binary metadata records (controller/metadata_record_serde.py). (Kafka's
brokers fetch the Raft log itself as observers; here that is a later step.)

Snapshots (KIP-630). Every `metadata.log.max.record.bytes.between.snapshots` bytes of
committed records (Kafka's name and default, 20 MiB; the records' binary size), or
`metadata.log.max.snapshot.interval.ms` (1 hour) after the last one if any record
committed since, a controller snapshots its image
at the Raft offset it has applied: the records that rebuild it
(QuorumController.snapshot_records: a MetadataSnapshotRecord naming the
metadata-image offset, then the image), and Raft drops its log below. The
metadata-image log is kept across restarts, so the pair (Raft offset, metadata-image
offset) is checkpointed, fsynced, in `metadata-image/raft-offset-checkpoint` before
Raft may drop anything below it. At start:

    - a checkpoint at or above Raft's log start: the metadata-image log is cut to its
      offset and Raft's entries after it are applied again (the same records at the
      same offsets: each committed record or transaction is one batch);
    - no checkpoint and Raft's log whole (from offset 0): rebuilt from Raft (as before
      snapshots);
    - otherwise (the voter installed its leader's snapshot, from beyond what its
      metadata-image log holds): the snapshot is loaded, and the metadata-image log
      becomes its records, placed so that they end at the snapshot's metadata-image
      offset (QuorumController.load_snapshot). From that offset on the log is the same
      as every other controller's, and broker epochs go on the same; below it, it
      holds the image rather than its history. A broker fetching from inside that
      stretch (it read history up to there from another controller) is answered
      OFFSET_OUT_OF_RANGE and starts over at the log start, whose
      MetadataSnapshotRecord empties its image, which the records after it rebuild
      (metadata_listener.py): a broker's image is always the committed one.

A standby that installs a snapshot while it runs loads it the same way.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from kafkalab.controller.metadata_record_serde import serialize
from kafkalab.controller.quorum_controller import METADATA_TOPIC, QuorumController
from kafkalab.errors import Errors, KafkaError
from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.protocol.header import RequestHeader
from kafkalab.raft.errors import NotLeaderError
from kafkalab.raft.kafka_metadata_log import METADATA_LOG_DIR
from kafkalab.raft.leader_state import LeaderState
from kafkalab.raft.quorum_config import QuorumConfig
from kafkalab.raft.quorum_state_store import QUORUM_STATE_FILE
from kafkalab.raft.snapshot import decode_snapshot
from kafkalab.server.clock import monotonic_ms
from kafkalab.server.controller_server import ControllerApis, MetadataLogChanges
from kafkalab.server.events import EventLog
from kafkalab.server.kafka_raft_manager import (
    RAFT_CHANNEL_APIS,
    KafkaRaftManager,
    parse_quorum_voters,
)
from kafkalab.server.link_faults import LinkFaults
from kafkalab.server.socket_server import CLOSE_CONNECTION
from kafkalab.storage.errors import StorageError

log = logging.getLogger(__name__)
__all__ = [
    "RAFT_CHANNEL_APIS",
    "STANDALONE_NODE_ID",
    "metadata_image_log_dir",
    "QuorumControllerApis",
    "QuorumMetaLogListener",
    "quorum_voters",
    "refuse_pre_quorum_directory",
    "start_quorum",
]

METADATA_IMAGE_DIR = "metadata-image"
#: (Raft offset, metadata-image offset) the metadata-image log is known to match
IMAGE_CHECKPOINT_FILE = "raft-offset-checkpoint"
#: Kafka's metadata.log.max.record.bytes.between.snapshots default (20 MiB)
MAX_RECORD_BYTES_BETWEEN_SNAPSHOTS = 20 * 1024 * 1024
#: Kafka's metadata.log.max.snapshot.interval.ms default (1 hour)
MAX_SNAPSHOT_INTERVAL_MS = 3600 * 1000
#: Requests only the active controller answers.
ACTIVE_ONLY = frozenset(
    {
        ApiKeys.CREATE_TOPICS,
        ApiKeys.DELETE_TOPICS,
        ApiKeys.CREATE_PARTITIONS,
        ApiKeys.ALTER_PARTITION,
        ApiKeys.BROKER_REGISTRATION,
        ApiKeys.BROKER_HEARTBEAT,
        ApiKeys.ALLOCATE_PRODUCER_IDS,
        ApiKeys.ELECT_LEADERS,
        ApiKeys.ALTER_PARTITION_REASSIGNMENTS,
        ApiKeys.LIST_PARTITION_REASSIGNMENTS,
        ApiKeys.ALTER_CONFIGS,
        ApiKeys.INCREMENTAL_ALTER_CONFIGS,
    }
)


def _now_ms() -> int:
    """The controller's session timers' clock: monotonic, as Kafka's
    BrokerHeartbeatManager (System.nanoTime), so a stepped wall clock fences no one."""
    return monotonic_ms()


def quorum_config(props: dict[str, str]) -> QuorumConfig:
    """The controller.quorum.* timeouts of a controller's config (Kafka's names)."""
    default = QuorumConfig()

    def ms(name: str, value: int) -> int:
        return int(props.get(f"controller.quorum.{name}", value))

    return QuorumConfig(
        election_timeout_ms=ms("election.timeout.ms", default.election_timeout_ms),
        fetch_timeout_ms=ms("fetch.timeout.ms", default.fetch_timeout_ms),
        election_backoff_max_ms=ms("election.backoff.max.ms", default.election_backoff_max_ms),
        retry_backoff_ms=ms("retry.backoff.ms", default.retry_backoff_ms),
        request_timeout_ms=ms("request.timeout.ms", default.request_timeout_ms),
    )


def metadata_image_log_dir(data_dir: Path) -> Path:
    """Where, under a controller's log.dirs, the committed metadata records lie as the
    QuorumController wrote them (Kafka's binary records, one batch a write): what its
    brokers fetch, and what a reader of the controller's records (`kafkalab cluster
    status`, tests, labs) replays. Raft's own log, `<log.dirs>/__cluster_metadata-0`,
    holds the same records, one Raft entry each (a write of several between a
    BeginTransactionRecord and an EndTransactionRecord), beside its LeaderChange
    records. `kafkalab dump-log --cluster-metadata-decoder` prints either."""
    return data_dir / METADATA_IMAGE_DIR / f"{METADATA_TOPIC}-0"


def controller_directory(data_dir: Path) -> Path:
    """Where a voter's QuorumController keeps the committed records brokers fetch
    (Raft's log is the truth: QuorumMetaLogListener aligns this with it at start)."""
    return data_dir / METADATA_IMAGE_DIR


def read_image_checkpoint(directory: Path) -> tuple[int, int] | None:
    """(Raft offset, metadata-image offset) of `metadata-image/raft-offset-checkpoint`."""
    try:
        body = json.loads((directory / IMAGE_CHECKPOINT_FILE).read_text())
        return int(body["raft_offset"]), int(body["image_offset"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_image_checkpoint(directory: Path, raft_offset: int, image_offset: int) -> None:
    """Write, fsync, rename, fsync the directory: whole or not there."""
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / (IMAGE_CHECKPOINT_FILE + ".tmp")
    with open(tmp, "w") as f:
        json.dump({"raft_offset": raft_offset, "image_offset": image_offset}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, directory / IMAGE_CHECKPOINT_FILE)
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class QuorumMetaLogListener:
    """Joins one QuorumController to one KafkaRaftManager."""

    def __init__(
        self,
        controller: QuorumController,
        manager: KafkaRaftManager,
        events: EventLog | None,
        max_record_bytes_between_snapshots: int = MAX_RECORD_BYTES_BETWEEN_SNAPSHOTS,
        max_snapshot_interval_ms: int = MAX_SNAPSHOT_INTERVAL_MS,
    ) -> None:
        self.controller = controller
        self.manager = manager
        self.events = events
        self.active = False
        self.active_epoch = -1
        self.applied = 0  # Raft offsets below this are applied to the image
        self.last_appended = -1  # the last Raft offset this controller appended
        self._own: dict[int, int] = {}  # Raft offset -> local end offset after it
        self.max_record_bytes_between_snapshots = max_record_bytes_between_snapshots
        self.max_snapshot_interval_ms = max_snapshot_interval_ms
        self.last_snapshot_ms = manager.clock()
        self.bytes_since_snapshot = 0  # committed record bytes applied since the last one
        self.snapshots_taken = 0
        self.snapshots_loaded = 0
        self.image_dir = Path(controller.log.dir).parent
        self._recover()
        self._heard: set[int] = set()  # brokers heard from since this activation
        controller.record_sink = self._sink
        manager.add_listener(self._on_step)

    # -- the metadata-image log against Raft's ----------------------------------------------

    def _recover(self) -> None:
        """Align the metadata-image log with Raft's at start (see the module docstring)."""
        c, raft = self.controller, self.manager.log
        point = read_image_checkpoint(self.image_dir)
        if (
            point is not None
            and raft.log_start_offset <= point[0] <= raft.end_offset
            and c.log.log_start_offset <= point[1] <= c.log.log_end_offset
        ):
            c.reset_to(point[1])
            self.applied = point[0]
        elif raft.log_start_offset == 0:
            c.reset_to(0)
            self.applied = 0
        else:
            self._load_snapshot()

    def _load_snapshot(self) -> None:
        """The image becomes Raft's latest snapshot (this voter's log starts there)."""
        raft = self.manager.log
        snapshot_id = raft.latest_snapshot_id
        assert snapshot_id is not None
        data = raft.read_snapshot(snapshot_id)
        assert data is not None
        self.controller.load_snapshot(list(decode_snapshot(data).records))  # type: ignore[arg-type]
        self.applied = snapshot_id.offset
        self.controller.log.flush()  # the checkpoint names it: on disk first
        write_image_checkpoint(self.image_dir, self.applied, self.controller.metadata_offset)
        self.bytes_since_snapshot = 0
        self.snapshots_loaded += 1
        log.info(
            "controller %d loaded snapshot %s (metadata offset %d)",
            self.manager.node_id,
            snapshot_id,
            self.controller.metadata_offset,
        )

    def _maybe_snapshot(self) -> None:
        """Every max_record_bytes_between_snapshots of committed records, or after
        max_snapshot_interval_ms with any (0: never by time): snapshot the image at the
        Raft offset applied, once nothing uncommitted is applied (Kafka: the
        controller's SnapshotGenerator)."""
        due_by_time = (
            self.max_snapshot_interval_ms > 0
            and self.bytes_since_snapshot > 0
            and self.manager.clock() - self.last_snapshot_ms >= self.max_snapshot_interval_ms
        )
        if self.bytes_since_snapshot < self.max_record_bytes_between_snapshots and not due_by_time:
            return
        c, raft = self.controller, self.manager.log
        if self._own or self.applied <= raft.log_start_offset:
            return
        if c.log.high_watermark != c.log.log_end_offset:
            return
        records = c.snapshot_records()
        if len(records) > c.metadata_offset:
            return  # the image is bigger than its history: nothing to gain yet
        c.log.flush()  # the checkpoint names it: on disk first
        write_image_checkpoint(self.image_dir, self.applied, c.metadata_offset)
        snapshot_id = self.manager.client.create_snapshot(self.applied, records)
        self.bytes_since_snapshot = 0
        self.last_snapshot_ms = self.manager.clock()
        self.snapshots_taken += 1
        log.info("controller %d took snapshot %s", self.manager.node_id, snapshot_id)

    # -- writing ---------------------------------------------------------------------------

    def _sink(self, records: tuple[dict, ...]) -> None:
        if not self.active or not self.manager.is_leader():
            raise KafkaError(
                Errors.NOT_CONTROLLER,
                f"controller {self.manager.node_id} is not the active controller "
                f"(the leader is {self.manager.leader_id})",
            )
        entries = list(records)
        if len(entries) > 1:  # KIP-868: committed whole or not at all
            entries = [
                {"type": "BeginTransactionRecord"},
                *entries,
                {"type": "EndTransactionRecord"},
            ]
        try:
            offset = self.manager.append(entries)
        except NotLeaderError as e:
            raise KafkaError(Errors.NOT_CONTROLLER, str(e)) from e
        self._own[offset] = self.controller.log.log_end_offset + len(records)
        self.last_appended = offset

    async def wait_for_commit(self, offset: int) -> None:
        """Until Raft offset `offset` is committed (NOT_CONTROLLER if it may never be)."""
        try:
            await self.manager.wait_for_commit(offset)
        except NotLeaderError as e:
            raise KafkaError(Errors.NOT_CONTROLLER, str(e)) from e
        while self.applied <= offset:  # the listener runs right after the step
            await self.manager.wait_for_change(0.1)

    async def wait_until_active(self, timeout_s: float) -> None:
        """Until this controller is the active one (TimeoutError after `timeout_s`)."""
        deadline_ms = monotonic_ms() + timeout_s * 1000
        while not self.active:
            left = (deadline_ms - monotonic_ms()) / 1000
            if left <= 0:
                raise TimeoutError(
                    f"controller {self.manager.node_id} not active within {timeout_s} s"
                )
            await self.manager.wait_for_change(min(left, 0.1))

    # -- every step of Raft --------------------------------------------------------------

    def _on_step(self, manager: KafkaRaftManager) -> None:
        if self.active and (not manager.is_leader() or manager.epoch != self.active_epoch):
            self._renounce()
        self._apply_committed()
        self._maybe_snapshot()
        if not self.active and manager.is_leader():
            state = manager.client.quorum.state
            if isinstance(state, LeaderState) and self.applied > state.epoch_start_offset:
                self._activate()

    def _apply_committed(self) -> None:
        if self.applied < self.manager.log.log_start_offset:
            self._own.clear()
            self._load_snapshot()  # installed from the leader, beyond what we applied
        hw = self.manager.high_watermark
        if self.applied >= hw:
            return
        c = self.controller
        # A metadata transaction (BeginTransactionRecord .. EndTransactionRecord) is
        # applied at its end, whole; `applied` stays at its start until then. One that
        # an entry of a later epoch interrupts (a LeaderChange: its leader is gone,
        # and the new one never had its end) is dropped.
        txn: tuple[int, list[dict]] | None = None  # (its epoch, its records so far)
        for entry in self.manager.log.read(self.applied, hw - self.applied):
            record = entry.record
            if txn is not None and entry.epoch != txn[0]:
                txn = None  # aborted
            if not isinstance(record, dict):  # a LeaderChange
                if txn is None:
                    self.applied = entry.offset + 1
                continue
            kind = record["type"]
            if kind == "BeginTransactionRecord":
                txn = (entry.epoch, [])
            elif kind == "AbortTransactionRecord":
                txn = None
                self.applied = entry.offset + 1
            elif txn is not None and kind != "EndTransactionRecord":
                txn[1].append(record)
            else:
                records = [record] if txn is None else txn[1]
                txn = None
                local_end = self._own.pop(entry.offset, None)
                if local_end is None:  # another controller's write (or ours of an old epoch)
                    c.apply_committed(records)
                    local_end = c.log.log_end_offset
                c.log.update_high_watermark(local_end)
                self.bytes_since_snapshot += sum(len(serialize(r)) for r in records)
                self.applied = entry.offset + 1

    def _activate(self) -> None:
        now = _now_ms()
        self.active, self.active_epoch = True, self.manager.epoch
        self._own.clear()
        self._heard.clear()
        for broker in self.controller.brokers.values():
            broker.last_heartbeat_ms = now  # Kafka's activate(): every session starts now
        log.info("controller %d active in epoch %d", self.manager.node_id, self.manager.epoch)
        if self.events is not None:
            self.events.record("controller_activated", epoch=self.manager.epoch)

    def heard_from_broker(self, broker_id: int) -> None:
        """A broker's heartbeat reached this active controller: the first one of each
        broker since the activation is recorded (`broker_heartbeat`: broker, epoch),
        when that broker found the new leader."""
        if broker_id in self._heard:
            return
        self._heard.add(broker_id)
        if self.events is not None:
            self.events.record("broker_heartbeat", broker=broker_id, epoch=self.active_epoch)

    def _renounce(self) -> None:
        log.warning(
            "controller %d renounces (epoch %d, leader now %d)",
            self.manager.node_id,
            self.active_epoch,
            self.manager.leader_id,
        )
        self.active = False
        self._own.clear()
        self.controller.revert_to_committed()
        if self.events is not None:
            self.events.record("controller_renounced", epoch=self.active_epoch)


def not_controller_body(api_key: ApiKeys, body: dict, message: str) -> dict:
    """The answer of a controller that is not active, in each API's shape."""
    code = int(Errors.NOT_CONTROLLER)
    if api_key == ApiKeys.CREATE_TOPICS:
        topics = [
            {"name": t["name"], "error_code": code, "error_message": message}
            for t in body["topics"]
        ]
        return {"throttle_time_ms": 0, "topics": topics}
    if api_key == ApiKeys.DELETE_TOPICS:
        names = body["topic_names"]
        return {
            "throttle_time_ms": 0,
            "responses": [{"name": n, "error_code": code} for n in names],
        }
    if api_key == ApiKeys.CREATE_PARTITIONS:
        results = [
            {"name": t["name"], "error_code": code, "error_message": message}
            for t in body["topics"]
        ]
        return {"throttle_time_ms": 0, "results": results}
    if api_key == ApiKeys.ALTER_PARTITION:
        return {"throttle_time_ms": 0, "error_code": code, "topics": []}
    if api_key == ApiKeys.BROKER_HEARTBEAT:
        return {
            "throttle_time_ms": 0,
            "error_code": code,
            "is_caught_up": False,
            "is_fenced": True,
            "should_shut_down": False,
        }
    if api_key == ApiKeys.BROKER_REGISTRATION:
        return {"throttle_time_ms": 0, "error_code": code, "broker_epoch": -1}
    if api_key == ApiKeys.ALLOCATE_PRODUCER_IDS:
        return {
            "throttle_time_ms": 0,
            "error_code": code,
            "producer_id_start": -1,
            "producer_id_len": 0,
        }
    if api_key == ApiKeys.ELECT_LEADERS:
        return {"throttle_time_ms": 0, "error_code": code, "replica_election_results": []}
    if api_key == ApiKeys.ALTER_PARTITION_REASSIGNMENTS:
        return {
            "throttle_time_ms": 0,
            "allow_replication_factor_change": body.get("allow_replication_factor_change", True),
            "error_code": code,
            "error_message": message,
            "responses": [],
        }
    if api_key == ApiKeys.LIST_PARTITION_REASSIGNMENTS:
        return {"throttle_time_ms": 0, "error_code": code, "error_message": message, "topics": []}
    if api_key in (ApiKeys.ALTER_CONFIGS, ApiKeys.INCREMENTAL_ALTER_CONFIGS):
        responses = [
            {
                "error_code": code,
                "error_message": message,
                "resource_type": r["resource_type"],
                "resource_name": r["resource_name"],
            }
            for r in body["resources"]
        ]
        return {"throttle_time_ms": 0, "responses": responses}
    raise ValueError(f"{api_key!r} is not an active controller's request")


class QuorumControllerApis(ControllerApis):
    """ControllerApis on a voter: KRaft's requests go to Raft, the active controller's
    to the QuorumController (answered once what they wrote is committed), and a
    standby answers NOT_CONTROLLER."""

    def __init__(
        self,
        controller: QuorumController,
        changes: MetadataLogChanges,
        quorum: QuorumMetaLogListener,
    ) -> None:
        super().__init__(controller, changes)
        self.quorum = quorum

    def received(self, header: RequestHeader, body: dict) -> None:
        if self.quorum.active:
            super().received(header, body)
            broker = body.get("broker_id", -1)
            if header.api_key == ApiKeys.BROKER_HEARTBEAT and self.quorum.manager.hears(broker):
                self.quorum.heard_from_broker(broker)  # (from a cut broker: dropped)

    def handle(self, header: RequestHeader, body: dict) -> Any:
        manager = self.quorum.manager
        key = ApiKeys(header.api_key)
        broker_fetch = key == ApiKeys.FETCH and fetching_replica(body) not in manager.voters
        if manager.handles(header) and not broker_fetch:
            return manager.handle_request(header, body)
        broker = body.get("replica_id" if key == ApiKeys.FETCH else "broker_id")
        if isinstance(broker, int) and broker >= 0 and not manager.hears(broker):
            # a cut link between this controller and that broker: always refused, also
            # in drop mode (a broker's channel to its controllers has no request timeout
            # yet, so a dropped request would hold it for good)
            return CLOSE_CONNECTION
        if key == ApiKeys.FETCH and not self.quorum.active:
            return with_current_leader(self._not_leader_fetch(body), manager)
        if key in ACTIVE_ONLY and not self.quorum.active:
            return not_controller_body(key, body, f"the active controller is {manager.leader_id}")
        before = self.quorum.last_appended
        try:
            result = super().handle(header, body)
        except KafkaError as e:  # NOT_CONTROLLER from the sink: leadership just went
            if e.code != Errors.NOT_CONTROLLER or key not in ACTIVE_ONLY:
                raise
            return not_controller_body(key, body, str(e))
        after = self.quorum.last_appended
        if key == ApiKeys.FETCH:  # a broker's metadata fetch: it names us the leader
            return with_current_leader(result, manager)
        if after == before:
            return result
        return self._when_committed(key, body, after, result)

    async def _when_committed(self, key: ApiKeys, body: dict, offset: int, result: Any) -> Any:
        try:
            await self.quorum.wait_for_commit(offset)
        except KafkaError as e:
            return not_controller_body(key, body, str(e))
        if hasattr(result, "__await__"):
            result = await result
        return result

    def _not_leader_fetch(self, body: dict) -> dict:
        topics = [
            {
                "topic": t["topic"],
                "partitions": [
                    {
                        "partition_index": p["partition"],
                        "error_code": int(Errors.NOT_LEADER_OR_FOLLOWER),
                        "high_watermark": -1,
                        "last_stable_offset": -1,
                        "log_start_offset": -1,
                        "aborted_transactions": None,
                        "preferred_read_replica": -1,
                        "records": b"",
                    }
                    for p in t["partitions"]
                ],
            }
            for t in body["topics"]
        ]
        return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": topics}


def fetching_replica(body: dict) -> int:
    """The replica id of a Fetch (ReplicaState's from v15 on, KIP-903)."""
    state = body.get("replica_state") or {}
    replica = state.get("replica_id", -1)
    return replica if replica >= 0 else body.get("replica_id", -1)


def with_current_leader(answer: Any, manager: KafkaRaftManager) -> Any:
    """A broker's metadata Fetch answer (or the coroutine of a long poll) with the
    leader this voter knows as each partition's CurrentLeader (Kafka's Fetch v12+,
    tagged): how brokers find the active controller (controller_channel.py)."""

    def name(response: dict) -> dict:
        current = {"leader_id": manager.leader_id, "leader_epoch": manager.epoch}
        for t in response.get("responses") or []:
            for p in t["partitions"]:
                p["current_leader"] = dict(current)
        return response

    if hasattr(answer, "__await__"):

        async def named() -> dict:
            return name(await answer)

        return named()
    return name(answer)


#: The node id of a controller with neither controller.quorum.voters nor node.id: the
#: first voter's id in LocalCluster's numbering (its SINGLE_CONTROLLER_ID).
STANDALONE_NODE_ID = 3001


def quorum_voters(
    props: dict[str, str], host: str, port: int
) -> tuple[int, dict[int, tuple[str, int]]]:
    """This controller's node id and the quorum's voters ({id: (host, port)}).

    With `controller.quorum.voters`, those (and `node.id`, one of them). Without it,
    a quorum of one, as Kafka 4's only mode makes a single controller
    (`kafka-storage format --standalone`): its own node id (`node.id`, or
    STANDALONE_NODE_ID) on its own listener, the only voter. A sole voter never
    dials a voter, so its port may be 0 (chosen when it binds)."""
    if not props.get("controller.quorum.voters"):
        node_id = int(props.get("node.id", STANDALONE_NODE_ID))
        return node_id, {node_id: (host, port)}
    voters = parse_quorum_voters(props["controller.quorum.voters"])
    if "node.id" not in props:
        raise ValueError("a controller in a quorum needs node.id (one of controller.quorum.voters)")
    return int(props["node.id"]), voters


def refuse_pre_quorum_directory(data_dir: Path) -> None:
    """A directory a single controller wrote before it ran as a quorum of one holds
    the QuorumController's records, not a Raft log, in `__cluster_metadata-0`
    (and no quorum-state file): refuse it rather than read it as Raft's log."""
    log_dir = data_dir / METADATA_LOG_DIR
    if any(log_dir.glob("*.log")) and not (log_dir / QUORUM_STATE_FILE).exists():
        raise StorageError(
            f"{log_dir} is a metadata log written by a kafkalab controller before it ran as "
            "a KRaft quorum of one (no quorum-state file): start the controller on an empty "
            "log.dirs (a new cluster), or run the kafkalab version that wrote it"
        )


def start_quorum(
    props: dict[str, str],
    data_dir: Path,
    controller: QuorumController,
    events: EventLog | None,
    node_id: int,
    voters: dict[int, tuple[str, int]],
) -> QuorumMetaLogListener:
    """The voter `node_id` of `voters` (quorum_voters), its Raft log in `data_dir`,
    joined to its QuorumController; `await listener.manager.start()` runs it."""
    segment_bytes = props.get("metadata.log.segment.bytes")
    manager = KafkaRaftManager(
        node_id,
        voters,
        data_dir,
        quorum_config(props),
        cluster_id=props.get("cluster.id"),
        link_faults=LinkFaults(data_dir),
        segment_bytes=int(segment_bytes) if segment_bytes else None,
        events=events,
    )
    max_bytes = int(
        props.get(
            "metadata.log.max.record.bytes.between.snapshots", MAX_RECORD_BYTES_BETWEEN_SNAPSHOTS
        )
    )
    interval_ms = int(props.get("metadata.log.max.snapshot.interval.ms", MAX_SNAPSHOT_INTERVAL_MS))
    return QuorumMetaLogListener(controller, manager, events, max_bytes, interval_ms)
