---------------------- MODULE MC_transactions_delayed_v2 ----------------------
(* Transaction version 2 (KIP-890 part 2) with the same delayed EndTxn: the  *)
(* epoch is bumped at every EndTxn, so the held copy names an epoch that is  *)
(* over and is fenced. The bounds of MC_transactions_delayed_v1.             *)
EXTENDS KafkaTransactions

ConstInit ==
    /\ Instances = {"p1"}
    /\ Partitions = {"t0", "t1"}
    /\ MaxTxns = 2
    /\ MaxWrites = 2
    /\ MaxEpoch = 3
    /\ MaxFailovers = 0
    /\ BumpEpochOnInit = TRUE
    /\ TransactionVersion = 2
    /\ MaxDelayed = 1

=============================================================================
