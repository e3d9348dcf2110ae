---------------------- MODULE MC_transactions_no_epoch_bump ----------------------
(* BumpEpochOnInit = FALSE: a broken coordinator that hands out the same epoch again; *)
(* the bounds are explained in README.md.                                  *)
EXTENDS KafkaTransactions

ConstInit ==
    /\ Instances = {"p1", "p2"}
    /\ Partitions = {"t0", "t1"}
    /\ MaxTxns = 2
    /\ MaxWrites = 2
    /\ MaxEpoch = 2
    /\ MaxFailovers = 0
    /\ BumpEpochOnInit = FALSE
    /\ TransactionVersion = 1
    /\ MaxDelayed = 0

=============================================================================
