"""ConsumerCoordinator: the teaching consumer's membership of a group (classic protocol).

Kafka's classes: ConsumerCoordinator and AbstractCoordinator (with its
HeartbeatThread). What a member does, in Kafka's order:

  1. FindCoordinator: which broker coordinates the group.
  2. JoinGroup with one protocol per assignor (`partition.assignment.strategy`),
     each carrying a ConsumerProtocol subscription (topics, owned partitions).
     A new member first gets MEMBER_ID_REQUIRED and its id (KIP-394), and joins
     again with it.
  3. The leader runs the chosen assignor over every member's subscription; all
     send SyncGroup, the leader with the assignments; each gets its own.
  4. A heartbeat thread sends Heartbeat every `heartbeat.interval.ms`.
     REBALANCE_IN_PROGRESS: join again at the next poll. UNKNOWN_MEMBER_ID or
     ILLEGAL_GENERATION: the member was removed; its partitions are *lost*.
     A member that does not poll within `max.poll.interval.ms` leaves the group
     (the thread sends LeaveGroup), as the Java consumer does.

Eager assignors (range, roundrobin, sticky) give up every partition before
joining (`on_partitions_revoked`); cooperative-sticky (KIP-429) keeps what it
owns, gives up only what moved after the rebalance, and joins once more so the
moved partitions can be handed out.

Committed offsets: OffsetCommit with the member id and generation, OffsetFetch
for where a newly assigned partition starts.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from kafkalab.client.assignors import RebalanceProtocol, assignor_for
from kafkalab.client.network_client import BrokerConnection, NetworkClient
from kafkalab.errors import Errors, KafkaError
from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.protocol.consumer_protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)

log = logging.getLogger(__name__)
TopicPartition = tuple[str, int]
RETRIABLE = (
    Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.COORDINATOR_LOAD_IN_PROGRESS,
    Errors.NOT_COORDINATOR,
    Errors.NETWORK_EXCEPTION,
)
MEMBER_LOST = (Errors.UNKNOWN_MEMBER_ID, Errors.ILLEGAL_GENERATION, Errors.FENCED_INSTANCE_ID)


class RebalanceListener:
    """Kafka's ConsumerRebalanceListener: override what you need."""

    def on_partitions_revoked(self, partitions: set[TopicPartition]) -> None: ...

    def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None: ...

    def on_partitions_lost(self, partitions: set[TopicPartition]) -> None:
        self.on_partitions_revoked(partitions)


class ConsumerCoordinator:
    def __init__(
        self,
        client: NetworkClient,
        config: dict[str, Any],
        topics: Callable[[], set[str]],
        listener: RebalanceListener | None = None,
    ) -> None:
        """`topics()`: what the consumer subscribes to now (a pattern's matches change)."""
        self.client = client
        self.group_id = config["group.id"]
        self.instance_id = config.get("group.instance.id")
        self.require_stable = config.get("isolation.level") == "read_committed"
        self.session_timeout_ms = int(config["session.timeout.ms"])
        self.rebalance_timeout_ms = int(config["max.poll.interval.ms"])
        self.heartbeat_s = int(config["heartbeat.interval.ms"]) / 1000
        self.assignors = [
            assignor_for(n.strip())
            for n in str(config["partition.assignment.strategy"]).split(",")
            if n.strip()
        ]
        self.cooperative = all(
            RebalanceProtocol.COOPERATIVE in a.supported_protocols for a in self.assignors
        )
        self.topics = topics
        self.listener = listener or RebalanceListener()
        self.member_id = ""
        self.generation = -1
        self.owned: set[TopicPartition] = set()
        self.rejoin_needed = True
        self.last_poll = time.monotonic()
        self._coordinator: BrokerConnection | None = None
        self._lock = threading.Lock()  # membership state, shared with the heartbeat thread
        self._stop = threading.Event()
        self._heartbeat: threading.Thread | None = None

    # -- the coordinator ------------------------------------------------------------------------

    def coordinator(self) -> BrokerConnection:
        if self._coordinator is not None and not self._coordinator.broken:
            return self._coordinator
        for _ in range(300):
            r = self.client.any_connection().request(
                ApiKeys.FIND_COORDINATOR, {"key": self.group_id, "key_type": 0}
            )
            if r["error_code"] == Errors.NONE:
                self.client.refresh_metadata([])
                self._coordinator = self.client.connection(r["node_id"])
                return self._coordinator
            if Errors(r["error_code"]) not in RETRIABLE:
                raise KafkaError(r["error_code"], f"FindCoordinator for group {self.group_id!r}")
            time.sleep(0.1)
        raise KafkaError(Errors.COORDINATOR_NOT_AVAILABLE, f"no coordinator for {self.group_id!r}")

    def _request(self, api: ApiKeys, body: dict) -> dict:
        try:
            return self.coordinator().request(api, body)
        except (OSError, KafkaError) as e:
            self._coordinator = None
            raise KafkaError(Errors.NETWORK_EXCEPTION, f"coordinator: {e}") from e

    def _lost_coordinator(self, error: Errors) -> bool:
        if error in (Errors.NOT_COORDINATOR, Errors.COORDINATOR_NOT_AVAILABLE):
            self._coordinator = None
        return error in RETRIABLE

    # -- membership ---------------------------------------------------------------------------

    def poll(self) -> set[TopicPartition] | None:
        """Called by KafkaConsumer.poll(): (re)join when needed. Returns the newly
        assigned partitions after a rebalance, None when nothing changed."""
        self.last_poll = time.monotonic()
        if self._heartbeat is None:
            self._heartbeat = threading.Thread(
                target=self._heartbeat_loop, daemon=True, name="kafkalab-heartbeat"
            )
            self._heartbeat.start()
        if not self.rejoin_needed:
            return None
        added: set[TopicPartition] = set()
        while self.rejoin_needed:
            added |= self._join_and_sync()
        return added

    def _join_and_sync(self) -> set[TopicPartition]:
        """One rebalance round: JoinGroup, the leader's assignment, SyncGroup; returns
        the partitions added (empty when the round must be tried again)."""
        if not self.cooperative and self.owned:
            self.listener.on_partitions_revoked(set(self.owned))  # eager: give up everything
            self.owned = set()
        r = self._join_group()
        with self._lock:
            self.member_id, self.generation = r["member_id"], r["generation_id"]
        assignments = []
        if r["leader"] == self.member_id:
            assignments = self._assign(r["protocol_name"], r["members"])
        s = self._sync_group(assignments)
        if s is None:
            return set()
        assignment = (
            set(decode_assignment(s["assignment"]).partitions) if s["assignment"] else set()
        )
        return self._on_join_complete(r["protocol_name"], assignment)

    def _join_group(self) -> dict:
        """JoinGroup until it succeeds (a member id asked for, a lost member or
        coordinator, a rebalance in progress: again); returns the response."""
        topics = self.topics()
        protocols = [
            {
                "name": a.name,
                "metadata": encode_subscription(
                    Subscription(
                        tuple(sorted(topics)),
                        a.subscription_user_data(topics),
                        tuple(sorted(self.owned)),
                        self.generation,
                    )
                ),
            }
            for a in self.assignors
        ]
        while True:
            r = self._request(
                ApiKeys.JOIN_GROUP,
                {
                    "group_id": self.group_id,
                    "session_timeout_ms": self.session_timeout_ms,
                    "rebalance_timeout_ms": self.rebalance_timeout_ms,
                    "member_id": self.member_id,
                    "group_instance_id": self.instance_id,
                    "protocol_type": "consumer",
                    "protocols": protocols,
                },
            )
            error = Errors(r["error_code"])
            if error == Errors.MEMBER_ID_REQUIRED:
                self.member_id = r["member_id"]
                continue
            if error in MEMBER_LOST:
                self._reset_member()
                continue
            if self._lost_coordinator(error) or error == Errors.REBALANCE_IN_PROGRESS:
                time.sleep(0.1)
                continue
            if error != Errors.NONE:
                raise KafkaError(error, f"JoinGroup {self.group_id!r}")
            return r

    def _sync_group(self, assignments: list[dict]) -> dict | None:
        """SyncGroup; the response, or None when the round must start again (the
        member or the coordinator lost, a new rebalance begun)."""
        s = self._request(
            ApiKeys.SYNC_GROUP,
            {
                "group_id": self.group_id,
                "generation_id": self.generation,
                "member_id": self.member_id,
                "group_instance_id": self.instance_id,
                "assignments": assignments,
            },
        )
        error = Errors(s["error_code"])
        if error != Errors.NONE:
            if error in MEMBER_LOST:
                self._reset_member()
            elif not (self._lost_coordinator(error) or error == Errors.REBALANCE_IN_PROGRESS):
                raise KafkaError(error, f"SyncGroup {self.group_id!r}")
            return None
        return s

    def _on_join_complete(
        self, protocol: str, assignment: set[TopicPartition]
    ) -> set[TopicPartition]:
        """Take the assignment: the assignor told, the listener told what was revoked
        and what was added; with cooperative rebalancing, revoked partitions mean one
        more round (KIP-429). Returns the partitions added."""
        chosen = next(a for a in self.assignors if a.name == protocol)
        chosen.on_assignment(sorted(assignment), self.generation)
        revoked = self.owned - assignment
        added = assignment - self.owned
        with self._lock:
            self.rejoin_needed = False
        if revoked:
            self.listener.on_partitions_revoked(revoked)
            if self.cooperative:  # KIP-429: join again so the moved partitions go out
                with self._lock:
                    self.rejoin_needed = True
        self.owned = assignment
        self.listener.on_partitions_assigned(added)
        return added

    def _assign(self, protocol: str, members: list[dict]) -> list[dict]:
        """The leader's part: run the assignor over everyone's subscriptions."""
        assignor = next(a for a in self.assignors if a.name == protocol)
        subscriptions = {m["member_id"]: decode_subscription(m["metadata"]) for m in members}
        instance_ids = {m["member_id"]: m.get("group_instance_id") for m in members}
        wanted = sorted({t for s in subscriptions.values() for t in s.topics})
        self.client.refresh_metadata(wanted)
        partitions_per_topic = {
            t: len(self.client.partitions[t]) for t in wanted if t in self.client.partitions
        }
        result = assignor.assign(partitions_per_topic, subscriptions, instance_ids)
        return [
            {"member_id": m, "assignment": encode_assignment(Assignment(tuple(sorted(tps))))}
            for m, tps in result.items()
        ]

    def _reset_member(self) -> None:
        """Removed from the group (session timeout, or fenced): the partitions are lost."""
        lost, self.owned = set(self.owned), set()
        with self._lock:
            self.member_id, self.generation, self.rejoin_needed = "", -1, True
        if lost:
            self.listener.on_partitions_lost(lost)

    def _heartbeat_loop(self) -> None:
        while not self._stop.wait(self.heartbeat_s):
            if time.monotonic() - self.last_poll > self.rebalance_timeout_ms / 1000:
                log.warning(
                    "%s: poll() not called within max.poll.interval.ms=%d: leaving the group",
                    self.group_id,
                    self.rebalance_timeout_ms,
                )
                self.leave()
                continue
            with self._lock:
                if self.generation < 0 or self.rejoin_needed:
                    continue
                body = {
                    "group_id": self.group_id,
                    "generation_id": self.generation,
                    "member_id": self.member_id,
                    "group_instance_id": self.instance_id,
                }
            try:
                error = Errors(self._request(ApiKeys.HEARTBEAT, body)["error_code"])
            except KafkaError:
                continue
            with self._lock:
                if error == Errors.REBALANCE_IN_PROGRESS:
                    self.rejoin_needed = True
                elif error in MEMBER_LOST:
                    self.rejoin_needed = True
                    self.generation = -1  # the next poll resets the member
                else:
                    self._lost_coordinator(error)

    # -- offsets -------------------------------------------------------------------------------

    def commit(self, offsets: dict[TopicPartition, int]) -> None:
        """OffsetCommit of `offsets` (the next offset to read) as this member."""
        topics: dict[str, list[dict]] = {}
        for (topic, partition), offset in sorted(offsets.items()):
            topics.setdefault(topic, []).append(
                {"partition_index": partition, "committed_offset": offset, "committed_metadata": ""}
            )
        for _ in range(50):
            r = self._request(
                ApiKeys.OFFSET_COMMIT,
                {
                    "group_id": self.group_id,
                    "generation_id_or_member_epoch": self.generation,
                    "member_id": self.member_id,
                    "group_instance_id": self.instance_id,
                    "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
                },
            )
            errors = {Errors(p["error_code"]) for t in r["topics"] for p in t["partitions"]}
            if errors <= {Errors.NONE}:
                return
            error = next(e for e in errors if e != Errors.NONE)
            if error in MEMBER_LOST or error == Errors.REBALANCE_IN_PROGRESS:
                with self._lock:
                    self.rejoin_needed = True
                raise KafkaError(error, "commit failed: the group rebalanced; poll() rejoins")
            if not self._lost_coordinator(error):
                raise KafkaError(error, "OffsetCommit")
            time.sleep(0.1)
        raise KafkaError(Errors.COORDINATOR_NOT_AVAILABLE, "OffsetCommit: no coordinator")

    def committed(self, partitions: set[TopicPartition]) -> dict[TopicPartition, int]:
        """The group's committed offsets of these partitions (-1 for none)."""
        topics: dict[str, list[int]] = {}
        for topic, partition in sorted(partitions):
            topics.setdefault(topic, []).append(partition)
        for _ in range(50):
            r = self._request(
                ApiKeys.OFFSET_FETCH,
                {
                    "group_id": self.group_id,
                    "topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()],
                    # read_committed: not past offsets an open transaction may still commit
                    "require_stable": self.require_stable,
                },
            )
            error = Errors(r.get("error_code", 0))
            unstable = any(
                p["error_code"] == Errors.UNSTABLE_OFFSET_COMMIT
                for t in r["topics"]
                for p in t["partitions"]
            )
            if error == Errors.NONE and unstable:  # Kafka's consumer waits and asks again
                time.sleep(0.1)
                continue
            if error == Errors.NONE:
                return {
                    (t["name"], p["partition_index"]): p["committed_offset"]
                    for t in r["topics"]
                    for p in t["partitions"]
                }
            if not self._lost_coordinator(error):
                raise KafkaError(error, "OffsetFetch")
            time.sleep(0.1)
        raise KafkaError(Errors.COORDINATOR_NOT_AVAILABLE, "OffsetFetch: no coordinator")

    # -- leaving ---------------------------------------------------------------------------------

    def leave(self) -> None:
        """LeaveGroup (a static member does not leave: it keeps its place for
        session.timeout.ms, so a restart causes no rebalance)."""
        with self._lock:
            member, self.generation, self.rejoin_needed = self.member_id, -1, True
            self.member_id = ""
        if self.instance_id is not None or not member:
            return
        try:
            self._request(
                ApiKeys.LEAVE_GROUP,
                {
                    "group_id": self.group_id,
                    "member_id": member,
                    "members": [{"member_id": member, "group_instance_id": None}],
                },
            )
        except KafkaError as e:
            log.info("LeaveGroup failed (%s); the session timeout removes us", e)

    def close(self) -> None:
        self._stop.set()
        if self._heartbeat is not None:
            self._heartbeat.join()
        if self.owned:
            self.listener.on_partitions_revoked(set(self.owned))
            self.owned = set()
        self.leave()
