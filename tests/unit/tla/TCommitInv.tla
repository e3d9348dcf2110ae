---- MODULE TCommitInv ----
(* The resource managers, their states and TCommit's consistency invariant,
   shared by specs that EXTEND this module. *)
CONSTANT RM
VARIABLE rmState

TCConsistent ==
  \A rm1, rm2 \in RM : ~ /\ rmState[rm1] = "aborted"
                         /\ rmState[rm2] = "committed"
====
