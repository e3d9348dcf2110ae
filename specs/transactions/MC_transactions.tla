---------------------- MODULE MC_transactions ----------------------
(* BumpEpochOnInit = TRUE; *)
(* the bounds are explained in README.md.                                  *)
EXTENDS KafkaTransactions

ConstInit ==
    /\ Instances = {"p1", "p2"}
    /\ Partitions = {"t0", "t1"}
    /\ MaxTxns = 2
    /\ MaxWrites = 2
    /\ MaxEpoch = 2
    /\ MaxFailovers = 0
    /\ BumpEpochOnInit = TRUE
    /\ TransactionVersion = 1
    /\ MaxDelayed = 0

=============================================================================
