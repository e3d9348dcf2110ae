------------------------ MODULE MC_kraft_vote_not_persisted ------------------------
(* Broken on purpose (KAFKA-10527, and a quorum-state write lost in a power *)
(* failure): a restarted voter forgets the vote it gave in its epoch. The   *)
(* bounds of MC_kraft_restarts.                                              *)
EXTENDS KafkaRaft

ConstInit ==
    /\ Voters = {"c1", "c2", "c3"}
    /\ Candidates = {"c1", "c2"}
    /\ MaxEpoch = 2
    /\ MaxLog = 2
    /\ MaxRestarts = 1
    /\ CommitOwnEpochFirst = TRUE
    /\ PersistElectionState = FALSE
    /\ ClientWrites = TRUE

=============================================================================
