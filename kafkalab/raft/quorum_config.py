"""QuorumConfig: the timeouts of a KRaft voter (Kafka: org.apache.kafka.raft.QuorumConfig).

Defaults are Kafka's `controller.quorum.*` defaults:

    election_timeout_ms      controller.quorum.election.timeout.ms (1000): an Unattached,
                             Prospective, Candidate or Resigned voter waits a random time
                             in [timeout, 2 * timeout) before its next step
    fetch_timeout_ms         controller.quorum.fetch.timeout.ms (2000): a Follower that has
                             not fetched from its leader for this long starts an election;
                             a Leader that has not been fetched from by a majority for 1.5x
                             this long resigns (check-quorum, KAFKA-15489)
    election_backoff_max_ms  controller.quorum.election.backoff.max.ms (1000)
    retry_backoff_ms         controller.quorum.retry.backoff.ms (20)
    request_timeout_ms       controller.quorum.request.timeout.ms (2000): an unanswered
                             request is forgotten and may be sent again
    fetch_max_entries        how many entries one Fetch response carries (Kafka bounds bytes)
    fetch_snapshot_max_bytes how many bytes of a snapshot one FetchSnapshot response
                             carries (Kafka: KafkaRaftClient.MAX_FETCH_SIZE_BYTES, 8 MiB)
    pre_vote                 True (Kafka 4.x, KIP-996): a voter whose timeout expires asks
                             for pre-votes (Prospective) before it bumps the epoch. False is
                             a teaching switch that turns KIP-996 off, as before Kafka 4.0: it
                             turns Candidate at once, in epoch + 1 (lab 09 part 4)
    check_quorum             True (Kafka since KAFKA-15489's fix): a leader no majority has
                             fetched from for 1.5 x fetch timeout resigns. False is a teaching
                             switch that turns that fix off: a cut-off leader stays Leader of
                             its epoch until it hears of a newer one
    defects                  deliberately broken modes, off by default, each named for the
                             Kafka JIRA whose bug it brings back (DEFECTS): the replay of
                             the KafkaRaft spec's broken variants (kafkalab/specs/kraft_replay.py)
                             switches them on to reproduce a counterexample on this code
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: KAFKA-12619: the leader moves its high watermark once a majority has reached the
#: start of its epoch, before the LeaderChange record (the first of its epoch) is
#: committed (the off-by-one fixed by apache/kafka#10481)
KAFKA_12619 = "KAFKA-12619"
#: KAFKA-10527 (and a power failure before the fsync): the quorum-state file never
#: receives the vote nor the leader, only the epoch, so a restarted voter forgets the
#: vote it granted and a restarted leader comes back Unattached rather than Resigned
KAFKA_10527 = "KAFKA-10527"
DEFECTS = frozenset({KAFKA_12619, KAFKA_10527})


@dataclass(frozen=True)
class QuorumConfig:
    election_timeout_ms: int = 1000
    fetch_timeout_ms: int = 2000
    election_backoff_max_ms: int = 1000
    retry_backoff_ms: int = 20
    request_timeout_ms: int = 2000
    fetch_max_entries: int = 100
    pre_vote: bool = True
    check_quorum: bool = True
    fetch_snapshot_max_bytes: int = 8 * 1024 * 1024
    defects: frozenset[str] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        for name in ("election_timeout_ms", "fetch_timeout_ms", "request_timeout_ms"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        if self.fetch_max_entries <= 0:
            raise ValueError(f"fetch_max_entries must be > 0, got {self.fetch_max_entries}")
        if self.fetch_snapshot_max_bytes <= 0:
            raise ValueError(
                f"fetch_snapshot_max_bytes must be > 0, got {self.fetch_snapshot_max_bytes}"
            )
        unknown = set(self.defects) - DEFECTS
        if unknown:
            raise ValueError(f"unknown defects {sorted(unknown)}; known: {sorted(DEFECTS)}")

    @property
    def check_quorum_timeout_ms(self) -> int:
        """Kafka: LeaderState.CHECK_QUORUM_TIMEOUT_FACTOR (1.5) x fetch timeout."""
        return int(self.fetch_timeout_ms * 1.5)

    @property
    def begin_quorum_epoch_timeout_ms(self) -> int:
        """How often a leader repeats BeginQuorumEpoch to a voter that has not answered."""
        return max(1, self.fetch_timeout_ms // 2)
