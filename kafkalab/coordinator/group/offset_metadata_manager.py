"""OffsetMetadataManager: committed offsets, kept in __consumer_offsets.

Kafka's class: org.apache.kafka.coordinator.group.OffsetMetadataManager (and the
offset half of kafka.coordinator.group.GroupMetadataManager in 3.x): OffsetCommit,
TxnOffsetCommit and the end of its transaction, OffsetFetch, OffsetDelete, and the
expiry of offsets nobody needs (offsets.retention.minutes).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import TYPE_CHECKING

from kafkalab.coordinator.group import coordinator_records as rec
from kafkalab.coordinator.group.classic_group import ClassicGroup
from kafkalab.coordinator.group.classic_group_manager import ClassicGroupManager
from kafkalab.coordinator.group.consumer_group import ConsumerGroup
from kafkalab.coordinator.group.coordinator_records import (
    OffsetAndMetadata,
)
from kafkalab.coordinator.group.group_runtime import (
    COMPLETING,
    DEAD,
    EMPTY,
    PREPARING,
    STABLE,
    UNKNOWN_MEMBER_ID,
    AppendKind,
    AppendPayload,
    GroupPendingAppend,
    OffsetsAppend,
    TopicPartition,
)
from kafkalab.coordinator.group.results import (
    AppendRecords,
    CommitOffset,
    Effects,
    OffsetCommitResult,
    OffsetDeleteResult,
    OffsetFetchResult,
    PartitionOffset,
    Respond,
)
from kafkalab.errors import Errors
from kafkalab.protocol.consumer_protocol import PROTOCOL_TYPE

#: OffsetCommit v9 is the first a KIP-848 member may commit with (Kafka: ConsumerGroup.
#: validateOffsetCommit); a caller that names no version speaks the latest, v10.
FIRST_MEMBER_EPOCH_OFFSET_COMMIT_VERSION = 9
OFFSET_COMMIT_LATEST_VERSION = 10

if TYPE_CHECKING:
    from kafkalab.coordinator.group.group_coordinator import GroupCoordinator


def store_offsets_error(error: Errors) -> Errors:
    """What a failed write of offset records becomes for the client (Kafka: storeOffsets)."""
    if error in (
        Errors.UNKNOWN_TOPIC_OR_PARTITION,
        Errors.NOT_ENOUGH_REPLICAS,
        Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ):
        return Errors.COORDINATOR_NOT_AVAILABLE
    if error in (Errors.NOT_LEADER_OR_FOLLOWER, Errors.KAFKA_STORAGE_ERROR):
        return Errors.NOT_COORDINATOR
    if error in (Errors.MESSAGE_TOO_LARGE, Errors.RECORD_LIST_TOO_LARGE, Errors.INVALID_FETCH_SIZE):
        return Errors.INVALID_COMMIT_OFFSET_SIZE
    return error


class OffsetMetadataManager:
    """The offsets of the groups of a GroupCoordinator."""

    def __init__(self, shard: GroupCoordinator) -> None:
        self.shard = shard
        # TxnOffsetCommit appends whose transaction's marker was written before they
        # were acknowledged (the transaction coordinator aborted it meanwhile, say):
        # append id -> committed. In the log the record comes before the marker.
        self._ended_before_acknowledged: dict[int, bool] = {}

    # ======================================================================================
    # offsets
    # ======================================================================================

    def commit_offsets(
        self,
        group_id: str,
        offsets: dict[TopicPartition, CommitOffset],
        *,
        generation_id: int = -1,
        member_id: str = UNKNOWN_MEMBER_ID,
        group_instance_id: str | None = None,
        expire_timestamp_ms: int | None = None,
        api_version: int = OFFSET_COMMIT_LATEST_VERSION,
        now_ms: int,
        request: Hashable | None = None,
    ) -> Effects:
        """OffsetCommit. Members commit with their generation; generation -1 with no
        member id is a consumer that only stores offsets here (allowed while the group
        is Empty). A KIP-848 member commits with its member epoch, in OffsetCommit v9
        or later (`api_version`: the request's). The answer comes once the records
        are written."""
        effects = self.shard.begin_call(now_ms, request)
        request = effects.request

        def answer(error: Errors) -> Effects:
            effects.append(Respond(request, OffsetCommitResult({tp: error for tp in offsets})))
            return self.shard.end_call(effects, now_ms)

        error = self.shard.group_status(group_id, "offset_commit")
        if error is not None:
            return answer(error)
        consumer = self.shard.consumer_groups.get(group_id)
        if consumer is not None and (consumer.members or generation_id >= 0 or member_id):
            # a KIP-848 group: members commit with their member epoch
            error = self._validate_consumer_group_commit(
                consumer, member_id, generation_id, api_version=api_version
            )
            if error is not None:
                return answer(error)
            group = self.shard.groups.get(group_id)
            if group is None:  # its offsets live beside it, as an Empty holder
                group = self.shard.groups[group_id] = ClassicGroup(group_id, EMPTY, now_ms)
            self._store_offsets(group, offsets, expire_timestamp_ms, now_ms, request, effects)
            return self.shard.end_call(effects, now_ms)
        group = self.shard.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                return answer(Errors.ILLEGAL_GENERATION)
            group = self.shard.groups[group_id] = ClassicGroup(group_id, EMPTY, now_ms)
        error = self._validate_offset_commit(group, generation_id, member_id, group_instance_id)
        if error is not None:
            return answer(error)
        if group.is_(COMPLETING):
            return answer(Errors.REBALANCE_IN_PROGRESS)
        if group.state in (STABLE, PREPARING):
            # commits are allowed while rebalancing: the heartbeat tells the member
            self.shard.classic_manager.rebalance.schedule_heartbeat(
                group, group.get(member_id), now_ms
            )
        self._store_offsets(group, offsets, expire_timestamp_ms, now_ms, request, effects)
        return self.shard.end_call(effects, now_ms)

    @classmethod
    def _validate_offset_commit(
        cls,
        group: ClassicGroup,
        generation_id: int,
        member_id: str,
        instance_id: str | None,
    ) -> Errors | None:
        if group.is_(DEAD):
            return Errors.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and group.is_(EMPTY):
            # Kafka's ClassicGroup.validateOffsetCommit: generation -1 is an admin client
            # or a consumer without group management (librdkafka's KIP-848 consumer
            # commits so, with a member id it made itself): any member id is accepted
            # while the group is Empty.
            return None
        if generation_id >= 0 or member_id != UNKNOWN_MEMBER_ID or instance_id is not None:
            error = ClassicGroupManager.validate_current_member(group, member_id, instance_id)
            if error is not None:
                return error
            if generation_id != group.generation_id:
                return Errors.ILLEGAL_GENERATION
            return None
        if not group.is_(EMPTY):
            return Errors.UNKNOWN_MEMBER_ID  # only members commit to a non-empty group
        return None

    @staticmethod
    def _validate_consumer_group_commit(
        consumer: ConsumerGroup,
        member_id: str,
        member_epoch: int,
        *,
        api_version: int | None = None,
    ) -> Errors | None:
        """Kafka: ConsumerGroup.validateOffsetCommit. Epoch -1 with no members: an
        admin or a consumer without group management; otherwise the member must
        exist and commit at its current epoch (STALE_MEMBER_EPOCH: retry after the
        next heartbeat). A plain OffsetCommit (`api_version` given; None for
        TxnOffsetCommit) from a member below v9 is UNSUPPORTED_VERSION: before v9 the
        field held a classic generation, not a member epoch."""
        if member_epoch < 0 and not consumer.members:
            return None
        member = consumer.members.get(member_id)
        if member is None:
            return Errors.UNKNOWN_MEMBER_ID
        if api_version is not None and api_version < FIRST_MEMBER_EPOCH_OFFSET_COMMIT_VERSION:
            return Errors.UNSUPPORTED_VERSION
        if member_epoch != member.member_epoch:
            return Errors.STALE_MEMBER_EPOCH
        return None

    def _store_offsets(
        self,
        group: ClassicGroup,
        offsets: dict[TopicPartition, CommitOffset],
        expire_timestamp_ms: int | None,
        now_ms: int,
        request: Hashable,
        effects: Effects,
        producer: tuple[int, int] | None = None,
    ) -> None:
        """Write the offsets (Kafka: storeOffsets). `producer` (id, epoch): a
        TxnOffsetCommit, held pending for that producer until its transaction ends."""
        too_large = {
            tp
            for tp, c in offsets.items()
            if c.metadata is not None
            and len(c.metadata) > self.shard.config.offset_metadata_max_bytes
        }
        if expire_timestamp_ms is not None:
            # now + a retention_time_ms from the wire: keep it an int64, as the
            # OffsetCommitValue v1 record field is (the fuzzer sent 2^63 - 1)
            expire_timestamp_ms = max(-(2**63), min(expire_timestamp_ms, 2**63 - 1))
        to_write = {
            tp: OffsetAndMetadata(
                c.offset, c.leader_epoch, c.metadata or "", now_ms, expire_timestamp_ms
            )
            for tp, c in offsets.items()
            if tp not in too_large
        }
        if not to_write:
            effects.append(
                Respond(
                    request,
                    OffsetCommitResult({tp: Errors.OFFSET_METADATA_TOO_LARGE for tp in offsets}),
                )
            )
            return
        producer_id, producer_epoch = producer if producer is not None else (-1, -1)
        kind = AppendKind.OFFSETS if producer is None else AppendKind.TXN_OFFSETS
        append_id = self.shard.runtime.add_append(
            kind,
            self.shard.partition_for(group.group_id),
            request,
            OffsetsAppend(group, to_write, frozenset(too_large), producer_id),
        )
        for tp in to_write:  # in flight: OffsetFetch(require_stable) says UNSTABLE_OFFSET_COMMIT
            group.pending_offset_commits[tp] = group.pending_offset_commits.get(tp, 0) + 1
        records = tuple(
            (rec.offset_commit_key(group.group_id, t, p), rec.offset_commit_value(om))
            for (t, p), om in to_write.items()
        )
        effects.append(
            AppendRecords(
                self.shard.partition_for(group.group_id),
                records,
                now_ms,
                append_id,
                producer_id,
                producer_epoch,
            )
        )

    def complete_offset_commit(
        self, pending: GroupPendingAppend, payload: AppendPayload, error: Errors, effects: Effects
    ) -> None:
        """An OffsetCommit's or a TxnOffsetCommit's records are written (NONE: replayed
        into the group, the same way as when the partition is loaded) or failed
        (nothing changed: the records are not in the log)."""
        assert isinstance(payload, OffsetsAppend)
        group, to_write, too_large = payload.group, payload.to_write, payload.too_large
        for tp in to_write:
            left = group.pending_offset_commits.get(tp, 0) - 1
            if left > 0:
                group.pending_offset_commits[tp] = left
            else:
                group.pending_offset_commits.pop(tp, None)
        ended = self._ended_before_acknowledged.pop(pending.append_id, None)
        if error == Errors.NONE and (self.shard.is_live(group) or payload.producer_id >= 0):
            # a transaction that ended meanwhile: its marker follows these records in
            # the log, so they are committed now (as a plain commit at their place in
            # the log) or dropped, leaving the producer's later transactions alone
            producer_id = payload.producer_id if ended is None else -1
            for tp, om in to_write.items() if ended is not False else ():
                self.replay_offset_commit(group, tp, om, producer_id, pending.append_id)
        answer = store_offsets_error(error) if error != Errors.NONE else Errors.NONE
        result = {tp: answer for tp in to_write}
        result.update({tp: Errors.OFFSET_METADATA_TOO_LARGE for tp in too_large})
        effects.append(Respond(pending.request, OffsetCommitResult(result)))

    # -- replay: one path for records written live and records loaded ------------------------

    @staticmethod
    def replay_offset_commit(
        group: ClassicGroup,
        tp: TopicPartition,
        om: OffsetAndMetadata | None,
        producer_id: int,
        seq: int,
    ) -> None:
        """Apply one OffsetCommit record (Kafka: OffsetMetadataManager.replay), `seq`
        its place in the log. A transaction's record (`producer_id` >= 0) waits for the
        marker ending it; a plain one is the committed offset; either only unless a
        later one is already there (acknowledgements arriving out of order never let
        an older commit win); a plain tombstone deletes the committed offset and what open
        transactions hold for the partition."""
        pending = group.pending_transactional_offset_commits
        if seq < group.offset_tombstone_seq.get(tp, 0):
            return  # written before the partition's offsets were deleted, acknowledged after
        if producer_id >= 0:
            by_tp = pending.setdefault(producer_id, {})
            if om is None:
                by_tp.pop(tp, None)
            elif tp not in by_tp or seq > by_tp[tp][1]:
                by_tp[tp] = (om, seq)
            if not by_tp:
                del pending[producer_id]
            return
        if om is None:
            group.offsets.pop(tp, None)
            group.offset_append_seq.pop(tp, None)
            group.offset_tombstone_seq[tp] = seq
            for producer in [p for p, by_tp in pending.items() if tp in by_tp]:
                del pending[producer][tp]
                if not pending[producer]:
                    del pending[producer]
        elif seq > group.offset_append_seq.get(tp, 0):
            group.offsets[tp] = om
            group.offset_append_seq[tp] = seq

    @staticmethod
    def replay_end_transaction_marker(
        group: ClassicGroup, producer_id: int, committed: bool
    ) -> None:
        """The COMMIT or ABORT marker of `producer_id`'s transaction (Kafka:
        replayEndTransactionMarker): its offsets become committed, unless a plain
        commit of the same partition came after them, or are dropped."""
        ended = group.pending_transactional_offset_commits.pop(producer_id, None)
        for tp, (om, seq) in (ended or {}).items() if committed else ():
            if seq > group.offset_append_seq.get(tp, 0):
                group.offsets[tp] = om
                group.offset_append_seq[tp] = seq

    def commit_transactional_offsets(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        offsets: dict[TopicPartition, CommitOffset],
        *,
        transactional_id: str = "",
        generation_id: int = -1,
        member_id: str = UNKNOWN_MEMBER_ID,
        group_instance_id: str | None = None,
        now_ms: int,
        request: Hashable | None = None,
    ) -> Effects:
        """TxnOffsetCommit: offsets a transactional producer commits for `group_id`
        as part of its transaction (send_offsets_to_transaction). They are written
        now, as a transactional batch of the producer, and stay invisible to
        OffsetFetch until `complete_transaction` (the COMMIT marker) makes them the
        group's committed offsets; an ABORT drops them. v3+ carry the consumer's
        generation and member id, checked as Kafka does (Kafka:
        GroupCoordinator.handleTxnCommitOffsets); unlike OffsetCommit it is allowed
        while the group completes a rebalance."""
        effects = self.shard.begin_call(now_ms, request)
        request = effects.request

        def answer(error: Errors) -> Effects:
            effects.append(Respond(request, OffsetCommitResult({tp: error for tp in offsets})))
            return self.shard.end_call(effects, now_ms)

        error = self.shard.group_status(group_id, "txn_offset_commit")
        if error is not None:
            return answer(error)
        consumer = self.shard.consumer_groups.get(group_id)
        if consumer is not None and (consumer.members or generation_id >= 0 or member_id):
            error = self._validate_consumer_group_commit(consumer, member_id, generation_id)
            if error is not None:  # Kafka answers a stale epoch so for transactions
                return answer(
                    Errors.ILLEGAL_GENERATION if error == Errors.STALE_MEMBER_EPOCH else error
                )
        group = self.shard.groups.get(group_id)
        if group is None:
            group = self.shard.groups[group_id] = ClassicGroup(group_id, EMPTY, now_ms)
        if group.is_(DEAD):
            return answer(Errors.COORDINATOR_NOT_AVAILABLE)
        if consumer is None:
            if group_instance_id is not None:
                current = group.current_static_member_id(group_instance_id)
                if current is not None and current != member_id:
                    return answer(Errors.FENCED_INSTANCE_ID)
            if member_id != UNKNOWN_MEMBER_ID and not group.has(member_id):
                return answer(Errors.UNKNOWN_MEMBER_ID)
            if generation_id >= 0 and generation_id != group.generation_id:
                return answer(Errors.ILLEGAL_GENERATION)
        self._store_offsets(
            group, offsets, None, now_ms, request, effects, producer=(producer_id, producer_epoch)
        )
        return self.shard.end_call(effects, now_ms)

    def complete_transaction(
        self,
        partition: int,
        producer_id: int,
        committed: bool,
        *,
        now_ms: int,
        request: Hashable | None = None,
    ) -> Effects:
        """The COMMIT (committed=True) or ABORT marker of `producer_id`'s transaction
        is written to __consumer_offsets-<partition>: its pending transactional
        offsets there become the groups' committed offsets (unless a plain commit of
        the same partition was written after them), or are dropped (Kafka:
        GroupCoordinator.scheduleHandleTxnCompletion, GroupMetadata.
        completePendingTxnOffsetCommit). A partition still loading reads the marker
        from the log itself. Answers None."""
        effects = self.shard.begin_call(now_ms, request)
        if (
            partition in self.shard.partitions.owned
            and partition not in self.shard.partitions.loading
        ):
            for group in self.shard.groups.values():
                if self.shard.partition_for(group.group_id) == partition:
                    self.replay_end_transaction_marker(group, producer_id, committed)
            for append in self.shard.runtime.appends.values():
                payload = append.payload
                if (
                    append.kind is AppendKind.TXN_OFFSETS
                    and append.partition == partition
                    and isinstance(payload, OffsetsAppend)
                    and payload.producer_id == producer_id
                ):
                    # the first marker after the record ends it; later ones find nothing
                    self._ended_before_acknowledged.setdefault(append.append_id, committed)
        effects.append(Respond(effects.request, None))
        return self.shard.end_call(effects, now_ms)

    def pending_transactional_offsets(
        self, group_id: str
    ) -> dict[int, dict[TopicPartition, OffsetAndMetadata]]:
        """What a group's open transactions would commit, by producer id (for labs)."""
        group = self.shard.groups.get(group_id)
        if group is None:
            return {}
        return {
            pid: {tp: om for tp, (om, _) in by_tp.items()}
            for pid, by_tp in group.pending_transactional_offset_commits.items()
        }

    def fetch_offsets(
        self,
        group_id: str,
        partitions: list[TopicPartition] | None = None,
        *,
        require_stable: bool = False,
        member_id: str | None = None,
        member_epoch: int = -1,
    ) -> OffsetFetchResult:
        """OffsetFetch: the committed offset of each partition (-1: none); all of
        the group's when `partitions` is None. Reads no clock and changes nothing.
        Offsets of open transactions are not seen; with `require_stable` (OffsetFetch
        v7+, read_committed consumers) a partition with a commit still pending, plain
        or transactional, answers UNSTABLE_OFFSET_COMMIT: the client retries."""
        error = self.shard.group_status(group_id, "offset_fetch")
        if error is not None:
            return OffsetFetchResult(error)
        consumer = self.shard.consumer_groups.get(group_id)
        if consumer is not None and (member_id is not None or member_epoch >= 0):
            # OffsetFetch v9+ from a KIP-848 member carries its id and epoch
            member = consumer.members.get(member_id or "")
            if member is None:
                return OffsetFetchResult(Errors.UNKNOWN_MEMBER_ID)
            if member_epoch != member.member_epoch:
                return OffsetFetchResult(Errors.STALE_MEMBER_EPOCH)
        group = self.shard.groups.get(group_id)
        if group is None or group.is_(DEAD):
            return OffsetFetchResult(
                Errors.NONE, {tp: PartitionOffset(-1) for tp in partitions or []}
            )
        wanted = list(group.offsets) if partitions is None else partitions
        out = {}
        for tp in wanted:
            om = group.offsets.get(tp)
            if require_stable and group.has_pending_offset_commits_for(tp):
                out[tp] = PartitionOffset(-1, error=Errors.UNSTABLE_OFFSET_COMMIT)
                continue
            out[tp] = (
                PartitionOffset(-1)
                if om is None
                else PartitionOffset(om.offset, om.leader_epoch, om.metadata)
            )
        return OffsetFetchResult(Errors.NONE, out)

    def delete_offsets(
        self,
        group_id: str,
        partitions: list[TopicPartition],
        *,
        now_ms: int,
        request: Hashable | None = None,
    ) -> Effects:
        """OffsetDelete: only for partitions of topics the group does not read
        (GROUP_SUBSCRIBED_TO_TOPIC otherwise), or any partition of an Empty group."""
        effects = self.shard.begin_call(now_ms, request)

        def answer(error: Errors, per_partition: dict | None = None) -> Effects:
            effects.append(Respond(effects.request, OffsetDeleteResult(error, per_partition or {})))
            return self.shard.end_call(effects, now_ms)

        error = self.shard.group_status(group_id, "offset_delete")
        if error is not None:
            return answer(error)
        group = self.shard.groups.get(group_id)
        if group is None or group.is_(DEAD):
            return answer(Errors.GROUP_ID_NOT_FOUND)
        errors: dict[TopicPartition, Errors] = {}
        if group.is_(EMPTY):
            eligible = list(partitions)
        elif group.protocol_type == PROTOCOL_TYPE:
            eligible = [tp for tp in partitions if not group.is_subscribed_to_topic(tp[0])]
            errors = {
                tp: Errors.GROUP_SUBSCRIBED_TO_TOPIC for tp in partitions if tp not in eligible
            }
        else:
            return answer(Errors.NON_EMPTY_GROUP)
        if eligible:
            self.cleanup_group_metadata(
                [group], lambda g: self.remove_offsets(g, eligible), now_ms, effects
            )
            errors.update({tp: Errors.NONE for tp in eligible})
        return answer(Errors.NONE, errors)

    def remove_offsets(
        self, group: ClassicGroup, partitions: Iterable[TopicPartition]
    ) -> list[TopicPartition]:
        """The committed offsets of `partitions` go: their tombstones, replayed here
        and returned for the caller to write."""
        removed = []
        for tp in partitions:
            if tp in group.offsets:
                removed.append(tp)
                self.replay_offset_commit(group, tp, None, -1, self.shard.runtime.next_sequence())
            group.offset_append_seq.pop(tp, None)
        return removed

    def remove_all_offsets(self, group: ClassicGroup) -> list[TopicPartition]:
        """Every offset of a group being deleted (Kafka: deleteAllOffsets): committed,
        held by an open transaction, or in a commit still being written (its record
        is in the log before these tombstones), else a reload would bring them back."""
        removed = self.remove_offsets(group, list(group.offsets))
        held = {tp for by_tp in group.pending_transactional_offset_commits.values() for tp in by_tp}
        held |= set(group.pending_offset_commits)
        for tp in sorted(held - set(removed)):  # a tombstone ends those too
            self.replay_offset_commit(group, tp, None, -1, self.shard.runtime.next_sequence())
            removed.append(tp)
        return removed

    def cleanup_group_metadata(
        self,
        groups: list[ClassicGroup],
        selector: Callable[[ClassicGroup], list[TopicPartition]],
        now_ms: int,
        effects: Effects,
    ) -> int:
        """Kafka: cleanupGroupMetadata. Remove the selected offsets, write their
        tombstones; an Empty group left with no offsets becomes Dead and (if it ever
        had a generation) gets a tombstone too. Returns how many offsets went."""
        removed_total = 0
        for group in groups:
            removed = selector(group)
            removed_total += len(removed)
            if group.is_(EMPTY) and not group.has_offsets():
                # a commit still being written counts too (Kafka: hasOffsets): else
                # its record would bring back a group removed here
                group.transition_to(DEAD, now_ms)
            records = [(rec.offset_commit_key(group.group_id, t, p), None) for t, p in removed]
            if group.is_(DEAD) and self.shard.groups.get(group.group_id) is group:
                del self.shard.groups[group.group_id]
                if group.generation_id > 0:
                    records.append((rec.group_metadata_key(group.group_id), None))
            if records:
                effects.append(
                    AppendRecords(
                        self.shard.partition_for(group.group_id), tuple(records), now_ms, None
                    )
                )
        return removed_total

    def expire_offsets(self, now_ms: int, effects: Effects | None = None) -> Effects:
        """offsets.retention.minutes: drop committed offsets nobody needs (Kafka:
        removeExpiredOffsets). An Empty group's offsets expire retention after it
        became Empty; a Stable consumer group's, retention after their commit, for
        topics it no longer reads; a group that only stores offsets, retention after
        each commit. Offsets with a pending commit never expire. Runs by itself every
        offsets.retention.check.interval.ms."""
        effects = Effects() if effects is None else effects
        retention = self.shard.config.offsets_retention_ms

        def expired(group: ClassicGroup) -> list[TopicPartition]:
            def select(
                base: Callable[[OffsetAndMetadata], int], keep_topics: set[str]
            ) -> list[TopicPartition]:
                out = []
                for tp, om in group.offsets.items():
                    if tp[0] in keep_topics or tp in group.pending_offset_commits:
                        continue
                    if om.expire_timestamp is not None:
                        if now_ms >= om.expire_timestamp:
                            out.append(tp)
                    elif now_ms - base(om) >= retention:
                        out.append(tp)
                return out

            consumer = self.shard.consumer_groups.get(group.group_id)
            if consumer is not None and consumer.members:
                chosen = select(lambda om: om.commit_timestamp, consumer.subscribed_topics())
            elif group.protocol_type is not None and group.is_(EMPTY):
                since = group.state_timestamp_ms
                chosen = select(lambda om: since if since >= 0 else om.commit_timestamp, set())
            elif (
                group.protocol_type == PROTOCOL_TYPE
                and group.subscribed_topics is not None
                and group.is_(STABLE)
            ):
                chosen = select(lambda om: om.commit_timestamp, group.subscribed_topics)
            elif group.protocol_type is None:
                chosen = select(lambda om: om.commit_timestamp, set())
            else:
                chosen = []
            return self.remove_offsets(group, chosen)

        owned = [
            g
            for g in self.shard.groups.values()
            if self.shard.partition_for(g.group_id) in self.shard.partitions.owned
        ]
        self.cleanup_group_metadata(owned, expired, now_ms, effects)
        return effects
