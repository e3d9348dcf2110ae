"""The errors of kafkalab.raft: one base, each with Kafka's error code.

Kafka's classes: the IllegalStateException and KafkaException that
org.apache.kafka.raft throws when the quorum would break a rule, and the
UncheckedIOException of FileQuorumStateStore. Here each is a RaftError (a
KafkaError, kafkalab/errors.py), so a caller answers any of them with `e.code`
and reads a message that says what went wrong and what to do.
"""

from __future__ import annotations

from kafkalab.errors import Errors, KafkaErrorWithCode

__all__ = [
    "CorruptSnapshotError",
    "IllegalQuorumStateTransition",
    "NotLeaderError",
    "QuorumStateStoreError",
    "RaftError",
    "SnapshotNotFoundError",
    "TruncationBelowHighWatermarkError",
]


class RaftError(KafkaErrorWithCode):
    """Base of every error kafkalab.raft raises on purpose (UNKNOWN_SERVER_ERROR on
    the wire unless a subclass says otherwise)."""


class CorruptSnapshotError(RaftError):
    """A snapshot's bytes are not whole record batches from a SnapshotHeader to a
    SnapshotFooter (a torn or foreign file): do not load it; delete the file and let
    the voter fetch the leader's snapshot again (FetchSnapshot)."""

    code = Errors.CORRUPT_MESSAGE


class SnapshotNotFoundError(RaftError):
    """A snapshot was asked for that this voter does not hold (or no longer: a newer
    one replaced it): fetch again from the offset the leader names."""

    code = Errors.SNAPSHOT_NOT_FOUND


class IllegalQuorumStateTransition(RaftError):
    """A voter was moved along an edge the transition table (quorum_state.TRANSITIONS)
    does not have, to a lower epoch, or so that a vote cast in an epoch would change:
    a bug in the caller or in the client, never something a peer can cause."""


class NotLeaderError(RaftError):
    """Records were appended (or a resignation asked) on a voter that is not the
    leader: send them to the leader `leader_id` names (-1: none known yet; retry)."""

    code = Errors.NOT_LEADER_OR_FOLLOWER

    def __init__(self, local_id: int, leader_id: int, epoch: int) -> None:
        self.leader_id, self.epoch = leader_id, epoch
        super().__init__(
            f"voter {local_id} is not the leader of epoch {epoch}; "
            + (f"the leader is {leader_id}" if leader_id >= 0 else "no leader is known yet")
        )


class QuorumStateStoreError(RaftError):
    """The `quorum-state` file cannot be read or written. Without it a voter cannot
    know which vote it cast: do not start it on a guessed state; restore the file or
    wipe the voter's whole metadata log directory and let it rejoin."""

    code = Errors.KAFKA_STORAGE_ERROR


class TruncationBelowHighWatermarkError(RaftError):
    """A follower was asked to truncate below its high watermark, i.e. to drop a
    committed record. Kafka's KafkaRaftClient raises the same (a KafkaException):
    it means the quorum lost a committed record; stop the voter and investigate."""

    def __init__(self, local_id: int, offset: int, high_watermark: int) -> None:
        self.offset, self.high_watermark = offset, high_watermark
        super().__init__(
            f"voter {local_id} was asked to truncate to offset {offset}, below its "
            f"high watermark {high_watermark}: a committed record would be lost"
        )
