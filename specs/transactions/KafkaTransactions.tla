------------------------- MODULE KafkaTransactions -------------------------
(***************************************************************************)
(* Kafka transactions end to end: producer instances sharing one          *)
(* transactional.id, the transaction coordinator's state machine, data     *)
(* partitions with their producer state, COMMIT/ABORT control markers,     *)
(* the last stable offset (LSO) and what a read_committed consumer sees.  *)
(*                                                                         *)
(* Producer instances: two processes configured with the same             *)
(* transactional.id (a restarted application and the zombie it replaces). *)
(* InitProducerId gives the caller the producer id and an epoch; the      *)
(* coordinator bumps the epoch each time, which fences the older instance *)
(* everywhere: at the coordinator (AddPartitionsToTxn, EndTxn) and on the *)
(* partitions (Produce with an older epoch is refused).                    *)
(*                                                                         *)
(* The coordinator's state (kafkalab.coordinator.transaction.              *)
(* TransactionStateMachine, Kafka's TransactionMetadata): Empty, Ongoing, *)
(* PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort; it is in    *)
(* the __transaction_state log, so a coordinator failover reloads it and  *)
(* finishes writing markers for a Prepare* state.                          *)
(*                                                                         *)
(* Transaction version (KIP-890 part 2): under TransactionVersion = 1 an   *)
(* epoch lives from one InitProducerId to the next, so every transaction  *)
(* of an instance has the same (producer id, epoch); under 2 the          *)
(* coordinator bumps the epoch at every EndTxn, writes the markers with   *)
(* the bumped epoch and returns it to the producer, so a transaction is   *)
(* named by its (producer id, epoch). (Under 2 the client also stops      *)
(* sending AddPartitionsToTxn for data partitions: the partition leader   *)
(* adds the partition on the first transactional Produce. The spec keeps  *)
(* one AddPartition action for both: the same coordinator transition.)    *)
(*                                                                         *)
(* Delayed requests (KAFKA-17754, found by Jepsen in 2024): an EndTxn's   *)
(* first attempt is held in the network while its retry ends the         *)
(* transaction; the held copy reaches the coordinator later, at most      *)
(* MaxDelayed of them. Under version 1 it can land in the next            *)
(* transaction of the same epoch and commit or abort it.                  *)
(*                                                                         *)
(* One replica per partition: replication is KafkaReplication's business, *)
(* so here the HW is the log end offset. Typed for Apalache.              *)
(***************************************************************************)
EXTENDS Integers, Sequences, FiniteSets

CONSTANTS
    \* @type: Set(Str);
    Instances,
    \* @type: Set(Str);
    Partitions,
    \* @type: Int;
    MaxTxns,
    \* @type: Int;
    MaxWrites,
    \* @type: Int;
    MaxEpoch,
    \* @type: Int;
    MaxFailovers,
    \* @type: Bool;
    BumpEpochOnInit,
    \* @type: Int;
    TransactionVersion,
    \* @type: Int;
    MaxDelayed

VARIABLES
    \* @type: Str -> {epoch: Int, status: Str, txn: Int, seq: Str -> Int, parts: Set(Str)};
    producer,
    \* @type: {epoch: Int, state: Str, partitions: Set(Str), pending: Set(Str), txns: Set(Int)};
    coordinator,
    \* @type: Str -> Seq({kind: Str, epoch: Int, seq: Int, txn: Int, id: Int});
    log,
    \* @type: Str -> {epoch: Int, seq: Int};
    pstate,
    \* @type: Int;
    nextTxn,
    \* @type: Int;
    nextId,
    \* @type: Int;
    failovers,
    \* @type: Str;
    owner,
    \* @type: Int -> Str;
    outcome,
    \* @type: Set(<<Int, Str, Str>>);
    commits,
    \* @type: Set({epoch: Int, txn: Int, commit: Bool});
    delayed

vars == <<producer, coordinator, log, pstate, nextTxn, nextId, failovers, owner, outcome, commits, delayed>>

Txns == 1..MaxTxns
None == "none"
NoTxn == 0

(* -- helpers ------------------------------------------------------------- *)

\* Data of transaction t in partition p, by offset (0-based).
DataOffsets(p, t) == {o \in 0..(Len(log[p]) - 1) : log[p][o + 1].kind = "data" /\ log[p][o + 1].txn = t}

\* The kind of the first marker after offset o ("commit" or "abort"), or "" if the
\* transaction of the data at o has not ended yet. (One producer id: any marker
\* after o ends o's transaction.) The smallest element of a set of offsets S is
\* the number of offsets below all of S: no CHOOSE needed.
FirstMarkerAfter(p, o) ==
    LET after == {i \in (o + 1)..(Len(log[p]) - 1) : log[p][i + 1].kind # "data"}
        first == Cardinality({i \in 0..(Len(log[p]) - 1) : \A j \in after : i < j})
    IN  IF after = {} THEN "" ELSE log[p][first + 1].kind

\* The last stable offset: the first offset of a transaction with no marker yet
\* (the log end offset when there is none). HW = LEO here (one replica).
Lso(p) ==
    LET open == {o \in 0..(Len(log[p]) - 1) :
                   log[p][o + 1].kind = "data" /\ FirstMarkerAfter(p, o) = ""}
    IN  Cardinality({o \in 0..(Len(log[p]) - 1) : \A u \in open : o < u})

\* What a read_committed consumer returns: data below the LSO whose transaction
\* was committed (aborted data is filtered with the markers: the aborted
\* transactions index).
Visible(p) == {o \in 0..(Lso(p) - 1) :
                 log[p][o + 1].kind = "data" /\ FirstMarkerAfter(p, o) = "commit"}

Ended(s) == s \in {"Empty", "CompleteCommit", "CompleteAbort"}

(* -- initial state -------------------------------------------------------- *)

Init ==
    /\ producer = [i \in Instances |->
                    [epoch |-> -1, status |-> "uninitialized", txn |-> NoTxn,
                     seq |-> [p \in Partitions |-> 0], parts |-> {}]]
    /\ coordinator = [epoch |-> -1, state |-> "Empty", partitions |-> {}, pending |-> {}, txns |-> {}]
    /\ log = [p \in Partitions |-> <<>>]
    /\ pstate = [p \in Partitions |-> [epoch |-> -1, seq |-> -1]]
    /\ nextTxn = 1
    /\ nextId = 1
    /\ failovers = 0
    /\ owner = None
    /\ outcome = [t \in Txns |-> "none"]
    /\ commits = {}
    /\ delayed = {}

(* -- InitProducerId ---------------------------------------------------- *)

\* An instance (re)starts. With a transaction in progress the coordinator
\* first aborts it (fencing its owner with a new epoch); the caller retries
\* (CONCURRENT_TRANSACTIONS) until the abort is complete. Then it hands out the
\* next epoch, starting from Empty (Kafka's prepareIncrementProducerEpoch): the
\* caller owns the transactional.id from now on.
InitProducerId(i) ==
    /\ producer[i].status \in {"uninitialized", "ready", "fenced"}
    /\ coordinator.epoch < MaxEpoch
    /\ \/ /\ coordinator.state = "Ongoing"
          /\ coordinator' = [coordinator EXCEPT
                                !.state = "PrepareAbort",
                                !.pending = coordinator.partitions,
                                !.epoch = IF BumpEpochOnInit THEN @ + 1 ELSE @]
          /\ outcome' = [t \in Txns |-> IF t \in coordinator.txns THEN "aborted" ELSE outcome[t]]
          /\ UNCHANGED <<producer, owner>>
       \/ /\ Ended(coordinator.state)
          /\ LET e == IF BumpEpochOnInit \/ coordinator.epoch < 0
                      THEN coordinator.epoch + 1 ELSE coordinator.epoch
             IN  /\ coordinator' = [coordinator EXCEPT !.epoch = e, !.state = "Empty", !.partitions = {}]
                 /\ producer' = [producer EXCEPT ![i] =
                                   [epoch |-> e, status |-> "ready", txn |-> NoTxn,
                                    seq |-> [p \in Partitions |-> 0], parts |-> {}]]
          /\ owner' = i
          /\ UNCHANGED outcome
    /\ UNCHANGED <<log, pstate, nextTxn, nextId, failovers, commits, delayed>>

(* -- a transaction ------------------------------------------------------- *)

BeginTxn(i) ==
    /\ producer[i].status = "ready"
    /\ nextTxn <= MaxTxns
    /\ producer' = [producer EXCEPT ![i].status = "inTxn", ![i].txn = nextTxn, ![i].parts = {}]
    /\ nextTxn' = nextTxn + 1
    /\ UNCHANGED <<coordinator, log, pstate, nextId, failovers, owner, outcome, commits, delayed>>

\* AddPartitionsToTxn: fenced by the producer epoch; refused while the last
\* transaction's markers are being written.
AddPartition(i, p) ==
    /\ producer[i].status = "inTxn"
    /\ p \notin producer[i].parts
    /\ \/ /\ producer[i].epoch < coordinator.epoch
          /\ producer' = [producer EXCEPT ![i].status = "fenced"]
          /\ UNCHANGED <<coordinator, outcome>>
       \/ /\ producer[i].epoch = coordinator.epoch
          /\ Ended(coordinator.state) \/ coordinator.state = "Ongoing"
          /\ LET ongoing == coordinator.state = "Ongoing"
             IN  coordinator' = [coordinator EXCEPT
                                    !.state = "Ongoing",
                                    !.partitions = IF ongoing THEN @ \cup {p} ELSE {p},
                                    !.txns = IF ongoing THEN @ \cup {producer[i].txn}
                                             ELSE {producer[i].txn}]
          /\ outcome' = [outcome EXCEPT ![producer[i].txn] = "open"]
          /\ producer' = [producer EXCEPT ![i].parts = @ \cup {p}]
    /\ UNCHANGED <<log, pstate, nextTxn, nextId, failovers, owner, commits, delayed>>

\* Produce to a partition the coordinator knows is in the transaction (the
\* producer waits for AddPartitionsToTxn to succeed). The partition keeps the
\* last epoch and sequence of the producer id: an older epoch is fenced
\* (INVALID_PRODUCER_EPOCH), a sequence it already has is a duplicate (the
\* retry of a write whose answer was lost) and is not written again.
Write(i, p, retry) ==
    /\ producer[i].status = "inTxn"
    /\ p \in producer[i].parts
    /\ nextId <= MaxWrites
    /\ LET s == IF retry THEN producer[i].seq[p] - 1 ELSE producer[i].seq[p]
           \* a retry resends the record it sent last, with the same sequence
           sent == {log[p][k].id : k \in {k \in 1..Len(log[p]) :
                        log[p][k].kind = "data" /\ log[p][k].epoch = producer[i].epoch
                        /\ log[p][k].seq = s}}
       IN  \E id \in (IF retry THEN sent ELSE {nextId}) :
           IF producer[i].epoch < pstate[p].epoch
           THEN /\ producer' = [producer EXCEPT ![i].status = "fenced"]
                /\ UNCHANGED <<log, pstate, nextId>>
           ELSE IF producer[i].epoch = pstate[p].epoch /\ s <= pstate[p].seq
           THEN UNCHANGED <<producer, log, pstate, nextId>>  \* duplicate: dropped
           ELSE /\ log' = [log EXCEPT ![p] = Append(@,
                               [kind |-> "data", epoch |-> producer[i].epoch, seq |-> s,
                                txn |-> producer[i].txn, id |-> id])]
                /\ pstate' = [pstate EXCEPT ![p] = [epoch |-> producer[i].epoch, seq |-> s]]
                /\ producer' = [producer EXCEPT ![i].seq[p] = s + 1]
                /\ nextId' = IF retry THEN nextId ELSE nextId + 1
    /\ UNCHANGED <<coordinator, nextTxn, failovers, owner, outcome, commits, delayed>>

\* EndTxn(commit or abort): fenced by the epoch; the coordinator writes
\* PrepareCommit / PrepareAbort to its log (that is the commit point) and then
\* the markers. The producer may begin its next transaction. Under transaction
\* version 2 the coordinator bumps the epoch here (the markers carry the new
\* one) and the producer continues with it, its sequences from 0.
\* `held`: the request's first attempt was held in the network (the producer
\* timed out and this is its retry); the held copy stays in `delayed`.
EndTxn(i, commit, held) ==
    /\ producer[i].status = "inTxn"
    /\ \/ /\ producer[i].epoch < coordinator.epoch
          /\ producer' = [producer EXCEPT ![i].status = "fenced"]
          /\ ~held
          /\ UNCHANGED <<coordinator, outcome, commits, delayed>>
       \/ /\ producer[i].epoch = coordinator.epoch
          /\ producer[i].parts # {}
          /\ coordinator.state = "Ongoing"
          /\ TransactionVersion = 1 \/ coordinator.epoch < MaxEpoch
          /\ LET e == IF TransactionVersion = 2 THEN coordinator.epoch + 1 ELSE coordinator.epoch
             IN  /\ coordinator' = [coordinator EXCEPT
                                      !.state = IF commit THEN "PrepareCommit" ELSE "PrepareAbort",
                                      !.pending = coordinator.partitions,
                                      !.epoch = e]
                 /\ producer' = [producer EXCEPT ![i].status = "ready", ![i].txn = NoTxn,
                                     ![i].epoch = e,
                                     ![i].seq = IF e = producer[i].epoch THEN @
                                                ELSE [p \in Partitions |-> 0]]
          /\ outcome' = [t \in Txns |->
                            IF t \in coordinator.txns
                            THEN (IF commit THEN "committed" ELSE "aborted") ELSE outcome[t]]
          /\ commits' = IF commit THEN commits \cup {<<producer[i].txn, i, owner>>} ELSE commits
          /\ delayed' = IF held
                        THEN delayed \cup {[epoch |-> producer[i].epoch, txn |-> producer[i].txn,
                                            commit |-> commit]}
                        ELSE delayed
          /\ held => Cardinality(delayed) < MaxDelayed
       \/ /\ producer[i].epoch = coordinator.epoch
          /\ producer[i].parts = {}  \* nothing was added: it ends at the producer
          /\ producer' = [producer EXCEPT ![i].status = "ready", ![i].txn = NoTxn]
          /\ ~held
          /\ UNCHANGED <<coordinator, outcome, commits, delayed>>
    /\ UNCHANGED <<log, pstate, nextTxn, nextId, failovers, owner>>

\* The held first attempt of an EndTxn reaches the coordinator at last. The
\* coordinator knows no more than the request says: producer id, epoch, commit
\* or abort. In the epoch it names, with a transaction Ongoing, it ends that
\* transaction, whichever it is: under version 1 that is the producer's next one
\* (KAFKA-17754). With an older epoch it is fenced; with the transaction ended
\* it is a retry (or INVALID_TXN_STATE): nothing changes.
DeliverEndTxn(m) ==
    /\ m \in delayed
    /\ delayed' = delayed \ {m}
    /\ IF m.epoch = coordinator.epoch /\ coordinator.state = "Ongoing"
          /\ (TransactionVersion = 1 \/ coordinator.epoch < MaxEpoch)
       THEN /\ coordinator' = [coordinator EXCEPT
                                 !.state = IF m.commit THEN "PrepareCommit" ELSE "PrepareAbort",
                                 !.pending = coordinator.partitions,
                                 !.epoch = IF TransactionVersion = 2 THEN @ + 1 ELSE @]
            /\ outcome' = [t \in Txns |->
                              IF t \in coordinator.txns
                              THEN (IF m.commit THEN "committed" ELSE "aborted") ELSE outcome[t]]
       ELSE UNCHANGED <<coordinator, outcome>>
    /\ UNCHANGED <<producer, log, pstate, nextTxn, nextId, failovers, owner, commits>>

(* -- the coordinator ------------------------------------------------------- *)

\* WriteTxnMarkers: a COMMIT or ABORT control batch, with the coordinator's
\* producer epoch, to one partition of the transaction. It also fences: a
\* partition remembers the epoch of the marker.
WriteMarker(p) ==
    /\ coordinator.state \in {"PrepareCommit", "PrepareAbort"}
    /\ p \in coordinator.pending
    /\ log' = [log EXCEPT ![p] = Append(@,
                 [kind |-> IF coordinator.state = "PrepareCommit" THEN "commit" ELSE "abort",
                  epoch |-> coordinator.epoch, seq |-> -1, txn |-> NoTxn, id |-> 0])]
    \* a marker with a newer epoch fences older ones; in the same epoch the partition
    \* still knows the producer's last sequence (a late retry is a duplicate)
    /\ pstate' = [pstate EXCEPT ![p] =
                     IF coordinator.epoch > @.epoch THEN [epoch |-> coordinator.epoch, seq |-> -1] ELSE @]
    /\ coordinator' = [coordinator EXCEPT !.pending = @ \ {p}]
    /\ UNCHANGED <<producer, nextTxn, nextId, failovers, owner, outcome, commits, delayed>>

CompleteTxn ==
    /\ coordinator.state \in {"PrepareCommit", "PrepareAbort"}
    /\ coordinator.pending = {}
    /\ coordinator' = [coordinator EXCEPT
                          !.state = IF coordinator.state = "PrepareCommit" THEN "CompleteCommit" ELSE "CompleteAbort",
                          !.partitions = {}]
    /\ UNCHANGED <<producer, log, pstate, nextTxn, nextId, failovers, owner, outcome, commits, delayed>>

\* transaction.timeout.ms passed: the coordinator aborts, bumping the epoch so the
\* producer that let it time out is fenced.
TimeoutAbort ==
    /\ coordinator.state = "Ongoing"
    /\ coordinator.epoch < MaxEpoch
    /\ coordinator' = [coordinator EXCEPT !.state = "PrepareAbort", !.pending = coordinator.partitions,
                                          !.epoch = @ + 1]
    /\ outcome' = [t \in Txns |-> IF t \in coordinator.txns THEN "aborted" ELSE outcome[t]]
    /\ UNCHANGED <<producer, log, pstate, nextTxn, nextId, failovers, owner, commits, delayed>>

\* The coordinator moves to another broker: it reloads the transaction state
\* from __transaction_state (all of `coordinator` is durable) and goes on
\* writing the markers of a Prepare* transaction. Markers of the old
\* coordinator are fenced by its coordinator epoch (not modelled: they are
\* the same markers).
CoordinatorFailover ==
    /\ failovers < MaxFailovers
    /\ failovers' = failovers + 1
    /\ UNCHANGED <<producer, coordinator, log, pstate, nextTxn, nextId, owner, outcome, commits, delayed>>

Next ==
    \/ \E i \in Instances : InitProducerId(i)
    \/ \E i \in Instances : BeginTxn(i)
    \/ \E i \in Instances, p \in Partitions : AddPartition(i, p)
    \/ \E i \in Instances, p \in Partitions, retry \in BOOLEAN : Write(i, p, retry)
    \/ \E i \in Instances, commit, held \in BOOLEAN : EndTxn(i, commit, held)
    \/ \E m \in delayed : DeliverEndTxn(m)
    \/ \E p \in Partitions : WriteMarker(p)
    \/ CompleteTxn
    \/ TimeoutAbort
    \/ CoordinatorFailover

Spec == Init /\ [][Next]_vars

(* -- invariants ----------------------------------------------------------- *)

TypeOK ==
    /\ coordinator.state \in {"Empty", "Ongoing", "PrepareCommit", "PrepareAbort",
                              "CompleteCommit", "CompleteAbort"}
    /\ coordinator.pending \subseteq coordinator.partitions
    /\ \A i \in Instances : producer[i].status \in {"uninitialized", "ready", "inTxn", "fenced"}

\* A read_committed consumer never sees a record of an aborted or open transaction.
ReadCommittedSeesOnlyCommitted ==
    \A p \in Partitions : \A o \in Visible(p) : outcome[log[p][o + 1].txn] = "committed"

\* ...and sees all or none of each transaction: no transaction is visible in one
\* partition and aborted in another.
AllOrNothing ==
    \A p, q \in Partitions : \A o \in Visible(p) :
        \A o2 \in DataOffsets(q, log[p][o + 1].txn) : FirstMarkerAfter(q, o2) # "abort"

\* The LSO never passes the high watermark (the log end offset here).
LsoBelowHw == \A p \in Partitions : Lso(p) <= Len(log[p])

\* A fenced (zombie) instance never commits: every commit came from the
\* instance that called InitProducerId last.
NoZombieCommit == \A c \in commits : c[2] = c[3]

\* Idempotence: a write is never in a log twice.
NoDuplicates ==
    \A p \in Partitions : \A a, b \in 1..Len(log[p]) :
        (a # b /\ log[p][a].kind = "data") => log[p][a].id # log[p][b].id

=============================================================================
