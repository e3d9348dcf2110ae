------------------------ MODULE MC_kraft_hw_before_own_epoch ------------------------
(* Broken on purpose (KAFKA-12619): the leader moves its HW once a majority *)
(* has reached the start of its epoch, before its LeaderChange record is    *)
(* committed. Losing a record that way takes four epochs; the rest of the   *)
(* bounds are MC_kraft's.                                                    *)
EXTENDS KafkaRaft

ConstInit ==
    /\ Voters = {"c1", "c2", "c3"}
    /\ Candidates = {"c1", "c2"}
    /\ MaxEpoch = 4
    /\ MaxLog = 2
    /\ MaxRestarts = 0
    /\ CommitOwnEpochFirst = FALSE
    /\ PersistElectionState = TRUE
    /\ ClientWrites = FALSE

=============================================================================
