---------------------------- MODULE MC_high_watermark ----------------------------
(* kafkalab.follower.truncation.rule = high-watermark; the bounds are explained in README.md. *)
EXTENDS KafkaReplication

ConstInit ==
    /\ Replicas = {"b1", "b2"}
    /\ MaxRecords = 2
    /\ MaxEpoch = 3
    /\ MaxCrashes = 0
    /\ TruncationRule = "high-watermark"

=============================================================================
