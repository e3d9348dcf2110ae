---------------------------- MODULE MC_leader_epoch ----------------------------
(* kafkalab.follower.truncation.rule = leader-epoch; the bounds are explained in README.md. *)
EXTENDS KafkaReplication

ConstInit ==
    /\ Replicas = {"b1", "b2"}
    /\ MaxRecords = 2
    /\ MaxEpoch = 3
    /\ MaxCrashes = 0
    /\ TruncationRule = "leader-epoch"

=============================================================================
