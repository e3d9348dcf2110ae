"""KafkaApis: one handler per API, turning a decoded request into a response.

Kafka's class: kafka.server.KafkaApis. Handlers get the request header and
body (dicts as declared in kafkalab.protocol.messages) and return the response
body, or an asyncio Future of it when the request waits in a purgatory (a
fetch with min_bytes not yet there), or None when no response is sent
(acks=0 produce). They never touch sockets.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from kafkalab.protocol.errors import Errors, KafkaError
from kafkalab.protocol.header import RequestHeader
from kafkalab.protocol.messages import APIS, api_versions_body
from kafkalab.replication.delayed_operation import DelayedOperation
from kafkalab.replication.replica_manager import (
    LEADER_EPOCH,
    AppendResult,
    DelayedProduce,
    ReplicaManager,
)
from kafkalab.server.producer_ids import ProducerIdManager
from kafkalab.server.socket_server import CLOSE_CONNECTION
from kafkalab.storage.log_config import InvalidConfigError
from kafkalab.storage.log_manager import check_topic_name
from kafkalab.storage.unified_log import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
)

log = logging.getLogger(__name__)

READ_COMMITTED = 1


class KafkaApis:
    def __init__(
        self, broker: Any, replica_manager: ReplicaManager, producer_ids: ProducerIdManager
    ) -> None:
        self.broker = broker  # node id, advertised address, config
        self.replica_manager = replica_manager
        self.producer_ids = producer_ids
        self._handlers = {
            0: self.handle_produce,
            1: self.handle_fetch,
            2: self.handle_list_offsets,
            3: self.handle_metadata,
            18: self.handle_api_versions,
            19: self.handle_create_topics,
            20: self.handle_delete_topics,
            22: self.handle_init_producer_id,
            23: self.handle_offset_for_leader_epoch,
        }

    def handle(self, header: RequestHeader, body: dict) -> Any:
        return self._handlers[header.api_key](header, body)

    # -- ApiVersions ------------------------------------------------------------------------

    def handle_api_versions(self, header: RequestHeader, body: dict) -> dict:
        return api_versions_body(APIS)

    # -- Metadata ---------------------------------------------------------------------------

    def handle_metadata(self, header: RequestHeader, body: dict) -> Any:
        lifecycle = getattr(self.broker, "lifecycle", None)
        if lifecycle is not None:
            return self._cluster_metadata(header, body, lifecycle)
        topics = self.replica_manager.topics()
        requested = body["topics"]
        if requested is None or (header.api_version == 0 and not requested):
            names = sorted(topics)
        else:
            names = [t["name"] for t in requested]
        allow_create = self.broker.config.auto_create_topics_enable and (
            header.api_version < 4 or body["allow_auto_topic_creation"]
        )
        out = []
        for name in names:
            if name not in topics and allow_create:
                try:
                    check_topic_name(name)
                    self.replica_manager.create_topic(name, self.broker.config.num_partitions)
                    topics[name] = self.broker.config.num_partitions
                except ValueError:
                    out.append(self._topic_error(name, Errors.INVALID_TOPIC_EXCEPTION))
                    continue
            if name not in topics:
                out.append(self._topic_error(name, Errors.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            node = self.broker.config.node_id
            out.append(
                {
                    "error_code": 0,
                    "name": name,
                    "is_internal": False,
                    "partitions": [
                        {
                            "error_code": 0,
                            "partition_index": p,
                            "leader_id": node,
                            "leader_epoch": LEADER_EPOCH,
                            "replica_nodes": [node],
                            "isr_nodes": [node],
                            "offline_replicas": [],
                        }
                        for p in range(topics[name])
                    ],
                }
            )
        host, port = self.broker.advertised_address
        return {
            "throttle_time_ms": 0,
            "brokers": [
                {"node_id": self.broker.config.node_id, "host": host, "port": port, "rack": None}
            ],
            "cluster_id": self.broker.config.cluster_id,
            "controller_id": self.broker.config.node_id,
            "topics": out,
        }

    def _cluster_metadata(self, header: RequestHeader, body: dict, lifecycle: Any) -> Any:
        """Brokers, leaders, ISRs and epochs from the metadata image; unknown topics
        are created through the controller when allowed."""
        image = lifecycle.image
        requested = body["topics"]
        names = (
            sorted(image.topics)
            if requested is None or (header.api_version == 0 and not requested)
            else [t["name"] for t in requested]
        )
        allow_create = self.broker.config.auto_create_topics_enable and (
            header.api_version < 4 or body["allow_auto_topic_creation"]
        )
        missing = [n for n in names if n not in image.topics]
        if missing and allow_create:

            async def create_then_answer():
                await lifecycle.forward(
                    19,
                    {
                        "topics": [
                            {
                                "name": n,
                                "num_partitions": self.broker.config.num_partitions,
                                "replication_factor": self.broker.config.default_replication_factor,
                                "assignments": [],
                                "configs": [],
                            }
                            for n in missing
                        ],
                        "timeout_ms": 30_000,
                        "validate_only": False,
                    },
                )
                await lifecycle._fetch_metadata()
                return self._cluster_metadata_body(image, names, missing=[])

            return asyncio.ensure_future(create_then_answer())
        return self._cluster_metadata_body(image, names, missing)

    def _cluster_metadata_body(self, image: Any, names: list[str], missing: list[str]) -> dict:
        topics = []
        for name in names:
            info = image.topics.get(name)
            if info is None:
                topics.append(self._topic_error(name, Errors.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            topics.append(
                {
                    "error_code": 0,
                    "name": name,
                    "is_internal": False,
                    "partitions": [
                        {
                            "error_code": 0 if p.leader >= 0 else int(Errors.LEADER_NOT_AVAILABLE),
                            "partition_index": i,
                            "leader_id": p.leader,
                            "leader_epoch": p.leader_epoch,
                            "replica_nodes": p.replicas,
                            "isr_nodes": p.isr,
                            "offline_replicas": [
                                r
                                for r in p.replicas
                                if r not in image.brokers or image.brokers[r].fenced
                            ],
                        }
                        for i, p in sorted(info.partitions.items())
                    ],
                }
            )
        brokers = [
            {"node_id": b.broker_id, "host": b.host, "port": b.port, "rack": None}
            for b in image.brokers.values()
            if not b.fenced
        ]
        return {
            "throttle_time_ms": 0,
            "brokers": brokers,
            "cluster_id": self.broker.config.cluster_id,
            "controller_id": brokers[0]["node_id"] if brokers else -1,
            "topics": topics,
        }

    @staticmethod
    def _topic_error(name: str, error: Errors) -> dict:
        return {"error_code": int(error), "name": name, "is_internal": False, "partitions": []}

    # -- Produce ----------------------------------------------------------------------------

    def handle_produce(self, header: RequestHeader, body: dict) -> Any:
        """Append to each partition; acks=all answers once the ISR has the records
        (a DelayedProduce in the purgatory), acks=0 not at all."""
        acks = body["acks"]
        results: dict[tuple[str, int], AppendResult] = {}
        for topic in body["topics"]:
            for part in topic["partitions"]:
                tp = (topic["name"], part["partition_index"])
                if acks not in (0, 1, -1):
                    results[tp] = AppendResult(Errors.INVALID_REQUIRED_ACKS)
                    continue
                results[tp] = self.replica_manager.append_records(
                    tp[0], tp[1], part["records"], acks
                )
                if results[tp].message and results[tp].error != Errors.NONE:
                    log.info("produce to %s-%d refused: %s", *tp, results[tp].message)
        if acks == 0:
            return None  # the client does not read a response
        if acks == -1:
            waiting = {tp: r for tp, r in results.items() if r.error == Errors.NONE}
            if waiting:
                future = asyncio.get_running_loop().create_future()
                op = DelayedProduce(
                    body["timeout_ms"],
                    self.replica_manager,
                    waiting,
                    lambda _: future.done() or future.set_result(self._produce_response(results)),
                )
                if not self.replica_manager.delayed_produce.try_complete_else_watch(
                    op, list(waiting)
                ):
                    return future
        return self._produce_response(results)

    @staticmethod
    def _produce_response(results: dict[tuple[str, int], AppendResult]) -> dict:
        topics: dict[str, list[dict]] = {}
        for (topic, index), r in results.items():
            topics.setdefault(topic, []).append(
                {
                    "partition_index": index,
                    "error_code": int(r.error),
                    "base_offset": r.base_offset,
                    "log_append_time_ms": r.log_append_time,
                    "log_start_offset": r.log_start_offset,
                    "record_errors": [],
                    "error_message": r.message,
                }
            )
        return {
            "responses": [{"name": t, "partitions": p} for t, p in topics.items()],
            "throttle_time_ms": 0,
        }

    # -- Fetch ------------------------------------------------------------------------------

    def _cut_off(self, replica_id: int) -> bool:
        """Is the link from this replica to us cut (kafkalab's link faults)?"""
        return replica_id >= 0 and not self.broker.link_faults.hears(replica_id)

    def handle_fetch(self, header: RequestHeader, body: dict) -> Any:
        replica_id = body["replica_id"]
        if self._cut_off(replica_id):
            return CLOSE_CONNECTION
        lifecycle = getattr(self.broker, "lifecycle", None)
        if replica_id >= 0 and lifecycle is not None:
            # A follower's fetch offset is its LEO: the leader's HW and ISR follow.
            for t in body["topics"]:
                for p in t["partitions"]:
                    tp = (t["topic"], p["partition"])
                    part = self.replica_manager.partitions.get(tp)
                    if part is None or part.role != "leader" or replica_id not in part.remote:
                        continue
                    change = self.replica_manager.update_follower_fetch_state(
                        tp, replica_id, p["fetch_offset"]
                    )
                    if change is not None:
                        asyncio.ensure_future(lifecycle.alter_partition(change))
        fetch = DelayedFetch(self.replica_manager, header.api_version, body)
        if body["max_wait_ms"] <= 0 or fetch.try_complete():
            return fetch.response()
        future = asyncio.get_running_loop().create_future()
        fetch.future = future
        keys = [(t["topic"], p["partition"]) for t in body["topics"] for p in t["partitions"]]
        self.replica_manager.delayed_fetch.try_complete_else_watch(fetch, keys)
        return future

    # -- ListOffsets ------------------------------------------------------------------------

    def handle_list_offsets(self, header: RequestHeader, body: dict) -> dict:
        topics = []
        for topic in body["topics"]:
            partitions = []
            for part in topic["partitions"]:
                partitions.append(self._list_offset(header.api_version, topic["name"], part))
            topics.append({"name": topic["name"], "partitions": partitions})
        return {"throttle_time_ms": 0, "topics": topics}

    def _list_offset(self, version: int, topic: str, part: dict) -> dict:
        index = part["partition_index"]
        out = {
            "partition_index": index,
            "error_code": 0,
            "old_style_offsets": [],
            "timestamp": -1,
            "offset": -1,
            "leader_epoch": -1,
        }
        log_ = self.replica_manager.get_log(topic, index)
        if log_ is None:
            out["error_code"] = int(Errors.UNKNOWN_TOPIC_OR_PARTITION)
            return out
        ts = part["timestamp"]
        if ts == LATEST_TIMESTAMP:
            found_ts, offset = -1, log_.high_watermark  # what a consumer may read
        elif ts in (EARLIEST_TIMESTAMP, MAX_TIMESTAMP) or ts >= 0:
            found = log_.fetch_offset_by_timestamp(ts)
            found_ts, offset = (-1, -1) if found is None else (found.timestamp, found.offset)
        else:
            out["error_code"] = int(Errors.INVALID_REQUEST)
            return out
        out.update(
            timestamp=found_ts, offset=offset, leader_epoch=LEADER_EPOCH if offset >= 0 else -1
        )
        if version == 0:
            out["old_style_offsets"] = [offset] if offset >= 0 else []
        return out

    # -- CreateTopics / DeleteTopics ----------------------------------------------------------

    def handle_create_topics(self, header: RequestHeader, body: dict) -> Any:
        lifecycle = getattr(self.broker, "lifecycle", None)
        if lifecycle is not None:
            return asyncio.ensure_future(lifecycle.forward(19, body))
        existing = self.replica_manager.topics()
        out = []
        for topic in body["topics"]:
            name = topic["name"]
            error, message = Errors.NONE, None
            partitions = topic["num_partitions"]
            if topic["assignments"]:
                partitions = len(topic["assignments"])
            if partitions == -1:
                partitions = self.broker.config.num_partitions
            factor = topic["replication_factor"]
            configs = {c["name"]: c["value"] for c in topic["configs"] if c["value"] is not None}
            try:
                check_topic_name(name)
            except ValueError as e:
                error, message = Errors.INVALID_TOPIC_EXCEPTION, str(e)
            if error == Errors.NONE and name in existing:
                error, message = Errors.TOPIC_ALREADY_EXISTS, f"topic '{name}' already exists"
            elif error == Errors.NONE and partitions <= 0:
                error, message = Errors.INVALID_PARTITIONS, "number of partitions must be > 0"
            elif error == Errors.NONE and factor not in (-1, 1):
                error, message = (
                    Errors.INVALID_REPLICATION_FACTOR,
                    f"replication factor {factor} is larger than the 1 broker available",
                )
            if error == Errors.NONE:
                try:
                    self.replica_manager.log_manager.default_config.with_overrides(configs)
                    if not body["validate_only"]:
                        self.replica_manager.create_topic(name, partitions, configs)
                except InvalidConfigError as e:
                    error, message = Errors.INVALID_CONFIG, str(e)
            out.append({"name": name, "error_code": int(error), "error_message": message})
        return {"throttle_time_ms": 0, "topics": out}

    def handle_delete_topics(self, header: RequestHeader, body: dict) -> Any:
        lifecycle = getattr(self.broker, "lifecycle", None)
        if lifecycle is not None:
            return asyncio.ensure_future(lifecycle.forward(20, body))
        out = []
        for name in body["topic_names"]:
            found = self.replica_manager.delete_topic(name)
            error = Errors.NONE if found else Errors.UNKNOWN_TOPIC_OR_PARTITION
            out.append({"name": name, "error_code": int(error)})
        return {"throttle_time_ms": 0, "responses": out}

    # -- InitProducerId ---------------------------------------------------------------------

    def handle_init_producer_id(self, header: RequestHeader, body: dict) -> dict:
        if body["transactional_id"] is not None:
            # Transactions need the transaction coordinator (a later issue).
            return {
                "throttle_time_ms": 0,
                "error_code": int(Errors.COORDINATOR_NOT_AVAILABLE),
                "producer_id": -1,
                "producer_epoch": -1,
            }
        producer_id = self.producer_ids.generate()
        return {
            "throttle_time_ms": 0,
            "error_code": 0,
            "producer_id": producer_id,
            "producer_epoch": 0,
        }

    # -- OffsetForLeaderEpoch ---------------------------------------------------------------

    def handle_offset_for_leader_epoch(self, header: RequestHeader, body: dict) -> dict:
        """Where did an epoch end? (KIP-101; fenced by the current epoch, KIP-320)."""
        if self._cut_off(body["replica_id"]):
            return CLOSE_CONNECTION
        topics = []
        for topic in body["topics"]:
            partitions = []
            for part in topic["partitions"]:
                out = {
                    "error_code": 0,
                    "partition": part["partition"],
                    "leader_epoch": -1,
                    "end_offset": -1,
                }
                p = self.replica_manager.partitions.get((topic["topic"], part["partition"]))
                if p is None:
                    out["error_code"] = int(Errors.UNKNOWN_TOPIC_OR_PARTITION)
                else:
                    try:
                        epoch, end = p.last_offset_for_leader_epoch(
                            part["leader_epoch"], part["current_leader_epoch"]
                        )
                        out.update(leader_epoch=epoch, end_offset=end)
                    except KafkaError as e:
                        out["error_code"] = int(e.code)
                if body["replica_id"] < 0:  # a consumer checking its position (KIP-320)
                    log.info(
                        "consumer offset validation: %s-%d epoch %d ends at %d (%s)",
                        topic["topic"],
                        part["partition"],
                        part["leader_epoch"],
                        out["end_offset"],
                        Errors(out["error_code"]).name,
                    )
                partitions.append(out)
            topics.append({"topic": topic["topic"], "partitions": partitions})
        return {"throttle_time_ms": 0, "topics": topics}


class DelayedFetch(DelayedOperation):
    """A fetch waiting until min_bytes are readable or max_wait_ms passes
    (Kafka: DelayedFetch)."""

    def __init__(self, replica_manager: ReplicaManager, version: int, body: dict) -> None:
        super().__init__(body["max_wait_ms"])
        self.replica_manager = replica_manager
        self.version = version
        self.body = body
        self.future: asyncio.Future | None = None

    def try_complete(self) -> bool:
        available = 0
        for topic in self.body["topics"]:
            for part in topic["partitions"]:
                result = self.replica_manager.read(
                    topic["topic"],
                    part["partition"],
                    part["fetch_offset"],
                    part["partition_max_bytes"],
                    True,
                    self.body["replica_id"] >= 0,
                )
                if result.error != Errors.NONE:
                    return self.force_complete()  # errors are answered at once
                available += result.size
        if available >= max(1, self.body["min_bytes"]):
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        if self.future is not None and not self.future.done():
            self.future.set_result(self.response())

    def response(self) -> dict:
        """Read every requested partition now (Kafka: ReplicaManager.readFromLog):
        at most max_bytes in all, but the first partition with data returns at
        least one whole batch; every requested partition is in the answer."""
        remaining = self.body["max_bytes"]
        read_committed = self.body["isolation_level"] == READ_COMMITTED
        min_one = True
        topics = []
        for topic in self.body["topics"]:
            partitions = []
            for part in topic["partitions"]:
                limit = max(0, min(part["partition_max_bytes"], remaining))
                result = self.replica_manager.read(
                    topic["topic"],
                    part["partition"],
                    part["fetch_offset"],
                    limit,
                    min_one,
                    self.body["replica_id"] >= 0,
                )
                records = None
                if result.info is not None and result.size:
                    records = result.info.records
                    remaining -= result.size
                    min_one = False
                partitions.append(
                    {
                        "partition_index": part["partition"],
                        "error_code": int(result.error),
                        "high_watermark": result.high_watermark,
                        "last_stable_offset": result.high_watermark,
                        "log_start_offset": result.log_start_offset,
                        "aborted_transactions": [] if read_committed else None,
                        "preferred_read_replica": -1,
                        "records": records if records is not None else b"",
                    }
                )
            topics.append({"topic": topic["topic"], "partitions": partitions})
        return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": topics}


__all__ = ["DelayedFetch", "KafkaApis"]
