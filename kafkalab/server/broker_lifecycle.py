"""A broker in a cluster: its controller connection, its metadata image, its fetchers.

Kafka's classes: BrokerLifecycleManager (register, heartbeat), BrokerMetadataListener
(apply the metadata log), ReplicaFetcherManager / ReplicaFetcherThread
(followers copying from leaders), AlterPartitionManager (ISR changes to the
controller). All of it runs as tasks on the broker's event loop.

    register ──> heartbeat every broker.heartbeat.interval.ms ──> fetch new metadata
                 records ──> apply them: become leader / become follower (truncate
                 by the partition's rule, then fetch from the new leader)
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import struct
import uuid
from typing import Any

from kafkalab.controller.metadata_image import MetadataImage
from kafkalab.controller.quorum_controller import METADATA_TOPIC
from kafkalab.protocol.errors import Errors, KafkaError
from kafkalab.protocol.header import RequestHeader, decode_response, encode_request
from kafkalab.protocol.messages import APIS, CONTROLLER_APIS
from kafkalab.records import iter_batches

log = logging.getLogger(__name__)
_SIZE = struct.Struct(">i")


class AsyncConnection:
    """One connection, one request at a time (enough for these control paths)."""

    def __init__(self, host: str, port: int, schemas: dict) -> None:
        self.host, self.port, self.schemas = host, port, schemas
        self._ids = itertools.count(1)
        self._lock = asyncio.Lock()
        self._streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def request(self, api_key: int, version: int, body: dict) -> dict:
        async with self._lock:
            try:
                if self._streams is None:
                    self._streams = await asyncio.open_connection(self.host, self.port)
                reader, writer = self._streams
                cid = next(self._ids)
                writer.write(
                    encode_request(
                        RequestHeader(api_key, version, cid, "kafkalab-broker"), body, self.schemas
                    )
                )
                await writer.drain()
                (size,) = _SIZE.unpack(await reader.readexactly(4))
                frame = await reader.readexactly(size)
            except (OSError, asyncio.IncompleteReadError) as e:
                self.close()
                raise KafkaError(Errors.NETWORK_EXCEPTION, f"{self.host}:{self.port}: {e}") from e
        _, response = decode_response(self.schemas[api_key], version, frame)
        return response

    def close(self) -> None:
        if self._streams is not None:
            self._streams[1].close()
            self._streams = None


class BrokerLifecycle:
    """Registration, heartbeats, the metadata image, replica fetchers, AlterPartition."""

    def __init__(self, broker: Any, controller_address: str, heartbeat_interval_ms: int) -> None:
        host, port = controller_address.rsplit(":", 1)
        self.broker = broker
        self.controller = AsyncConnection(host, int(port), CONTROLLER_APIS)
        self.heartbeat_s = heartbeat_interval_ms / 1000
        self.image = MetadataImage()
        self.next_offset = 0
        self.broker_epoch = -1
        self.unfenced = asyncio.Event()
        self._tasks: list[asyncio.Task] = []
        self._fetchers: dict[int, asyncio.Task] = {}
        self._followed: dict[int, set[tuple[str, int]]] = {}  # leader -> partitions
        self._leader_conns: dict[int, AsyncConnection] = {}
        self._truncating: dict[tuple[str, int], Any] = {}  # followers yet to truncate
        self._last_error: dict[int, str] = {}  # per leader, so a retry loop logs once

    @property
    def rm(self):
        return self.broker.replica_manager

    async def start(self) -> None:
        self._tasks.append(asyncio.create_task(self._run()))
        self._tasks.append(asyncio.create_task(self._isr_expiration()))

    async def _isr_expiration(self) -> None:
        """Every replica.lag.time.max.ms / 2, the leader drops followers that have not
        caught up for replica.lag.time.max.ms (Kafka: ReplicaManager's isr-expiration)."""
        interval = self.rm.replica_lag_time_max_ms / 2000
        while True:
            await asyncio.sleep(interval)
            for change in self.rm.maybe_shrink_isr():
                log.info(
                    "%s-%d: shrinking the ISR to %s (followers behind for %d ms)",
                    change.topic,
                    change.partition,
                    change.new_isr,
                    self.rm.replica_lag_time_max_ms,
                )
                asyncio.ensure_future(self.alter_partition(change))

    async def stop(self) -> None:
        for task in [*self._tasks, *self._fetchers.values()]:
            task.cancel()
        await asyncio.gather(*self._tasks, *self._fetchers.values(), return_exceptions=True)
        try:
            await asyncio.wait_for(
                self.controller.request(
                    63,
                    0,
                    {
                        "broker_id": self.broker.config.node_id,
                        "broker_epoch": self.broker_epoch,
                        "current_metadata_offset": self.next_offset - 1,
                        "want_fence": True,
                        "want_shut_down": True,
                    },
                ),
                2,
            )
        except (TimeoutError, KafkaError):
            pass  # the controller will fence us when our session times out
        self.controller.close()
        for conn in self._leader_conns.values():
            conn.close()

    # -- registration, heartbeats, metadata ---------------------------------------------------

    async def _run(self) -> None:
        host, port = self.broker.advertised_address
        incarnation = uuid.uuid4()
        while self.broker_epoch < 0:
            try:
                response = await self.controller.request(
                    62,
                    0,
                    {
                        "broker_id": self.broker.config.node_id,
                        "cluster_id": self.broker.config.cluster_id,
                        "incarnation_id": incarnation,
                        "listeners": [
                            {
                                "name": "PLAINTEXT",
                                "host": host,
                                "port": port,
                                "security_protocol": 0,
                            }
                        ],
                        "features": [],
                        "rack": None,
                    },
                )
                if response["error_code"]:
                    raise KafkaError(response["error_code"], "BrokerRegistration")
                self.broker_epoch = response["broker_epoch"]
            except KafkaError as e:
                log.warning("registration with the controller failed (%s); retrying", e)
                await asyncio.sleep(self.heartbeat_s)
        while True:
            try:
                await self._heartbeat_and_catch_up()
            except KafkaError as e:
                log.warning("controller unreachable (%s); retrying", e)
            await asyncio.sleep(self.heartbeat_s)

    async def _heartbeat_and_catch_up(self) -> None:
        response = await self.controller.request(
            63,
            0,
            {
                "broker_id": self.broker.config.node_id,
                "broker_epoch": self.broker_epoch,
                "current_metadata_offset": self.next_offset - 1,
                "want_fence": False,
                "want_shut_down": False,
            },
        )
        if response["error_code"] == Errors.STALE_BROKER_EPOCH:
            self.broker_epoch = -1  # the controller forgot us: register again
            raise KafkaError(Errors.STALE_BROKER_EPOCH, "re-registering")
        await self._fetch_metadata()
        if not response["is_fenced"] and not self.unfenced.is_set():
            self.unfenced.set()
            print(
                f"kafkalab broker {self.broker.config.node_id} registered and unfenced "
                f"(broker epoch {self.broker_epoch})",
                flush=True,
            )

    async def _fetch_metadata(self) -> None:
        while True:
            body = {
                "replica_id": self.broker.config.node_id,
                "max_wait_ms": 0,
                "min_bytes": 0,
                "max_bytes": 10 << 20,
                "isolation_level": 0,
                "session_id": 0,
                "session_epoch": -1,
                "topics": [
                    {
                        "topic": METADATA_TOPIC,
                        "partitions": [
                            {
                                "partition": 0,
                                "current_leader_epoch": -1,
                                "fetch_offset": self.next_offset,
                                "log_start_offset": -1,
                                "partition_max_bytes": 10 << 20,
                            }
                        ],
                    }
                ],
                "forgotten_topics_data": [],
                "rack_id": "",
            }
            response = await self.controller.request(1, 11, body)
            part = response["responses"][0]["partitions"][0]
            records = [
                (r.offset, json.loads(r.value))
                for b in iter_batches(bytes(part["records"] or b""))
                for r in b.records
                if r.offset >= self.next_offset
            ]
            if not records:
                return
            for offset, record in records:
                self.image.replay(record)
                self.next_offset = offset + 1
            await self._apply_image()

    async def _apply_image(self) -> None:
        me = self.broker.config.node_id
        for topic in list(self.image.topics.values()):
            for index, reg in topic.partitions.items():
                if me not in reg.replicas:
                    continue
                tp = (topic.name, index)
                part = self.rm.partitions.get(tp)
                if reg.leader == me:
                    if (
                        part is None
                        or part.role != "leader"
                        or part.leader_epoch != reg.leader_epoch
                    ):
                        self._stop_following(tp)
                        self.rm.make_leader(
                            tp,
                            reg.leader_epoch,
                            reg.isr,
                            reg.replicas,
                            reg.partition_epoch,
                            topic.configs,
                        )
                        continue
                elif (
                    part is None
                    or part.role != "follower"
                    or part.leader_epoch != reg.leader_epoch
                    or part.leader_id != reg.leader
                ):
                    # Follow the new leader; with no leader (every ISR member is down)
                    # the partition is offline here until an election.
                    self._stop_following(tp)
                    follower = self.rm.make_follower(
                        tp,
                        reg.leader,
                        reg.leader_epoch,
                        reg.isr,
                        reg.replicas,
                        reg.partition_epoch,
                        topic.configs,
                    )
                    if reg.leader >= 0:
                        self._follow(reg.leader, follower)
                    continue
                # Same leader and epoch: an ISR change (AlterPartition, or the controller
                # fencing a broker). The leader computes its HW over the new ISR; a
                # follower only keeps it current, so what it reports is what the
                # metadata says.
                if part.isr != reg.isr or part.partition_epoch != reg.partition_epoch:
                    self.rm.apply_isr_change(tp, reg.isr, reg.partition_epoch)
        for tp in [tp for tp in self.rm.partitions if tp[0] not in self.image.topics]:
            self._stop_following(tp)
            self.rm.remove_partition(tp)

    # -- following a leader -------------------------------------------------------------------

    def _leader(self, broker_id: int) -> AsyncConnection:
        """The connection to a leader, at the address it registered last (a restarted
        broker may listen on another port)."""
        reg = self.image.brokers[broker_id]
        conn = self._leader_conns.get(broker_id)
        if conn is None or (conn.host, conn.port) != (reg.host, reg.port):
            if conn is not None:
                conn.close()
            conn = self._leader_conns[broker_id] = AsyncConnection(reg.host, reg.port, APIS)
        return conn

    async def _truncate(self, follower) -> bool:
        """Cut the follower's log by its truncation rule before fetching (Kafka: the
        fetcher's Truncating state), asking the leader as many rounds as it takes.
        False when an answer did not come; the fetcher asks again before it fetches
        that partition."""
        for _ in range(1 + len(follower.log.leader_epoch_cache.entries)):
            question = follower.epoch_query()
            answer = None
            if question is not None:
                answer = await self._ask_end_offset(follower, *question)
                if answer is None:
                    return False
            point, complete = follower.truncation_step(answer)
            if point < follower.log.log_end_offset:
                log.info(
                    "%s-%d: truncating from %d to %d (%s, leader answered %s)",
                    follower.topic,
                    follower.partition,
                    follower.log.log_end_offset,
                    point,
                    follower.truncation_rule,
                    answer,
                )
                follower.truncate_to(point)
            if complete:
                return True
        return False

    async def _ask_end_offset(self, follower, epoch: int, current: int) -> tuple[int, int] | None:
        """OffsetForLeaderEpoch to the leader: (epoch, end offset), or None."""
        try:
            response = await self._leader(follower.leader_id).request(
                23,
                3,
                {
                    "replica_id": self.broker.config.node_id,
                    "topics": [
                        {
                            "topic": follower.topic,
                            "partitions": [
                                {
                                    "partition": follower.partition,
                                    "current_leader_epoch": current,
                                    "leader_epoch": epoch,
                                }
                            ],
                        }
                    ],
                },
            )
        except KafkaError as e:
            if self._last_error.get(follower.leader_id) != str(e):  # once, not per retry
                log.warning("OffsetForLeaderEpoch to broker %d failed: %s", follower.leader_id, e)
            self._last_error[follower.leader_id] = str(e)
            return None
        self._last_error.pop(follower.leader_id, None)
        if not self.broker.link_faults.hears(follower.leader_id):
            return None  # the answer is lost on a cut link
        p = response["topics"][0]["partitions"][0]
        if p["error_code"] != 0:
            log.info(
                "%s-%d: OffsetForLeaderEpoch answered %s; asking again",
                follower.topic,
                follower.partition,
                Errors(p["error_code"]).name,
            )
            return None
        return p["leader_epoch"], p["end_offset"]

    def _follow(self, leader: int, follower) -> None:
        tp = (follower.topic, follower.partition)
        self._followed.setdefault(leader, set()).add(tp)
        self._truncating[tp] = follower
        if leader not in self._fetchers or self._fetchers[leader].done():
            self._fetchers[leader] = asyncio.create_task(self._fetcher(leader))

    def _stop_following(self, tp: tuple[str, int]) -> None:
        for followed in self._followed.values():
            followed.discard(tp)
        self._truncating.pop(tp, None)

    async def _fetcher(self, leader: int) -> None:
        """Kafka's ReplicaFetcherThread: fetch every partition we follow from `leader`."""
        me = self.broker.config.node_id
        # How long the leader may hold our fetch when it has nothing new: a follower
        # learns a new HW only in the next answer, so this is also how stale its HW
        # can be (Kafka: replica.fetch.wait.max.ms).
        wait_ms = int(self.broker.config.extra.get("replica.fetch.wait.max.ms", 500))
        while True:
            for tp in sorted(self._followed.get(leader, ())):
                follower = self._truncating.get(tp)
                if follower is not None and await self._truncate(follower):
                    if self._truncating.get(tp) is follower:
                        del self._truncating[tp]
            tps = sorted(tp for tp in self._followed.get(leader, ()) if tp not in self._truncating)
            if not tps:
                await asyncio.sleep(0.1)
                continue
            topics: dict[str, list[dict]] = {}
            for topic, index in tps:
                part = self.rm.partitions[(topic, index)]
                topics.setdefault(topic, []).append(
                    {
                        "partition": index,
                        "current_leader_epoch": part.leader_epoch,
                        "fetch_offset": part.log.log_end_offset,
                        "log_start_offset": -1,
                        "partition_max_bytes": 1 << 20,
                    }
                )
            body = {
                "replica_id": me,
                "max_wait_ms": wait_ms,
                "min_bytes": 1,
                "max_bytes": 10 << 20,
                "isolation_level": 0,
                "session_id": 0,
                "session_epoch": -1,
                "topics": [{"topic": t, "partitions": p} for t, p in topics.items()],
                "forgotten_topics_data": [],
                "rack_id": "",
            }
            try:
                response = await self._leader(leader).request(1, 11, body)
            except KafkaError:
                await asyncio.sleep(0.2)
                continue
            if not self.broker.link_faults.hears(leader):
                self._leader(leader).close()  # the leader saw our fetch; its answer is lost
                await asyncio.sleep(0.2)
                continue
            for t in response["responses"]:
                for p in t["partitions"]:
                    tp = (t["topic"], p["partition_index"])
                    part = self.rm.partitions.get(tp)
                    if (
                        part is None
                        or part.role != "follower"
                        or tp not in self._followed[leader]
                        or tp in self._truncating  # a new epoch began while we fetched
                    ):
                        continue
                    if p["error_code"] == 0:
                        try:
                            part.append_records_to_follower(
                                bytes(p["records"] or b""), p["high_watermark"]
                            )
                        except Exception as e:  # a diverged or corrupt fetch: refetch
                            log.warning("%s-%d: follower append failed: %s", *tp, e)
                        self.rm.delayed_fetch.check_and_complete(tp)
                    elif p["error_code"] == Errors.OFFSET_OUT_OF_RANGE:
                        part.log.truncate_fully_and_start_at(max(p["log_start_offset"], 0))

    async def alter_partition(self, change) -> None:
        """Send the leader's ISR proposal to the controller and apply its answer."""
        tp = (change.topic, change.partition)
        try:
            response = await self.controller.request(
                56,
                0,
                {
                    "broker_id": self.broker.config.node_id,
                    "broker_epoch": self.broker_epoch,
                    "topics": [
                        {
                            "topic_name": change.topic,
                            "partitions": [
                                {
                                    "partition_index": change.partition,
                                    "leader_epoch": change.leader_epoch,
                                    "new_isr": change.new_isr,
                                    "partition_epoch": change.partition_epoch,
                                }
                            ],
                        }
                    ],
                },
            )
            p = response["topics"][0]["partitions"][0]
        except KafkaError as e:
            p = {"error_code": int(e.code)}
        part = self.rm.partitions.get(tp)
        if part is None:
            return
        if p["error_code"] == 0:
            self.rm.apply_isr_change(tp, p["isr"], p["partition_epoch"])
        else:
            log.info("%s-%d: AlterPartition refused: %s", *tp, Errors(p["error_code"]).name)
            part.reject_isr_change()

    async def forward(self, api_key: int, body: dict) -> dict:
        """CreateTopics / DeleteTopics go to the controller (Kafka forwards them too)."""
        return await self.controller.request(api_key, 4 if api_key == 19 else 3, body)
