------------------------------ MODULE MC_kraft ------------------------------
(* KRaft as Kafka does it: the HW moves only once a record of the leader's *)
(* own epoch is committed, votes are persisted before they are granted.    *)
(* Elections over three epochs; the bounds are explained in README.md.     *)
EXTENDS KafkaRaft

ConstInit ==
    /\ Voters = {"c1", "c2", "c3"}
    /\ Candidates = {"c1", "c2"}
    /\ MaxEpoch = 3
    /\ MaxLog = 2
    /\ MaxRestarts = 0
    /\ CommitOwnEpochFirst = TRUE
    /\ PersistElectionState = TRUE
    /\ ClientWrites = FALSE

=============================================================================
