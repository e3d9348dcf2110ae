------------------------ MODULE MC_power_failure_high_watermark ------------------------
(* kafkalab.follower.truncation.rule = high-watermark, with power failures that lose what was *)
(* not fsynced; the bounds are explained in README.md.                            *)
EXTENDS KafkaReplication

ConstInit ==
    /\ Replicas = {"b1", "b2"}
    /\ MaxRecords = 2
    /\ MaxEpoch = 3
    /\ MaxCrashes = 2
    /\ TruncationRule = "high-watermark"

=============================================================================
