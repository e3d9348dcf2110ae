"""The controller on a KRaft quorum (Kafka: QuorumController's QuorumMetaLogListener,
activate() and renounce(), ControllerApis on a voter).

With `controller.quorum.voters` in its config, a controller process is one voter of a
quorum (KafkaRaftManager, its Raft log in `<log.dirs>/__cluster_metadata-0`), and its
QuorumController runs on it:

    - the active controller is the Raft leader, once the LeaderChange record of its
      epoch (and so every record before it) is committed and applied;
    - every batch the active controller writes goes first to Raft (QuorumController's
      `record_sink`: one Raft entry, the batch's records, as JSON); it is applied to
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
      leader it knows), so the broker tries the next controller.

The brokers still fetch the metadata log in the form they always did: each controller
keeps, in `<log.dirs>/metadata-image/__cluster_metadata-0`, the committed records in
the order Raft committed them (the same offsets on every controller, so a broker
epoch, the offset of its registration, is the same everywhere). It is rebuilt from
Raft at every start. (Kafka's brokers fetch the Raft log itself as observers; here
that is the next step, with metadata records in Kafka's binary format.)
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

from kafkalab.controller.quorum_controller import QuorumController
from kafkalab.errors import Errors, KafkaError
from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.protocol.header import RequestHeader
from kafkalab.raft.errors import NotLeaderError
from kafkalab.raft.leader_state import LeaderState
from kafkalab.raft.quorum_config import QuorumConfig
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

log = logging.getLogger(__name__)
__all__ = ["RAFT_CHANNEL_APIS", "QuorumControllerApis", "QuorumMetaLogListener", "start_quorum"]

METADATA_IMAGE_DIR = "metadata-image"
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


def controller_directory(data_dir: Path) -> Path:
    """Where a voter's QuorumController keeps the committed records brokers fetch:
    emptied at start (Raft's log is the truth; this is rebuilt from it)."""
    directory = data_dir / METADATA_IMAGE_DIR
    shutil.rmtree(directory, ignore_errors=True)
    return directory


class QuorumMetaLogListener:
    """Joins one QuorumController to one KafkaRaftManager."""

    def __init__(
        self, controller: QuorumController, manager: KafkaRaftManager, events: EventLog | None
    ) -> None:
        self.controller = controller
        self.manager = manager
        self.events = events
        self.active = False
        self.active_epoch = -1
        self.applied = 0  # Raft offsets below this are applied to the image
        self.last_appended = -1  # the last Raft offset this controller appended
        self._own: dict[int, int] = {}  # Raft offset -> local end offset after it
        self._heard: set[int] = set()  # brokers heard from since this activation
        controller.record_sink = self._sink
        manager.add_listener(self._on_step)

    # -- writing ---------------------------------------------------------------------------

    def _sink(self, records: tuple[dict, ...]) -> None:
        if not self.active or not self.manager.is_leader():
            raise KafkaError(
                Errors.NOT_CONTROLLER,
                f"controller {self.manager.node_id} is not the active controller "
                f"(the leader is {self.manager.leader_id})",
            )
        try:
            offset = self.manager.append([list(records)])
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

    # -- every step of Raft --------------------------------------------------------------

    def _on_step(self, manager: KafkaRaftManager) -> None:
        if self.active and (not manager.is_leader() or manager.epoch != self.active_epoch):
            self._renounce()
        self._apply_committed()
        if not self.active and manager.is_leader():
            state = manager.client.quorum.state
            if isinstance(state, LeaderState) and self.applied > state.epoch_start_offset:
                self._activate()

    def _apply_committed(self) -> None:
        hw = self.manager.high_watermark
        if self.applied >= hw:
            return
        c = self.controller
        for entry in self.manager.log.read(self.applied, hw - self.applied):
            if isinstance(entry.record, list):
                local_end = self._own.pop(entry.offset, None)
                if local_end is None:  # another controller's write (or ours of an old epoch)
                    sink, c.record_sink = c.record_sink, None
                    try:
                        c._write(*entry.record)
                    finally:
                        c.record_sink = sink
                    local_end = c.log.log_end_offset
                c.log.update_high_watermark(local_end)
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
        if manager.handles(header):
            return manager.handle_request(header, body)
        key = ApiKeys(header.api_key)
        broker = body.get("replica_id" if key == ApiKeys.FETCH else "broker_id")
        if isinstance(broker, int) and broker >= 0 and not manager.hears(broker):
            # a cut link between this controller and that broker: always refused, also
            # in drop mode (a broker's channel to its controllers has no request timeout
            # yet, so a dropped request would hold it for good)
            return CLOSE_CONNECTION
        if key == ApiKeys.FETCH and not self.quorum.active:
            return self._not_leader_fetch(body)
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


def start_quorum(
    props: dict[str, str],
    data_dir: Path,
    controller: QuorumController,
    events: EventLog | None,
) -> QuorumMetaLogListener:
    """The voter of this controller (`node.id`, `controller.quorum.voters`), joined to
    its QuorumController; `await listener.manager.start()` runs it."""
    voters = parse_quorum_voters(props["controller.quorum.voters"])
    if "node.id" not in props:
        raise ValueError("a controller in a quorum needs node.id (one of controller.quorum.voters)")
    manager = KafkaRaftManager(
        int(props["node.id"]),
        voters,
        data_dir,
        quorum_config(props),
        cluster_id=props.get("cluster.id"),
        link_faults=LinkFaults(data_dir),
        events=events,
    )
    return QuorumMetaLogListener(controller, manager, events)
