"""ReplicaFetcherManager: followers copying from their leaders, one fetcher per leader.

Kafka's classes: ReplicaFetcherManager and ReplicaFetcherThread (an asyncio task
here). A partition this broker follows is added under its leader; the fetcher
for that leader then, for each of its partitions:

  1. truncates first (the Truncating state): it runs Partition.truncation(),
     the same steps the labs run by hand, answering the questions with
     OffsetForLeaderEpoch requests to the leader, one request a round for all
     its truncating partitions. No answer: try again before the next fetch.
     An answer that comes after the partition moved to another leader or leader
     epoch is dropped (Kafka's maybeTruncate checks the current leader epoch):
     it neither cuts the log nor stands for the truncation against the new
     leader, which that leader's fetcher still does;
  2. fetches (the Fetching state): one Fetch for all of them from their log end
     offsets, held by the leader up to `replica.fetch.wait.max.ms` when it has
     nothing new; appends what comes back and learns the leader's HW. The
     fetches are in a fetch session with the leader (KIP-227, a
     FetchSessionHandler per leader): the first names every partition, later
     ones only those whose fetch offset, log start offset or leader epoch moved,
     and the leader answers only partitions with something new.

A partition added under a leader is served at once: that leader's fetcher
starts again (dropping a fetch the leader may be holding for up to
`replica.fetch.wait.max.ms`) instead of picking it up after its current poll,
once for all the partitions added in the same turn of the event loop. Truncations, each partition's first
answered fetch and each new fetch session a leader opens for us ("fetch_session",
with its id and how many partitions it began with) are recorded in the broker's
EventLog (a failover's timeline).

Link faults (kafkalab's, see link_faults.py) act here on the follower's side:
an answer from a leader we are deaf to is thrown away, at once on a refused
cut; on a dropped one the fetcher waits out its request timeout
(`replica.socket.timeout.ms`, Kafka's request timeout for a replica fetcher)
first, as it does for a request the leader never answers. Each request that
times out either way is recorded ("request_timed_out", with the leader, the
API and the timeout).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Generator

from kafkalab.errors import Errors, KafkaError
from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.protocol.messages import APIS
from kafkalab.replication.partition import EpochAnswer, EpochQuestion, Partition, Role
from kafkalab.replication.replica_manager import ReplicaManager
from kafkalab.server.events import EventLog
from kafkalab.server.fetch_session import PartitionData
from kafkalab.server.fetch_session_handler import FetchSessionHandler
from kafkalab.server.inter_broker_connection import (
    REPLICA_FETCH_VERSION,
    InterBrokerConnection,
    replica_fetch_request,
)
from kafkalab.server.link_faults import CutMode, LinkFaults

log = logging.getLogger(__name__)
TopicPartition = tuple[str, int]
RETRY_S = 0.2
PARTITION_MAX_BYTES = 1 << 20  # replica.fetch.max.bytes
_START: EpochAnswer = (-2, -2)  # not an answer: the first step of a truncation


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
        request_timeout_ms: int = 30_000,
    ) -> None:
        """`fetch_wait_max_ms` (replica.fetch.wait.max.ms): how long a leader may hold
        our fetch when it has nothing new. A follower learns a new HW only in the
        next answer, so this is also how stale its HW can be.
        `request_timeout_ms` (replica.socket.timeout.ms): how long to wait for any
        answer from a leader before giving up on the connection."""
        self.request_timeout_ms = request_timeout_ms
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
        self._restarting: set[int] = set()  # leaders whose fetcher restarts at the next turn
        self._sessions: dict[int, FetchSessionHandler] = {}  # per leader (KIP-227)

    def add(self, leader: int, follower: Partition) -> None:
        """Follow `leader` for this partition: truncate, then fetch."""
        tp = (follower.topic, follower.partition)
        self._followed.setdefault(leader, set()).add(tp)
        self._truncating[tp] = follower
        self._fetched.discard(tp)
        if leader not in self._restarting:
            # Once for every partition added meanwhile: a leadership change of
            # hundreds of partitions restarts each fetcher once, not hundreds of times.
            self._restarting.add(leader)
            asyncio.get_running_loop().call_soon(self._restart, leader)

    def _restart(self, leader: int) -> None:
        self._restarting.discard(leader)
        running = self._fetchers.get(leader)
        if running is not None and not running.done():
            running.cancel()  # it may be waiting in a long fetch without the new partitions
            session = self._sessions.get(leader)
            if session is not None:
                session.handle_error()  # its answer will not be read: a new session
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
                host, port, APIS, self.client_id, self.request_timeout_ms
            )
        return conn

    # -- the Truncating state -----------------------------------------------------------------

    async def _truncate(self, leader: int, followers: list[Partition]) -> list[Partition]:
        """Run the truncation of every follower of `leader` that has to truncate, all
        in step: each round is one OffsetForLeaderEpoch request with every
        partition's question (Kafka's fetcher asks for all its truncating
        partitions at once). Returns the followers that finished; the others
        (an answer did not come) try again before the next fetch."""
        leos = {id(f): f.log.log_end_offset for f in followers}
        epochs = {id(f): f.leader_epoch for f in followers}  # asked in these epochs
        asking: dict[TopicPartition, tuple[Partition, Generator, EpochQuestion]] = {}
        finished: list[Partition] = []

        def step(follower: Partition, steps: Generator, answer: EpochAnswer | None) -> None:
            tp = (follower.topic, follower.partition)
            try:
                question = next(steps) if answer is _START else steps.send(answer)
                asking[tp] = (follower, steps, question)
            except StopIteration as done:
                self.replica_manager.note_changed(tp)  # it may have cut its log
                if done.value is not None:
                    finished.append(follower)
                    self._record_truncation(follower, leos[id(follower)], done.value)

        def still_following(follower: Partition) -> bool:
            return (
                follower.role == Role.FOLLOWER
                and follower.leader_id == leader
                and follower.leader_epoch == epochs[id(follower)]
            )

        for follower in followers:
            step(follower, follower.truncation(), _START)
        while asking:
            questions, asking = asking, {}
            answers = await self._ask_end_offsets(
                leader, {tp: (f, q) for tp, (f, _, q) in questions.items()}
            )
            for tp, (follower, steps, _) in questions.items():
                if not still_following(follower):
                    # The partition moved to another leader or epoch while we asked:
                    # this answer is about a history it no longer follows. Dropped,
                    # as Kafka's fetcher drops it (maybeTruncate checks the current
                    # leader epoch): it must neither cut the log nor stand for the
                    # truncation the new leader's fetcher has to do.
                    steps.close()
                    continue
                step(follower, steps, answers.get(tp))
        return finished

    def _record_truncation(self, follower: Partition, leo: int, rounds: list[dict]) -> None:
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

    async def _ask_end_offsets(
        self, leader: int, questions: dict[TopicPartition, tuple[Partition, EpochQuestion]]
    ) -> dict[TopicPartition, EpochAnswer | None]:
        """OffsetForLeaderEpoch to the leader for every question at once: each
        partition's (epoch, end offset), or None when it got no usable answer."""
        topics: dict[str, list[dict]] = {}
        for (topic, partition), (_, (epoch, current)) in questions.items():
            topics.setdefault(topic, []).append(
                {"partition": partition, "current_leader_epoch": current, "leader_epoch": epoch}
            )
        started = time.monotonic()
        try:
            response = await self._leader(leader).request(
                ApiKeys.OFFSET_FOR_LEADER_EPOCH,
                3,
                {
                    "replica_id": self.broker_id,
                    "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
                },
            )
        except KafkaError as e:
            self._timed_out(leader, ApiKeys.OFFSET_FOR_LEADER_EPOCH, e)
            if self._last_error.get(leader) != str(e):  # once, not per retry
                log.warning("OffsetForLeaderEpoch to broker %d failed: %s", leader, e)
            self._last_error[leader] = str(e)
            return {}
        self._last_error.pop(leader, None)
        if not self.link_faults.hears(leader):
            await self._lost_answer(leader, ApiKeys.OFFSET_FOR_LEADER_EPOCH, started)
            return {}  # the answer is lost on a cut link
        answers: dict[TopicPartition, EpochAnswer | None] = {}
        refused: dict[str, list[str]] = {}
        for t in response["topics"]:
            for p in t["partitions"]:
                tp = (t["topic"], p["partition"])
                if p["error_code"] != 0:
                    name = Errors(p["error_code"]).name
                    refused.setdefault(name, []).append(f"{tp[0]}-{tp[1]}")
                    answers[tp] = None
                else:
                    answers[tp] = (p["leader_epoch"], p["end_offset"])
        for name, tps in refused.items():  # one line an error, not one a partition
            log.info(
                "OffsetForLeaderEpoch to broker %d answered %s for %d partitions (%s%s); "
                "asking again",
                leader,
                name,
                len(tps),
                ", ".join(tps[:5]),
                ", ..." if len(tps) > 5 else "",
            )
        return answers

    # -- the Fetching state -------------------------------------------------------------------

    async def _run(self, leader: int) -> None:
        """Kafka's ReplicaFetcherThread: fetch every partition we follow from `leader`."""
        while True:
            truncating = [
                self._truncating[tp]
                for tp in sorted(self._followed.get(leader, ()))
                if tp in self._truncating
            ]
            if truncating:
                for follower in await self._truncate(leader, truncating):
                    tp = (follower.topic, follower.partition)
                    if self._truncating.get(tp) is follower:  # not replaced meanwhile
                        del self._truncating[tp]
            tps = sorted(tp for tp in self._followed.get(leader, ()) if tp not in self._truncating)
            if not tps:
                await asyncio.sleep(RETRY_S)  # a truncation to retry, or nothing to do
                continue
            session = self._sessions.setdefault(leader, FetchSessionHandler(leader))
            wanted = {}
            for tp in tps:
                p = self.replica_manager.partitions[tp]
                wanted[tp] = PartitionData(
                    p.log.log_end_offset,
                    p.log.log_start_offset,
                    PARTITION_MAX_BYTES,
                    p.leader_epoch,
                )
            request = session.build(wanted)
            body = replica_fetch_request(
                self.broker_id,
                [
                    (t, n, d.fetch_offset, d.current_leader_epoch, d.log_start_offset)
                    for (t, n), d in request.to_send.items()
                ],
                max_wait_ms=self.fetch_wait_max_ms,
                min_bytes=1,
                partition_max_bytes=PARTITION_MAX_BYTES,
                session_id=request.session_id,
                session_epoch=request.epoch,
                forgotten=request.to_forget,
            )
            started = time.monotonic()
            try:
                response = await self._leader(leader).request(
                    ApiKeys.FETCH, REPLICA_FETCH_VERSION, body
                )
            except KafkaError as e:
                self._timed_out(leader, ApiKeys.FETCH, e)
                session.handle_error()
                await asyncio.sleep(RETRY_S)
                continue
            if not self.link_faults.hears(leader):
                # the leader saw our fetch; its answer is lost
                await self._lost_answer(leader, ApiKeys.FETCH, started)
                session.handle_error()
                await asyncio.sleep(RETRY_S)
                continue
            if not session.handle_response(request, response):
                continue  # a session error: fetch in full at once
            if request.full and session.session_id != request.session_id:
                self.events.record(
                    "fetch_session",
                    leader=leader,
                    session_id=session.session_id,
                    partitions=len(request.to_send),
                )
            if not self._process_fetch_response(leader, response):
                # Every partition answered an error (the leader moved, or our epoch is
                # behind it): not at once again, the metadata will tell us what to do
                # (Kafka: replica.fetch.backoff.ms). A leader change restarts this task.
                await asyncio.sleep(RETRY_S)

    def _timed_out(self, leader: int, api: ApiKeys, e: KafkaError) -> None:
        if e.code == Errors.REQUEST_TIMED_OUT:
            self.events.record(
                "request_timed_out", leader=leader, api=api.name, timeout_ms=self.request_timeout_ms
            )

    async def _lost_answer(self, leader: int, api: ApiKeys, started: float) -> None:
        """An answer from a leader we are deaf to: on a dropped link we never got it,
        so wait out the request timeout (from `started`) as for any unanswered
        request, then give up on the connection (a refused link: at once)."""
        if self.link_faults.mode(leader) == CutMode.DROP:
            left = started + self.request_timeout_ms / 1000 - time.monotonic()
            if left > 0:
                await asyncio.sleep(left)
            self._timed_out(leader, api, KafkaError(Errors.REQUEST_TIMED_OUT, "dropped"))
        self._leader(leader).close()

    def _process_fetch_response(self, leader: int, response: dict) -> bool:
        """Append each partition's records and learn the leader's HW (Kafka:
        processPartitionData). False when partitions were answered, none without
        error. An incremental answer with no partitions (nothing changed) is True."""
        answered = not any(t["partitions"] for t in response["responses"])
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
                    log_ = part.log
                    before = (log_.log_end_offset, log_.high_watermark, log_.log_start_offset)
                    try:
                        part.append_records_to_follower(
                            bytes(p["records"] or b""), p["high_watermark"], p["log_start_offset"]
                        )
                    except Exception as e:  # a diverged or corrupt fetch: refetch
                        log.warning("%s-%d: follower append failed: %s", *tp, e)
                    if before != (log_.log_end_offset, log_.high_watermark, log_.log_start_offset):
                        self.replica_manager.note_changed(tp)
                    self.replica_manager.delayed_fetch.check_and_complete(tp)
                    if tp not in self._fetched:
                        self._fetched.add(tp)
                        self.events.record("fetching", topic=tp[0], partition=tp[1], leader=leader)
                elif p["error_code"] == Errors.OFFSET_OUT_OF_RANGE:
                    part.truncate_fully_and_start_at(max(p["log_start_offset"], 0))
                    self.replica_manager.note_changed(tp)
                    answered = True  # fetch again at once, from the leader's log start
        return answered
