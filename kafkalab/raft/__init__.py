"""kafkalab.raft: KRaft, Kafka's Raft for the metadata log, as a sans-IO state machine.

Kafka's module: raft/ (org.apache.kafka.raft; KIP-595, pre-vote KIP-996). One
voter is a KafkaRaftClient: no sockets, no threads, no clock of its own. Time
and messages come in as arguments; the messages it sends come back as data
(RaftMessage), so a notebook steps an election by hand and a hypothesis test
runs 3 or 5 voters over a network that drops, delays, reorders and duplicates. The
KafkaRaft spec's traces replay onto it (kafkalab/specs/kraft_replay.py); its broken
variants switch on QuorumConfig.defects (KAFKA-12619, KAFKA-10527; off by default).

    kafka_raft_client   KafkaRaftClient: poll(now_ms), handle(message, now_ms), the
                        handlers of Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch and
                        FetchSnapshot, append, resign, describe_quorum,
                        create_snapshot; the LeaderChange record
    quorum_state        QuorumState and the EpochStates (Unattached with its vote,
                        Prospective, Candidate, Follower, Resigned), the transition
                        table as data, restart from the store and the log
    leader_state        LeaderState: voters' fetch offsets, the high watermark that
                        waits for an own-epoch commit (KAFKA-12619), check-quorum
                        (KAFKA-15489)
    quorum_state_store  the `quorum-state` file (Kafka's JSON, fsynced before a
                        vote is granted), ElectionState
    raft_log            RaftLog: an in-memory log of (offset, epoch, record) with
                        truncation and the leader-epoch history for DivergingEpoch;
                        its snapshots and log start offset (KIP-630)
    snapshot            a snapshot's bytes (SnapshotHeader, the records, SnapshotFooter
                        as record batches) and its file name
                        `<end offset>-<epoch>.checkpoint`
    kafka_metadata_log  KafkaMetadataLog: the same log on disk, `__cluster_metadata-0`
                        (a UnifiedLog, its leader-epoch-checkpoint, flush() fsyncs and
                        checkpoints the recovery point); cut_to_recovery_point, a
                        power failure
    raft_message        the requests and responses as data (Kafka's JSON names)
    raft_wire           those messages to and from Kafka's request/response bodies
                        (Vote v2, BeginQuorumEpoch v1, EndQuorumEpoch v1, Fetch v16,
                        DescribeQuorum v2; schemas in kafkalab/protocol/messages/raft.py)
    record_serde        entries as Kafka record batches (the epoch in the batch's
                        PartitionLeaderEpoch; LeaderChange a control record; a
                        metadata record Kafka's binary one, MetadataRecordSerde)
    quorum_config       the controller.quorum.* timeouts
    errors              RaftError and its subclasses

Safety rules and what guards them (tests/unit/test_raft_*.py name the JIRA/KIP):
a vote is persisted before it is granted; a restarted leader comes back Resigned
and never leads its old epoch again (KAFKA-10527); the high watermark moves only
once a record of the leader's epoch is committed by a majority (KAFKA-12619); a
leader not fetched from by a majority within 1.5x fetch.timeout resigns
(KAFKA-15489); a voter that heard from its leader within the fetch timeout
refuses pre-votes (KIP-996). A hypothesis state machine checks ElectionSafety,
LogMatching, that committed records are never lost and that a high watermark
never goes back, after every step.

The client on the network is kafkalab/server/kafka_raft_manager.py (Kafka's
KafkaRaftManager lives in core too): this package stays sans-IO but for the log
and the `quorum-state` file.

Snapshots (KIP-630): the state machine snapshots its state at a committed offset,
the log drops the entries below (its log start offset moves up), and a follower
whose Fetch lies below the leader's log start is answered a SnapshotId and
fetches the snapshot (FetchSnapshot, in chunks) before it fetches on.

Not in this step: dynamic voters (KIP-853; the voter set is static, kraft.version
0), observers (only voters fetch), and the wiring: the QuorumController on this client, sockets between
controllers, `kafkalab cluster --controllers 3`, DescribeQuorum on the wire and the
lab. Those are the next steps of issue 25; the TLA+ spec lives in specs/kraft/.
"""
