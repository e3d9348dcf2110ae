"""Partition: one partition on one broker, as leader or follower (sans-IO).

Kafka's class: kafka.cluster.Partition. It owns the partition's log and, on the
leader, what it knows of every follower. No sockets and no clock of its own:
callers pass the time in ms and carry the messages, so a notebook, a
hypothesis state machine, a TLA+ trace and the broker's replica fetcher all
drive the same code step by step.

On the leader:
- each follower's fetch tells the leader that follower's log end offset (LEO);
- the high watermark (HW) is the smallest LEO over the ISR, and never moves back;
- a follower that has not caught up for `replica.lag.time.max.ms` is proposed
  for removal from the ISR, and one that has caught up to the HW (in the
  current leader epoch) is proposed for addition. Proposals go to the
  controller (AlterPartition); until it answers, the HW is computed over the
  *maximal* ISR (current plus pending additions), so a pending change can never
  make the HW move too far (Kafka: PartitionState with isInflight);
- acks=all appends need `min.insync.replicas` members in the ISR.

On a follower, after it becomes one, the truncation rule decides how much of
its own tail it must drop before fetching (`TruncationRule`):
    high-watermark        truncate to the local HW (before KIP-101: loses or
                          diverges data in the labs' scenarios; for history only)
    leader-epoch          ask the leader where our latest epoch ended and
                          truncate there (KIP-101, with KIP-279's repeat)
    fenced-leader-epoch   the same, with the request fenced by our current
                          leader epoch (KIP-320); the default
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from enum import StrEnum

from kafkalab.errors import Errors, KafkaError
from kafkalab.storage.producer_state_manager import VerificationGuard
from kafkalab.storage.unified_log import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIERED_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    AppendOrigin,
    FetchIsolation,
    LogAppendInfo,
    TimestampAndOffset,
    UnifiedLog,
)


class Role(StrEnum):
    """What this broker is for the partition (a string, so it prints and serialises
    as "leader" / "follower" / "none")."""

    LEADER = "leader"
    FOLLOWER = "follower"
    NONE = "none"


class TruncationRule(StrEnum):
    """kafkalab.follower.truncation.rule: how a new follower finds where to cut."""

    HIGH_WATERMARK = "high-watermark"
    LEADER_EPOCH = "leader-epoch"
    FENCED_LEADER_EPOCH = "fenced-leader-epoch"


TRUNCATION_RULES = tuple(TruncationRule)

#: OffsetForLeaderEpoch as a follower asks it: (our latest epoch, our current
#: leader epoch for fencing or -1) -> (epoch, end offset) in the leader's log.
EpochQuestion = tuple[int, int]
EpochAnswer = tuple[int, int]


@dataclass
class ReplicaState:
    """What the leader knows of one follower (Kafka: Replica / ReplicaState)."""

    broker_id: int
    log_end_offset: int = -1
    last_caught_up_time_ms: int = 0
    last_fetch_time_ms: int = 0
    last_fetch_leader_log_end_offset: int = 0  # the leader's LEO at that fetch
    log_start_offset: int = -1  # as its last fetch said (-1: not known yet)


@dataclass
class IsrChange:
    """An AlterPartition proposal from the leader to the controller."""

    topic: str
    partition: int
    leader_epoch: int
    partition_epoch: int
    new_isr: list[int]


@dataclass
class Partition:
    topic: str
    partition: int
    local_broker_id: int
    log: UnifiedLog
    replica_lag_time_max_ms: int = 30_000
    truncation_rule: TruncationRule = TruncationRule.FENCED_LEADER_EPOCH
    role: Role = Role.NONE
    leader_id: int = -1
    leader_epoch: int = -1
    partition_epoch: int = -1
    replicas: list[int] = field(default_factory=list)
    isr: list[int] = field(default_factory=list)
    pending_isr: list[int] | None = None  # proposed to the controller, not yet confirmed
    remote: dict[int, ReplicaState] = field(default_factory=dict)
    #: may this broker join the ISR? (registered and unfenced in the metadata: Kafka's
    #: isReplicaIsrEligible; the controller would refuse a fenced one)
    isr_eligible: Callable[[int], bool] = lambda broker_id: True

    def __post_init__(self) -> None:
        if self.truncation_rule not in TRUNCATION_RULES:
            raise ValueError(
                f"unknown follower truncation rule {self.truncation_rule!r}; "
                f"use one of {', '.join(TRUNCATION_RULES)}"
            )
        self.truncation_rule = TruncationRule(self.truncation_rule)

    # -- becoming leader or follower ---------------------------------------------------------

    def make_leader(
        self,
        leader_epoch: int,
        isr: list[int],
        replicas: list[int],
        partition_epoch: int,
        now_ms: int,
    ) -> None:
        """The controller elected this broker (Kafka: makeLeader). The new epoch
        starts at our log end offset; followers' LEOs are unknown until they fetch."""
        if leader_epoch < self.leader_epoch:
            raise KafkaError(
                Errors.FENCED_LEADER_EPOCH,
                f"epoch {leader_epoch} is older than our {self.leader_epoch}",
            )
        self.role, self.leader_id = Role.LEADER, self.local_broker_id
        self.leader_epoch, self.partition_epoch = leader_epoch, partition_epoch
        self.replicas, self.isr, self.pending_isr = list(replicas), list(isr), None
        self.log.leader_epoch_cache.assign(leader_epoch, self.log.log_end_offset)
        self.remote = {
            b: ReplicaState(b, last_caught_up_time_ms=now_ms, last_fetch_time_ms=now_ms)
            for b in replicas
            if b != self.local_broker_id
        }
        self.maybe_increment_high_watermark()

    def make_follower(
        self,
        leader_id: int,
        leader_epoch: int,
        isr: list[int],
        replicas: list[int],
        partition_epoch: int,
    ) -> None:
        """Another broker leads now (Kafka: makeFollower). The caller then truncates
        with `truncate_by_rule()` (or `truncation_step()` round by round) before fetching."""
        if leader_epoch < self.leader_epoch:
            raise KafkaError(
                Errors.FENCED_LEADER_EPOCH,
                f"epoch {leader_epoch} is older than our {self.leader_epoch}",
            )
        self.role, self.leader_id = Role.FOLLOWER, leader_id
        self.leader_epoch, self.partition_epoch = leader_epoch, partition_epoch
        self.replicas, self.isr, self.pending_isr = list(replicas), list(isr), None
        self.remote = {}

    def update_assignment(
        self, replicas: list[int], isr: list[int], partition_epoch: int, now_ms: int
    ) -> None:
        """The controller changed the replicas in this leader epoch (a reassignment
        started, or was cancelled, with the same leader): a leader starts tracking
        the replicas that join (they fetch and catch up into the ISR) and forgets
        those that left; a follower only keeps the lists current."""
        self.replicas, self.isr, self.partition_epoch = list(replicas), list(isr), partition_epoch
        self.pending_isr = None
        if self.role == Role.LEADER:
            for b in replicas:
                if b != self.local_broker_id and b not in self.remote:
                    self.remote[b] = ReplicaState(b, last_fetch_time_ms=now_ms)
            for b in [b for b in self.remote if b not in replicas]:
                del self.remote[b]
            self.maybe_increment_high_watermark()

    # -- the leader ---------------------------------------------------------------------------

    @property
    def maximal_isr(self) -> list[int]:
        """The ISR the HW is computed over: current plus pending additions."""
        if self.pending_isr is None:
            return self.isr
        return sorted(set(self.isr) | set(self.pending_isr))

    def append_records_to_leader(
        self,
        records: bytes | bytearray,
        required_acks: int,
        min_insync_replicas: int,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        verification_guard: VerificationGuard | None = None,
    ) -> LogAppendInfo:
        """Append as leader (Kafka: appendRecordsToLeader). acks=all refuses the
        write when the ISR is smaller than min.insync.replicas. `verification_guard`:
        see UnifiedLog.append_as_leader."""
        self.require_leader()
        if required_acks == -1 and len(self.isr) < min_insync_replicas:
            raise KafkaError(
                Errors.NOT_ENOUGH_REPLICAS,
                f"{self.topic}-{self.partition}: ISR {self.isr} has fewer than "
                f"min.insync.replicas={min_insync_replicas} members",
            )
        info = self.log.append_as_leader(records, self.leader_epoch, origin, verification_guard)
        self.maybe_increment_high_watermark()
        return info

    def update_follower_fetch_state(
        self, broker_id: int, fetch_offset: int, now_ms: int, log_start_offset: int = -1
    ) -> IsrChange | None:
        """A follower fetched from `fetch_offset`: everything below it is on the
        follower, so that is its LEO (Kafka: updateFollowerFetchState); its log
        start offset, when the fetch says it (-1: not said), is what DeleteRecords
        waits for (`low_watermark`). Moves the HW and may propose adding the
        follower to the ISR."""
        self.require_leader()
        replica = self.remote.get(broker_id)
        if replica is None:
            raise KafkaError(
                Errors.UNKNOWN_SERVER_ERROR,
                f"broker {broker_id} is not a replica of {self.topic}-{self.partition}",
            )
        # Caught up means: at the leader's LEO now, or at least at the LEO the leader
        # had at this follower's previous fetch (then it was caught up as of that
        # fetch). A follower under steady load is never *exactly* at the LEO, and
        # must not be dropped for it (Kafka: ReplicaState.updateFetchState).
        leader_leo = self.log.log_end_offset
        if fetch_offset >= leader_leo:
            replica.last_caught_up_time_ms = max(replica.last_caught_up_time_ms, now_ms)
        elif fetch_offset >= replica.last_fetch_leader_log_end_offset:
            replica.last_caught_up_time_ms = max(
                replica.last_caught_up_time_ms, replica.last_fetch_time_ms
            )
        replica.last_fetch_leader_log_end_offset = leader_leo
        replica.last_fetch_time_ms = now_ms
        replica.log_end_offset = fetch_offset
        if log_start_offset >= 0:
            replica.log_start_offset = log_start_offset
        change = self._maybe_expand_isr(replica)
        self.maybe_increment_high_watermark()
        return change

    def _maybe_expand_isr(self, replica: ReplicaState) -> IsrChange | None:
        """A follower outside the ISR joins once it has reached the HW and the start
        of the current leader epoch (Kafka: isFollowerInSync / KIP-101 rule), and
        only while the metadata shows its broker unfenced (Kafka:
        isReplicaIsrEligible). A fenced broker's follower may go on fetching, but the
        controller refuses it in an ISR: proposing it would be refused again at
        every fetch, an AlterPartition storm at a few hundred partitions."""
        if replica.broker_id in self.maximal_isr or self.pending_isr is not None:
            return None
        if not self.isr_eligible(replica.broker_id):
            return None
        epoch_start = self.log.leader_epoch_cache.end_offset_for(
            self.leader_epoch - 1, self.log.log_end_offset
        )[1]
        caught_up = replica.log_end_offset >= max(self.log.high_watermark, epoch_start)
        if not caught_up:
            return None
        return self._propose(sorted(self.isr + [replica.broker_id]))

    def maybe_shrink_isr(self, now_ms: int) -> IsrChange | None:
        """Propose dropping followers that have not caught up to the leader's LEO
        within replica.lag.time.max.ms (Kafka: maybeShrinkIsr)."""
        self.require_leader()
        if self.pending_isr is not None:
            return None
        lagging = [
            b
            for b in self.isr
            if b != self.local_broker_id
            and now_ms - self.remote[b].last_caught_up_time_ms > self.replica_lag_time_max_ms
        ]
        if not lagging:
            return None
        return self._propose([b for b in self.isr if b not in lagging])

    def _propose(self, new_isr: list[int]) -> IsrChange:
        self.pending_isr = new_isr
        return IsrChange(
            self.topic, self.partition, self.leader_epoch, self.partition_epoch, new_isr
        )

    def apply_isr_change(self, isr: list[int], partition_epoch: int) -> bool:
        """The controller committed an ISR (AlterPartition answered, or the metadata
        log says so). False, and nothing changes, for an ISR older than the one
        applied: the partition epoch never goes back (Kafka ignores such a stale
        AlterPartition answer). The answer and the metadata log reach the leader on
        two connections, so an AlterPartition answer can arrive after the metadata
        already brought a newer ISR (say, the controller fenced a broker in it):
        applying it would put that broker back, and acks=all would wait for it
        until replica.lag.time.max.ms."""
        if partition_epoch < self.partition_epoch:
            return False
        self.isr, self.partition_epoch, self.pending_isr = list(isr), partition_epoch, None
        self.maybe_increment_high_watermark()
        return True

    def reject_isr_change(self) -> None:
        self.pending_isr = None

    def check_enough_replicas_reach_offset(self, required_offset: int) -> tuple[bool, Errors]:
        """Has an acks=all append that ends at `required_offset` been replicated?
        (Kafka: checkEnoughReplicasReachOffset.) (done, error): not done while the HW
        is below it; done with NOT_ENOUGH_REPLICAS_AFTER_APPEND when the HW got
        there but the ISR shrank below min.insync.replicas meanwhile; done with
        NOT_LEADER_OR_FOLLOWER when this broker no longer leads."""
        if self.role != Role.LEADER:
            return True, Errors.NOT_LEADER_OR_FOLLOWER
        if self.log.high_watermark < required_offset:
            return False, Errors.NONE
        if len(self.isr) < self.log.config.min_insync_replicas:
            return True, Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return True, Errors.NONE

    def maybe_increment_high_watermark(self) -> bool:
        """HW = min LEO over the maximal ISR (the leader's own included); it only
        moves forward (Kafka: maybeIncrementLeaderHW)."""
        if self.role != Role.LEADER:
            return False
        leos = [self.log.log_end_offset]
        for b in self.maximal_isr:
            if b != self.local_broker_id:
                leos.append(self.remote[b].log_end_offset if b in self.remote else -1)
        new_hw = min(leos)
        if new_hw > self.log.high_watermark:
            self.log.update_high_watermark(new_hw)
            return True
        return False

    def delete_records_on_leader(self, offset: int) -> int:
        """DeleteRecords on the leader (Kafka: Partition.deleteRecordsOnLeader): move
        the log start offset to `offset` (-1: the high watermark) and return the
        offset asked for. POLICY_VIOLATION on a compact-only topic, whose records
        only the cleaner removes; OFFSET_OUT_OF_RANGE below 0 or past the HW."""
        self.require_leader()
        if not self.log.config.delete:
            raise KafkaError(
                Errors.POLICY_VIOLATION,
                f"Records of partition {self.topic}-{self.partition} can not be deleted due "
                "to the configured policy (cleanup.policy without delete)",
            )
        target = self.log.high_watermark if offset == -1 else offset
        if target < 0:
            raise KafkaError(
                Errors.OFFSET_OUT_OF_RANGE,
                f"The offset {target} for partition {self.topic}-{self.partition} is not valid",
            )
        self.log.maybe_increment_log_start_offset(target)  # OFFSET_OUT_OF_RANGE past the HW
        return target

    def low_watermark(self, alive: Callable[[int], bool]) -> int:
        """The smallest log start offset over this leader and every follower on a live
        broker, as their fetches said (Kafka: lowWatermarkIfLeader): a DeleteRecords
        is done once it reaches the offset asked for."""
        self.require_leader()
        low = self.log.log_start_offset
        for replica in self.remote.values():
            if alive(replica.broker_id):
                low = min(low, replica.log_start_offset)
        return low

    def require_leader(self) -> None:
        if self.role != Role.LEADER:
            raise KafkaError(
                Errors.NOT_LEADER_OR_FOLLOWER,
                f"broker {self.local_broker_id} does not lead "
                f"{self.topic}-{self.partition}; leader is {self.leader_id}",
            )

    def last_offset_for_leader_epoch(
        self, requested_epoch: int, current_leader_epoch: int = -1
    ) -> tuple[int, int]:
        """OffsetForLeaderEpoch on this broker (Kafka: Partition.lastOffsetForLeaderEpoch):
        (the largest epoch <= requested that we know, where it ends). Only the
        leader answers; a request fenced by the asker's current epoch (KIP-320)
        is refused when that epoch is not ours."""
        if current_leader_epoch >= 0 and current_leader_epoch > self.leader_epoch:
            raise KafkaError(
                Errors.UNKNOWN_LEADER_EPOCH,
                f"{self.topic}-{self.partition}: epoch {current_leader_epoch} is newer than "
                f"ours ({self.leader_epoch})",
            )
        if current_leader_epoch >= 0 and current_leader_epoch < self.leader_epoch:
            raise KafkaError(
                Errors.FENCED_LEADER_EPOCH,
                f"{self.topic}-{self.partition}: epoch {current_leader_epoch} is older than "
                f"ours ({self.leader_epoch})",
            )
        self.require_leader()
        return self.log.leader_epoch_cache.end_offset_for(requested_epoch, self.log.log_end_offset)

    def _check_current_leader_epoch(self, current_leader_epoch: int) -> None:
        """A request that names the leader epoch it expects (KIP-320) is refused
        when that is not ours: FENCED_LEADER_EPOCH if older, UNKNOWN_LEADER_EPOCH if
        newer (Kafka: Partition.getLocalLog)."""
        if current_leader_epoch < 0 or current_leader_epoch == self.leader_epoch:
            return
        error = (
            Errors.FENCED_LEADER_EPOCH
            if current_leader_epoch < self.leader_epoch
            else Errors.UNKNOWN_LEADER_EPOCH
        )
        raise KafkaError(
            error,
            f"{self.topic}-{self.partition}: the request expects leader epoch "
            f"{current_leader_epoch}, this replica is in {self.leader_epoch}",
        )

    def fetch_offset_for_timestamp(
        self,
        timestamp: int,
        isolation: FetchIsolation,
        current_leader_epoch: int = -1,
        fetch_only_from_leader: bool = True,
    ) -> TimestampAndOffset | None:
        """ListOffsets on this replica (Kafka: Partition.fetchOffsetForTimestamp).

        Consumers and followers ask the leader only (NOT_LEADER_OR_FOLLOWER
        elsewhere); only a debugging request (replica id -2) may read a
        follower's own view. "Latest" is the last offset the asker may fetch:
        the HW for a consumer (the LSO under read_committed), the LEO for a
        replica, stamped with the current leader epoch. Earliest and timestamp
        lookups carry the epoch of the offset they find."""
        self._check_current_leader_epoch(current_leader_epoch)
        if fetch_only_from_leader:
            self.require_leader()
        if timestamp == LATEST_TIMESTAMP:
            return TimestampAndOffset(
                -1, self.log.last_fetchable_offset(isolation), self.leader_epoch
            )
        if timestamp == LATEST_TIERED_TIMESTAMP:  # nothing is tiered: Kafka's answer
            return TimestampAndOffset(-1, -1, -1)
        special = (EARLIEST_TIMESTAMP, MAX_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP)
        if timestamp not in special and timestamp < 0:
            raise KafkaError(Errors.INVALID_REQUEST, f"no such ListOffsets timestamp {timestamp}")
        found = self.log.fetch_offset_by_timestamp(timestamp)
        if found is None:
            return None
        epoch = self.log.leader_epoch_cache.epoch_for_offset(found.offset)
        return TimestampAndOffset(found.timestamp, found.offset, epoch)

    # -- the follower -------------------------------------------------------------------------

    def epoch_query(self) -> tuple[int, int] | None:
        """What to ask the leader before fetching: (our latest epoch, our current
        leader epoch for fencing, or -1), or None when the rule does not ask."""
        if self.truncation_rule == TruncationRule.HIGH_WATERMARK:
            return None
        latest = self.log.leader_epoch_cache.latest_epoch
        if latest < 0:
            return None
        fenced = self.truncation_rule == TruncationRule.FENCED_LEADER_EPOCH
        current = self.leader_epoch if fenced else -1
        return latest, current

    def truncation_step(self, leader_answer: tuple[int, int] | None = None) -> tuple[int, bool]:
        """One round of finding where this follower must cut its log before fetching
        (Kafka: AbstractFetcherThread.getOffsetTruncationState). Returns
        (offset, complete); when not complete, cut there and ask again.

        high-watermark, or no epochs to ask about, or the leader knows none of
        ours: cut at the local HW. Otherwise the leader answered (E, X): epoch E
        (the largest it knows <= our latest) ends at X in its log. Then
          - we know no epoch <= E: cut at X;
          - our largest epoch <= E is E: cut at min(where E ends for us, X);
          - it is an older epoch (E was never ours): cut where that one ends for
            us, and ask again with our new latest epoch (KIP-279)."""
        leo = self.log.log_end_offset
        fallback = (min(self.log.high_watermark, leo), True)
        if self.truncation_rule == TruncationRule.HIGH_WATERMARK or self.epoch_query() is None:
            return fallback
        if leader_answer is None:
            raise ValueError(
                "leader-epoch truncation needs the leader's OffsetForLeaderEpoch answer"
            )
        epoch, end_offset = leader_answer
        if epoch < 0 or end_offset < 0:
            return fallback
        our_epoch, our_end = self.log.leader_epoch_cache.end_offset_for(epoch, leo)
        if our_end < 0:
            return min(end_offset, leo), True
        if our_epoch != epoch:
            return min(our_end, leo), False
        return min(our_end, end_offset, leo), True

    def truncation(self) -> Generator[EpochQuestion, EpochAnswer | None, list[dict] | None]:
        """Every round of finding where to cut, and the cuts, as a generator (Kafka:
        the fetcher's Truncating state). It yields each OffsetForLeaderEpoch
        question; the caller sends back the leader's answer. It returns what
        each round asked, heard and did, or None when an answer did not come
        (None sent back): the truncation is not complete and must run again
        before fetching. The labs (`truncate_by_rule`, answers from a Partition
        object) and the broker's replica fetcher (answers over the network)
        run these same steps."""
        rounds: list[dict] = []
        for _ in range(1 + len(self.log.leader_epoch_cache.entries)):
            question = self.epoch_query()
            answer = None
            if question is not None:
                answer = yield question
                if answer is None:
                    return None
            point, complete = self.truncation_step(answer)
            self.truncate_to(point)
            rounds.append({"asked": question, "answered": answer, "truncated to": point})
            if complete:
                return rounds
        return None

    def truncate_by_rule(self, ask: Callable[[int, int], EpochAnswer]) -> list[dict]:
        """Run the truncation rounds, asking the leader with `ask(latest_epoch,
        current_epoch) -> (epoch, end_offset)` (OffsetForLeaderEpoch), and cut.
        Returns what each round asked, heard and did (the labs print it)."""
        steps = self.truncation()
        try:
            question = next(steps)
            while True:
                question = steps.send(ask(*question))
        except StopIteration as done:
            if done.value is None:
                raise RuntimeError(
                    f"{self.topic}-{self.partition}: truncation did not converge"
                ) from None
            return done.value

    def truncate_to(self, offset: int) -> bool:
        return self.log.truncate_to(offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """The leader no longer has our fetch offset (OFFSET_OUT_OF_RANGE after its
        retention): drop everything and start again at `offset`."""
        self.log.truncate_fully_and_start_at(offset)

    def append_records_to_follower(
        self, records: bytes | bytearray, leader_hw: int, leader_log_start_offset: int = -1
    ) -> None:
        """Append what the leader sent and learn its HW (never past our LEO) and its
        log start offset (DeleteRecords on the leader: never past our HW; Kafka:
        processPartitionData's maybeIncrementLogStartOffset)."""
        if records:
            self.log.append_as_follower(records)
        self.log.update_high_watermark(
            max(self.log.high_watermark, min(leader_hw, self.log.log_end_offset))
        )
        if leader_log_start_offset > self.log.log_start_offset:
            self.log.maybe_increment_log_start_offset(
                min(leader_log_start_offset, self.log.high_watermark)
            )
