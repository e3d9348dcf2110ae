------------------------ MODULE MC_power_failure_fenced_leader_epoch ------------------------
(* kafkalab.follower.truncation.rule = fenced-leader-epoch, with power failures that lose what was *)
(* not fsynced; the bounds are explained in README.md.                            *)
EXTENDS KafkaReplication

ConstInit ==
    /\ Replicas = {"b1", "b2"}
    /\ MaxRecords = 2
    /\ MaxEpoch = 3
    /\ MaxCrashes = 2
    /\ TruncationRule = "fenced-leader-epoch"

=============================================================================
