"""ReplicaFetcherManager: followers copying from their leaders, one fetcher per leader.

Kafka's classes: ReplicaFetcherManager and ReplicaFetcherThread (an asyncio task
here). A partition this broker follows is added under its leader; the fetcher
for that leader then, for each of its partitions:

  1. truncates first (the Truncating state): it runs Partition.truncation(),
     the same steps the labs run by hand, answering each question with an
     OffsetForLeaderEpoch request to the leader. No answer: try again before
     the next fetch;
  2. fetches (the Fetching state): one Fetch for all of them from their log end
     offsets, held by the leader up to `replica.fetch.wait.max.ms` when it has
     nothing new; appends what comes back and learns the leader's HW.

A partition added under a leader is served at once: that leader's fetcher
starts again (dropping a fetch the leader may be holding for up to
`replica.fetch.wait.max.ms`) instead of picking it up after its current poll. Truncations and each partition's first
answered fetch are recorded in the broker's EventLog (a failover's timeline).

Link faults (kafkalab's, see link_faults.py) act here on the follower's side:
an answer from a leader we are deaf to is thrown away.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from kafkalab.errors import Errors, KafkaError
from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.protocol.messages import APIS
from kafkalab.replication.partition import EpochAnswer, Partition, Role
from kafkalab.replication.replica_manager import ReplicaManager
from kafkalab.server.events import EventLog
from kafkalab.server.inter_broker_connection import (
    REPLICA_FETCH_VERSION,
    InterBrokerConnection,
    replica_fetch_request,
)
from kafkalab.server.link_faults import LinkFaults

log = logging.getLogger(__name__)
TopicPartition = tuple[str, int]
RETRY_S = 0.2


class ReplicaFetcherManager:
    def __init__(
        self,
        broker_id: int,
        replica_manager: ReplicaManager,
        link_faults: LinkFaults,
        broker_address: Callable[[int], tuple[str, int]],
        events: EventLog,
        fetch_wait_max_ms: int = 500,
        client_id: Callable[[], str] | None = None,
    ) -> None:
        """`fetch_wait_max_ms` (replica.fetch.wait.max.ms): how long a leader may hold
        our fetch when it has nothing new. A follower learns a new HW only in the
        next answer, so this is also how stale its HW can be."""
        self.broker_id = broker_id
        self.replica_manager = replica_manager
        self.link_faults = link_faults
        self.broker_address = broker_address
        self.events = events
        self.fetch_wait_max_ms = fetch_wait_max_ms
        self.client_id = client_id  # who we are, in which broker epoch (KIP-903)
        self._fetched: set[TopicPartition] = set()  # answered since it was added
        self._fetchers: dict[int, asyncio.Task] = {}
        self._followed: dict[int, set[TopicPartition]] = {}  # leader -> partitions
        self._truncating: dict[TopicPartition, Partition] = {}  # yet to truncate
        self._connections: dict[int, InterBrokerConnection] = {}
        self._last_error: dict[int, str] = {}  # per leader, so a retry loop logs once

    def add(self, leader: int, follower: Partition) -> None:
        """Follow `leader` for this partition: truncate, then fetch."""
        tp = (follower.topic, follower.partition)
        self._followed.setdefault(leader, set()).add(tp)
        self._truncating[tp] = follower
        self._fetched.discard(tp)
        running = self._fetchers.get(leader)
        if running is not None and not running.done():
            running.cancel()  # it may be waiting in a long fetch without this partition
            conn = self._connections.pop(leader, None)
            if conn is not None:
                conn.close()  # a cancelled request leaves the stream mid-frame
        self._fetchers[leader] = asyncio.create_task(self._run(leader))

    def remove(self, tp: TopicPartition) -> None:
        for followed in self._followed.values():
            followed.discard(tp)
        self._truncating.pop(tp, None)

    async def stop(self) -> None:
        for task in self._fetchers.values():
            task.cancel()
        await asyncio.gather(*self._fetchers.values(), return_exceptions=True)
        for conn in self._connections.values():
            conn.close()

    def _leader(self, broker_id: int) -> InterBrokerConnection:
        """The connection to a leader, at the address it registered last."""
        host, port = self.broker_address(broker_id)
        conn = self._connections.get(broker_id)
        if conn is None or (conn.host, conn.port) != (host, port):
            if conn is not None:
                conn.close()
            conn = self._connections[broker_id] = InterBrokerConnection(
                host, port, APIS, self.client_id
            )
        return conn

    # -- the Truncating state -----------------------------------------------------------------

    async def _truncate(self, follower: Partition) -> bool:
        """Run the follower's truncation, asking the leader over the network. False
        when an answer did not come; the fetcher tries again before it fetches."""
        leo = follower.log.log_end_offset
        steps = follower.truncation()
        try:
            question = next(steps)
            while True:
                question = steps.send(await self._ask_end_offset(follower, *question))
        except StopIteration as done:
            rounds = done.value
        if rounds and follower.log.log_end_offset < leo:
            self.events.record(
                "truncated",
                topic=follower.topic,
                partition=follower.partition,
                **{"from": leo, "to": follower.log.log_end_offset},
            )
            log.info(
                "%s-%d: truncated from %d to %d (%s, leader answered %s)",
                follower.topic,
                follower.partition,
                leo,
                follower.log.log_end_offset,
                follower.truncation_rule,
                [r["answered"] for r in rounds],
            )
        return rounds is not None

    async def _ask_end_offset(
        self, follower: Partition, epoch: int, current: int
    ) -> EpochAnswer | None:
        """OffsetForLeaderEpoch to the leader: (epoch, end offset), or None."""
        leader = follower.leader_id
        try:
            response = await self._leader(leader).request(
                ApiKeys.OFFSET_FOR_LEADER_EPOCH,
                3,
                {
                    "replica_id": self.broker_id,
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
            if self._last_error.get(leader) != str(e):  # once, not per retry
                log.warning("OffsetForLeaderEpoch to broker %d failed: %s", leader, e)
            self._last_error[leader] = str(e)
            return None
        self._last_error.pop(leader, None)
        if not self.link_faults.hears(leader):
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

    # -- the Fetching state -------------------------------------------------------------------

    async def _run(self, leader: int) -> None:
        """Kafka's ReplicaFetcherThread: fetch every partition we follow from `leader`."""
        while True:
            for tp in sorted(self._followed.get(leader, ())):
                follower = self._truncating.get(tp)
                if follower is not None and await self._truncate(follower):
                    if self._truncating.get(tp) is follower:
                        del self._truncating[tp]
            tps = sorted(tp for tp in self._followed.get(leader, ()) if tp not in self._truncating)
            if not tps:
                await asyncio.sleep(RETRY_S)  # a truncation to retry, or nothing to do
                continue
            partitions = [self.replica_manager.partitions[tp] for tp in tps]
            body = replica_fetch_request(
                self.broker_id,
                [(p.topic, p.partition, p.log.log_end_offset, p.leader_epoch) for p in partitions],
                max_wait_ms=self.fetch_wait_max_ms,
                min_bytes=1,
            )
            try:
                response = await self._leader(leader).request(
                    ApiKeys.FETCH, REPLICA_FETCH_VERSION, body
                )
            except KafkaError:
                await asyncio.sleep(RETRY_S)
                continue
            if not self.link_faults.hears(leader):
                self._leader(leader).close()  # the leader saw our fetch; its answer is lost
                await asyncio.sleep(RETRY_S)
                continue
            if not self._process_fetch_response(leader, response):
                # Every partition answered an error (the leader moved, or our epoch is
                # behind it): not at once again, the metadata will tell us what to do
                # (Kafka: replica.fetch.backoff.ms). A leader change restarts this task.
                await asyncio.sleep(RETRY_S)

    def _process_fetch_response(self, leader: int, response: dict) -> bool:
        """Append each partition's records and learn the leader's HW (Kafka:
        processPartitionData). False when no partition was answered without error."""
        answered = False
        for t in response["responses"]:
            for p in t["partitions"]:
                tp = (t["topic"], p["partition_index"])
                part = self.replica_manager.partition(tp)
                if (
                    part is None
                    or part.role != Role.FOLLOWER
                    or tp not in self._followed[leader]
                    or tp in self._truncating  # a new epoch began while we fetched
                ):
                    continue
                if p["error_code"] == 0:
                    answered = True
                    try:
                        part.append_records_to_follower(
                            bytes(p["records"] or b""), p["high_watermark"]
                        )
                    except Exception as e:  # a diverged or corrupt fetch: refetch
                        log.warning("%s-%d: follower append failed: %s", *tp, e)
                    self.replica_manager.delayed_fetch.check_and_complete(tp)
                    if tp not in self._fetched:
                        self._fetched.add(tp)
                        self.events.record("fetching", topic=tp[0], partition=tp[1], leader=leader)
                elif p["error_code"] == Errors.OFFSET_OUT_OF_RANGE:
                    part.truncate_fully_and_start_at(max(p["log_start_offset"], 0))
                    answered = True  # fetch again at once, from the leader's log start
        return answered
