--------------------------- MODULE MC_kraft_restarts ---------------------------
(* KRaft as Kafka does it, with a voter restart (its log and quorum-state *)
(* file survive) and metadata writes; the bounds are explained in README.md. *)
EXTENDS KafkaRaft

ConstInit ==
    /\ Voters = {"c1", "c2", "c3"}
    /\ Candidates = {"c1", "c2"}
    /\ MaxEpoch = 2
    /\ MaxLog = 2
    /\ MaxRestarts = 1
    /\ CommitOwnEpochFirst = TRUE
    /\ PersistElectionState = TRUE
    /\ ClientWrites = TRUE

=============================================================================
