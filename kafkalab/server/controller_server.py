"""The controller process: QuorumController on the network. `kafkalab controller CONFIG`.

Kafka's classes: kafka.server.ControllerServer and ControllerApis. The same
network layer as a broker (kafkalab.server.socket_server), speaking the
controller's APIs:

    BrokerRegistration (62)  a broker starts: it gets a broker epoch
    BrokerHeartbeat (63)     a broker is alive (the first one unfences it)
    AlterPartition (56)      a leader changes its ISR
    CreateTopics / DeleteTopics (19, 20)
    CreatePartitions (37)    grow a topic (new PartitionRecords)
    ElectLeaders (43)        preferred or unclean elections, by hand
    AlterPartitionReassignments (45), ListPartitionReassignments (46)
                             move replicas (PartitionChangeRecords with adding and
                             removing replicas), and list the moves in progress
    AlterConfigs (33), IncrementalAlterConfigs (44)
                             topic and broker configs (ConfigRecords), sent on
                             by the broker that got them
    Fetch (1)                brokers read `__cluster_metadata-0`, the metadata log,
                             from the offset they have, like any partition

A background task fences brokers that stop heartbeating
(`broker.session.timeout.ms`), which moves their leaderships, and, with
`auto.leader.rebalance.enable` (default true), runs a preferred leader
election every `leader.imbalance.check.interval.seconds` (default 300), so
leadership goes back to each partition's first replica once it is in sync
again. (Kafka also waits for `leader.imbalance.per.broker.percentage`; we
rebalance any imbalance.)

The controller always runs on a KRaft quorum (kafkalab/server/quorum_meta_log_listener.py):
with `controller.quorum.voters` (and `node.id`) in its config it is one voter of those,
and only the active one (the Raft leader) writes, fences and answers brokers; without,
it is a quorum of one (`node.id`, default 3001, on its own listener: the only voter),
active once it has elected itself and replayed its log, which `start()` waits for.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import threading
from pathlib import Path
from typing import Any

from kafkalab.controller.quorum_controller import METADATA_TOPIC, QuorumController
from kafkalab.errors import Errors, KafkaError
from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.protocol.header import RequestHeader
from kafkalab.protocol.messages import CONTROLLER_APIS, api_versions_body
from kafkalab.server.apis.configs import created_topic_configs
from kafkalab.server.broker import run_from_command_line, serve
from kafkalab.server.clock import ProcessClock, monotonic_ms
from kafkalab.server.config import parse_listener
from kafkalab.server.events import EventLog
from kafkalab.server.link_faults import LinkFaults
from kafkalab.server.socket_server import CLOSE_CONNECTION, SocketServer
from kafkalab.storage.errors import StorageError
from kafkalab.storage.file_lock import FileLock
from kafkalab.storage.log_config import LogConfig

log = logging.getLogger(__name__)
TICK_SECONDS = 0.25
#: how long a quorum of one may take to lead and replay its log before start() fails
STANDALONE_ACTIVATION_TIMEOUT_S = 120.0


def _now_ms() -> int:
    """The controller's session timers' clock: monotonic, as Kafka's
    BrokerHeartbeatManager (System.nanoTime), so a stepped wall clock fences no one."""
    return monotonic_ms()


def hears_broker(link_faults: LinkFaults | None, header: RequestHeader, body: dict) -> bool:
    """False for a broker's request (its id in `broker_id`, or a Fetch's `replica_id`)
    while a cut link makes the controller deaf to that broker."""
    if link_faults is None:
        return True
    key = header.api_key
    broker = body.get("replica_id" if key == ApiKeys.FETCH else "broker_id")
    if not isinstance(broker, int) or broker < 0:
        return True
    link_faults.refresh()
    return link_faults.hears(broker)


class ControllerApis:
    """One handler per controller API; KafkaError codes go back on the wire."""

    #: The brokers this controller is deaf to (kafkalab's cut links, link_faults.py):
    #: their requests are dropped, the connection closed. Set by ControllerServer.
    link_faults: LinkFaults | None = None

    def __init__(self, controller: QuorumController, changes: MetadataLogChanges) -> None:
        self.controller = controller
        self.changes = changes

    def handle(self, header: RequestHeader, body: dict) -> Any:
        if not hears_broker(self.link_faults, header, body):
            return CLOSE_CONNECTION
        handler = {
            ApiKeys.FETCH: self.fetch,
            ApiKeys.API_VERSIONS: self.api_versions,
            ApiKeys.CREATE_TOPICS: self.create_topics,
            ApiKeys.DELETE_TOPICS: self.delete_topics,
            ApiKeys.CREATE_PARTITIONS: self.create_partitions,
            ApiKeys.ALTER_PARTITION: self.alter_partition,
            ApiKeys.BROKER_REGISTRATION: self.register_broker,
            ApiKeys.BROKER_HEARTBEAT: self.heartbeat,
            ApiKeys.ALLOCATE_PRODUCER_IDS: self.allocate_producer_ids,
            ApiKeys.ELECT_LEADERS: self.elect_leaders,
            ApiKeys.ALTER_PARTITION_REASSIGNMENTS: self.alter_partition_reassignments,
            ApiKeys.LIST_PARTITION_REASSIGNMENTS: self.list_partition_reassignments,
            ApiKeys.ALTER_CONFIGS: self.alter_configs,
            ApiKeys.INCREMENTAL_ALTER_CONFIGS: self.incremental_alter_configs,
        }[header.api_key]
        result = handler(body)
        self.changes.observe()  # wake long-polling brokers, record fences and elections
        return result

    def received(self, header: RequestHeader, body: dict) -> None:
        """A request was read off a connection, before it waits for the handler: a
        heartbeat counts as contact now (Kafka's BrokerHeartbeatTracker records
        the contact time before the heartbeat goes through the controller's
        event queue), so a controller busy with a long queue (AlterPartition
        batches, fsyncs on a loaded disk) does not fence the brokers whose
        heartbeats wait in it."""
        if not hears_broker(self.link_faults, header, body):
            return  # a cut link: this heartbeat never arrived
        if header.api_key == ApiKeys.BROKER_HEARTBEAT and not body["want_shut_down"]:
            self.controller.note_contact(body["broker_id"], body["broker_epoch"], _now_ms())

    def api_versions(self, body: dict) -> dict:
        return api_versions_body(CONTROLLER_APIS)

    def register_broker(self, body: dict) -> dict:
        listener = body["listeners"][0] if body["listeners"] else {"host": "", "port": 0}
        epoch = self.controller.register_broker(
            body["broker_id"],
            listener["host"],
            listener["port"],
            str(body["incarnation_id"]),
            _now_ms(),
            [(x["name"], x["host"], x["port"]) for x in body["listeners"]],
        )
        return {"throttle_time_ms": 0, "error_code": 0, "broker_epoch": epoch}

    def allocate_producer_ids(self, body: dict) -> dict:
        """The broker's next block of producer ids, recorded before it is given."""
        out = {
            "throttle_time_ms": 0,
            "error_code": 0,
            "producer_id_start": -1,
            "producer_id_len": 0,
        }
        try:
            start, length = self.controller.allocate_producer_ids(
                body["broker_id"], body["broker_epoch"]
            )
            out.update(producer_id_start=start, producer_id_len=length)
        except KafkaError as e:
            out["error_code"] = int(e.code)
        return out

    def heartbeat(self, body: dict) -> dict:
        out = {
            "throttle_time_ms": 0,
            "error_code": 0,
            "is_caught_up": True,
            "is_fenced": True,
            "should_shut_down": False,
        }
        try:
            if body["want_shut_down"]:
                self.controller.fence_broker(body["broker_id"], _now_ms())
                out["should_shut_down"] = True
            else:
                out["is_fenced"] = self.controller.heartbeat(
                    body["broker_id"], body["broker_epoch"], _now_ms()
                )
                out["is_caught_up"] = (
                    body["current_metadata_offset"] >= self.controller.metadata_offset - 1
                )
        except KafkaError as e:
            out["error_code"] = int(e.code)
        return out

    def alter_partition(self, body: dict) -> dict:
        """Every partition of the request is judged, and the accepted changes are
        written as one batch (one flush), not one write a partition."""
        asked = [
            (
                topic["topic_name"],
                p["partition_index"],
                p["leader_epoch"],
                p["partition_epoch"],
                p["new_isr"],
            )
            for topic in body["topics"]
            for p in topic["partitions"]
        ]
        outcomes = iter(
            self.controller.alter_partitions(body["broker_id"], body["broker_epoch"], asked)
        )
        topics = []
        for topic in body["topics"]:
            partitions = []
            for p in topic["partitions"]:
                result = {
                    "partition_index": p["partition_index"],
                    "error_code": 0,
                    "leader_id": -1,
                    "leader_epoch": -1,
                    "isr": [],
                    "partition_epoch": -1,
                }
                outcome = next(outcomes)
                if isinstance(outcome, KafkaError):
                    result["error_code"] = int(outcome.code)
                else:
                    result.update(
                        leader_id=outcome.leader,
                        leader_epoch=outcome.leader_epoch,
                        isr=outcome.isr,
                        partition_epoch=outcome.partition_epoch,
                    )
                partitions.append(result)
            topics.append({"topic_name": topic["topic_name"], "partitions": partitions})
        return {"throttle_time_ms": 0, "error_code": 0, "topics": topics}

    def create_topics(self, body: dict) -> dict:
        """Each topic created, or Kafka's error for it (Kafka: ReplicationControlManager.
        createTopics). A created topic is answered with its TopicRecord's id, its
        partitions, replication factor and configs (v5+, v7+ for the id; the configs as
        DescribeConfigs gives them, from Kafka's defaults: a controller has no broker's
        static config); one that failed with -1s and null configs. With validate_only,
        every check is made and nothing written; the answer is the same."""
        out = []
        for t in body["topics"]:
            error, message = Errors.NONE, None
            configs = {c["name"]: c["value"] for c in t["configs"] if c["value"] is not None}
            result: dict = {"name": t["name"]}
            try:
                assignments = {a["partition_index"]: a["broker_ids"] for a in t["assignments"]}
                topic_id, placed = self.controller.create_topic(
                    t["name"],
                    # -1: the default (one); 0 or below -1 is refused, as Kafka does
                    1 if t["num_partitions"] == -1 else t["num_partitions"],
                    1 if t["replication_factor"] == -1 else t["replication_factor"],
                    configs,
                    assignments or None,
                    validate_only=body["validate_only"],
                )
                result.update(
                    topic_id=topic_id,
                    num_partitions=len(placed),
                    replication_factor=len(next(iter(placed.values()))),
                    configs=created_topic_configs(LogConfig(), configs),
                )
            except KafkaError as e:
                error, message = e.code, str(e)
            except (ValueError, StorageError) as e:
                error, message = Errors.INVALID_CONFIG, str(e)
            result.update(error_code=int(error), error_message=message)
            out.append(result)
        return {"throttle_time_ms": 0, "topics": out}

    def delete_topics(self, body: dict) -> dict:
        out = []
        for name in body["topic_names"]:
            try:
                self.controller.delete_topic(name)
                out.append({"name": name, "error_code": 0})
            except KafkaError as e:
                out.append({"name": name, "error_code": int(e.code)})
        return {"throttle_time_ms": 0, "responses": out}

    def create_partitions(self, body: dict) -> dict:
        """Each topic grown, or Kafka's error for it; the other topics of the
        request go on (Kafka: ControllerApis.handleCreatePartitions)."""
        out = []
        seen: set[str] = set()
        for t in body["topics"]:
            error, message = Errors.NONE, None
            try:
                if t["name"] in seen:
                    raise KafkaError(
                        Errors.INVALID_REQUEST, f"Duplicate topic name {t['name']} in the request."
                    )
                seen.add(t["name"])
                assignments = t["assignments"]
                self.controller.create_partitions(
                    t["name"],
                    t["count"],
                    None if assignments is None else [a["broker_ids"] for a in assignments],
                    body["validate_only"],
                )
            except KafkaError as e:
                error, message = e.code, e.message
            out.append({"name": t["name"], "error_code": int(error), "error_message": message})
        return {"throttle_time_ms": 0, "results": out}

    def elect_leaders(self, body: dict) -> dict:
        """Each partition's election, or Kafka's error for it (Kafka:
        ReplicationControlManager.electLeaders)."""
        asked = body["topic_partitions"]
        named = None if asked is None else [(t["topic"], p) for t in asked for p in t["partitions"]]
        by_topic: dict[str, list[dict]] = {}
        try:
            results = self.controller.elect_leaders(body["election_type"], named)
        except KafkaError as e:
            return {
                "throttle_time_ms": 0,
                "error_code": int(e.code),
                "replica_election_results": [],
            }
        for topic, p, error, message in results:
            by_topic.setdefault(topic, []).append(
                {"partition_id": p, "error_code": int(error), "error_message": message}
            )
        return {
            "throttle_time_ms": 0,
            "error_code": 0,
            "replica_election_results": [
                {"topic": t, "partition_result": results} for t, results in by_topic.items()
            ],
        }

    def alter_partition_reassignments(self, body: dict) -> dict:
        """Start, change or cancel each partition's reassignment (Kafka:
        ReplicationControlManager.alterPartitionReassignments)."""
        asked = [
            (t["name"], p["partition_index"], p["replicas"])
            for t in body["topics"]
            for p in t["partitions"]
        ]
        allow = body.get("allow_replication_factor_change", True)
        by_topic: dict[str, list[dict]] = {}
        for topic, p, error, message in self.controller.alter_partition_reassignments(asked, allow):
            by_topic.setdefault(topic, []).append(
                {"partition_index": p, "error_code": int(error), "error_message": message}
            )
        return {
            "throttle_time_ms": 0,
            "allow_replication_factor_change": allow,
            "error_code": 0,
            "error_message": None,
            "responses": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
        }

    def list_partition_reassignments(self, body: dict) -> dict:
        asked = body["topics"]
        named = None if asked is None else [(t["name"], t["partition_indexes"]) for t in asked]
        ongoing = self.controller.list_partition_reassignments(named)
        return {
            "throttle_time_ms": 0,
            "error_code": 0,
            "error_message": None,
            "topics": [
                {
                    "name": name,
                    "partitions": [
                        {
                            "partition_index": p,
                            "replicas": part.replicas,
                            "adding_replicas": part.adding_replicas,
                            "removing_replicas": part.removing_replicas,
                        }
                        for p, part in sorted(parts.items())
                    ],
                }
                for name, parts in sorted(ongoing.items())
            ],
        }

    def alter_configs(self, body: dict) -> dict:
        """AlterConfigs from a broker, which has checked it (ConfigAdminManager);
        every accepted resource's ConfigRecords in one batch."""
        return self._alter_configs(body, incremental=False)

    def incremental_alter_configs(self, body: dict) -> dict:
        return self._alter_configs(body, incremental=True)

    def _alter_configs(self, body: dict, incremental: bool) -> dict:
        resources = [
            (
                r["resource_type"],
                r["resource_name"],
                [(c["name"], c["config_operation"], c["value"]) for c in r["configs"]]
                if incremental
                else {c["name"]: c["value"] for c in r["configs"]},
            )
            for r in body["resources"]
        ]
        outcomes = self.controller.alter_configs(resources, incremental, body["validate_only"])
        return {
            "throttle_time_ms": 0,
            "responses": [
                {
                    "error_code": 0 if e is None else int(e.code),
                    "error_message": None if e is None else e.message,
                    "resource_type": r["resource_type"],
                    "resource_name": r["resource_name"],
                }
                for r, e in zip(body["resources"], outcomes, strict=True)
            ],
        }

    def fetch(self, body: dict) -> Any:
        """Only the metadata log can be fetched here; it is readable up to its end
        (every record is flushed before the controller acts on it). A broker that
        has everything waits up to max_wait_ms for the next record (a long poll,
        as KRaft brokers fetch the metadata log), so it learns a fence or an
        election as soon as it is written, not at its next heartbeat."""
        offsets = [p["fetch_offset"] for t in body["topics"] for p in t["partitions"]]
        end = self.controller.metadata_offset
        if body["max_wait_ms"] > 0 and offsets and min(offsets) >= end:

            async def when_appended() -> dict:
                await self.changes.wait_beyond(end, body["max_wait_ms"] / 1000)
                return self._fetch_now(body)

            return when_appended()
        return self._fetch_now(body)

    def _fetch_now(self, body: dict) -> dict:
        metadata_log = self.controller.log
        topics = []
        for t in body["topics"]:
            partitions = []
            for p in t["partitions"]:
                out = {
                    "partition_index": p["partition"],
                    "error_code": 0,
                    "high_watermark": metadata_log.high_watermark,
                    "last_stable_offset": -1,
                    "log_start_offset": metadata_log.log_start_offset,
                    "aborted_transactions": None,
                    "preferred_read_replica": -1,
                    "records": b"",
                }
                if t["topic"] != METADATA_TOPIC or p["partition"] != 0:
                    out["error_code"] = int(Errors.UNKNOWN_TOPIC_OR_PARTITION)
                elif (
                    metadata_log.log_start_offset
                    < p["fetch_offset"]
                    < self.controller.snapshot_end_offset
                ):
                    # inside the snapshot this log starts with (a KRaft snapshot loaded
                    # here): the fetcher starts over at the log start
                    out["error_code"] = int(Errors.OFFSET_OUT_OF_RANGE)
                else:
                    try:
                        info = metadata_log.read(
                            p["fetch_offset"],
                            p["partition_max_bytes"],
                            max_offset=metadata_log.high_watermark,  # committed records only
                        )
                        out["records"] = info.records if info.records is not None else b""
                    except KafkaError as e:
                        out["error_code"] = int(e.code)
                partitions.append(out)
            topics.append({"topic": t["topic"], "partitions": partitions})
        return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": topics}


class MetadataLogChanges:
    """Watches the metadata log's end: wakes the brokers' long-polling fetches when
    it grows, and records fences and elections in the controller's EventLog."""

    def __init__(self, controller: QuorumController, events: EventLog) -> None:
        self.controller = controller
        self.events = events
        self.seen = controller.metadata_offset
        self._grown = asyncio.Event()

    def observe(self) -> None:
        end = self.controller.metadata_offset
        if end == self.seen:
            return
        changes = self.controller.partition_changes
        for offset, record in self.controller.records_since(self.seen):
            if record["type"] == "FenceBrokerRecord":
                self.events.record("fenced", broker=record["broker_id"])
            elif record["type"] == "PartitionChangeRecord" and offset in changes:
                # the partition as the record left it, and why (QuorumController
                # keeps both: Kafka's record holds only what changed)
                self.events.record("partition_change", **changes.pop(offset))
        self.seen = end
        self._grown.set()
        self._grown = asyncio.Event()

    async def wait_beyond(self, offset: int, timeout_s: float) -> None:
        """Return once the log ends past `offset`, or after `timeout_s`."""
        if self.controller.metadata_offset > offset:
            return
        try:
            await asyncio.wait_for(self._grown.wait(), timeout_s)
        except TimeoutError:
            pass


class ControllerServer:
    """The controller on the running event loop: `await start()`, `await stop()`."""

    def __init__(self, props: dict[str, str]) -> None:
        self.props = props
        self.server: SocketServer | None = None
        self.quorum: Any = None  # its QuorumMetaLogListener, once started
        self._ticker: asyncio.Task | None = None
        self._stopped = asyncio.Event()

    async def start(self) -> None:
        # the controller always runs on a KRaft quorum (quorum_meta_log_listener.py),
        # which imports this module's ControllerApis and MetadataLogChanges
        from kafkalab.server import quorum_meta_log_listener as kraft

        directory = self.props.get("log.dirs", self.props.get("metadata.log.dir", ""))
        if not directory:
            raise ValueError("the controller needs log.dirs (where its metadata log lives)")
        data_dir = Path(directory.split(",")[0])
        self._lock = FileLock(data_dir).lock()  # one controller a directory
        _, host, port = parse_listener(self.props.get("listeners", "CONTROLLER://127.0.0.1:0"))
        try:
            node_id, voters = kraft.quorum_voters(self.props, host, port)
            kraft.refuse_pre_quorum_directory(data_dir)
            # Raft's log is the truth; the QuorumController's own log, which brokers
            # fetch, a copy of what the quorum committed, rebuilt from it at start
            self.controller = QuorumController(
                kraft.controller_directory(data_dir),
                session_timeout_ms=int(self.props.get("broker.session.timeout.ms", 9000)),
                clock=ProcessClock(data_dir).wall_ms,  # kafkalab's clock faults
                unclean_leader_election_enable=(
                    self.props.get("unclean.leader.election.enable", "false").lower() == "true"
                ),
            )
        except BaseException:
            self._lock.unlock()
            raise
        self.events = EventLog(data_dir, "controller")
        self.changes = MetadataLogChanges(self.controller, self.events)
        self.quorum = kraft.start_quorum(
            self.props, data_dir, self.controller, self.events, node_id, voters
        )
        self.server = SocketServer(
            kraft.QuorumControllerApis(self.controller, self.changes, self.quorum),
            host,
            port,
            max_request_bytes=100 * 1024 * 1024,
            queued_max_requests=500,
            num_handlers=1,
            schemas={**CONTROLLER_APIS, **kraft.RAFT_CHANNEL_APIS},
        )
        await self.server.start()
        self.server.apis.link_faults = LinkFaults(data_dir)  # a broker cut from us
        self.address = f"{host}:{self.server.bound_port}"
        await self.quorum.manager.start()
        if set(voters) == {node_id}:
            # a quorum of one leads at its first step: serve as the active controller
            # from the start, its log replayed and every broker's session restarted
            try:
                await self.quorum.wait_until_active(STANDALONE_ACTIVATION_TIMEOUT_S)
            except BaseException:
                await self.stop()
                raise
        self._ticker = asyncio.create_task(self._tick())

    async def _tick(self) -> None:
        rebalance = self.props.get("auto.leader.rebalance.enable", "true").lower() == "true"
        interval_ms = 1000 * float(self.props.get("leader.imbalance.check.interval.seconds", 300))
        next_rebalance = _now_ms() + interval_ms
        # Check sessions often enough that a fence comes close to the timeout itself.
        tick_s = min(TICK_SECONDS, self.controller.session_timeout_ms / 10_000)
        while True:
            await asyncio.sleep(tick_s)
            if not self.quorum.active:
                self.changes.observe()  # a standby fences nobody: it follows the log
                continue
            fenced = self.controller.tick(_now_ms())
            self.changes.observe()
            if fenced:
                log.warning("fenced brokers %s: no heartbeat for broker.session.timeout.ms", fenced)
            if rebalance and _now_ms() >= next_rebalance:
                next_rebalance = _now_ms() + interval_ms
                changes = self.controller.elect_preferred_leaders()
                self.changes.observe()
                for change in changes:
                    log.info(
                        "preferred leader election: %s-%d led by broker %d",
                        self.controller.image.topic_name(change["topic_id"]),
                        change["partition"],
                        change["leader"],
                    )

    async def stop(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
        if self.server is not None:
            await self.server.stop()
        if self.quorum is not None:
            await self.quorum.manager.stop()
        self.controller.close()
        self.events.close()
        self._lock.unlock()
        self._stopped.set()

    async def serve_forever(self) -> None:
        await self._stopped.wait()


class ControllerThread:
    """A controller on its own event loop in a background thread (tests, labs)."""

    def __init__(self, props: dict[str, str]) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, daemon=True, name="kafkalab-controller"
        )
        self.server = ControllerServer(props)

    def call(self, fn, *args) -> Any:
        """Run `fn(controller, *args)` on the controller's loop (it is not thread safe)."""

        async def run():
            return fn(self.server.controller, *args)

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(30)

    def __enter__(self) -> ControllerThread:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self._loop).result(30)
        return self

    def __exit__(self, *exc) -> None:
        asyncio.run_coroutine_threadsafe(self.server.stop(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()


async def _run(props: dict[str, str]) -> None:
    server = ControllerServer(props)
    await serve(
        server,
        lambda: f"kafkalab controller listening on {server.address}",
        "kafkalab controller stopped",
    )


def add_subcommand(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "controller",
        help="run a cluster controller: a KRaft quorum of one, or a voter of "
        "controller.quorum.voters",
    )
    parser.add_argument(
        "config",
        type=Path,
        help="properties: listeners, log.dirs, node.id (default 3001), "
        "controller.quorum.voters (default: this controller alone), "
        "broker.session.timeout.ms, unclean.leader.election.enable",
    )
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE")
    parser.set_defaults(func=_main)


def _main(args: argparse.Namespace) -> int:
    return run_from_command_line(args, _run)
