---------------------- MODULE MC_transactions_delayed_v1 ----------------------
(* Transaction version 1 with one delayed EndTxn (KAFKA-17754): the held     *)
(* first attempt of an EndTxn reaches the coordinator after the producer's   *)
(* next transaction began in the same epoch, and ends that one. One         *)
(* instance is enough; the bounds are explained in README.md.               *)
EXTENDS KafkaTransactions

ConstInit ==
    /\ Instances = {"p1"}
    /\ Partitions = {"t0", "t1"}
    /\ MaxTxns = 2
    /\ MaxWrites = 2
    /\ MaxEpoch = 3
    /\ MaxFailovers = 0
    /\ BumpEpochOnInit = TRUE
    /\ TransactionVersion = 1
    /\ MaxDelayed = 1

=============================================================================
