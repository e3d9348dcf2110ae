-------------------------- MODULE KafkaReplication --------------------------
(***************************************************************************)
(* One Kafka partition replicated on a few brokers: the controller's       *)
(* quorum state (leader, leader epoch, ISR), each replica's log of records *)
(* (id, leader epoch), its high watermark (HW), its leader epoch cache     *)
(* (the leader-epoch-checkpoint file) and what it believes about the       *)
(* leader. Written to match kafkalab.replication.partition.Partition and   *)
(* kafkalab.controller.quorum_controller, so that a trace of this spec can *)
(* be replayed against them (kafkalab.specs.replay).                       *)
(*                                                                         *)
(* The follower truncation rule is a constant, like kafkalab's setting     *)
(* kafkalab.follower.truncation.rule:                                      *)
(*   "high-watermark"       truncate to the local HW (before KIP-101)      *)
(*   "leader-epoch"         ask the leader where our latest epoch ended    *)
(*                          (KIP-101, KIP-279), whatever epoch the leader  *)
(*                          itself is in                                    *)
(*   "fenced-leader-epoch"  the same, answered only by a leader in the     *)
(*                          follower's epoch (KIP-320)                     *)
(*                                                                         *)
(* Offsets are 0-based as in Kafka: offset o is log[r][o + 1].             *)
(* The spec is typed for Apalache; kafkalab's built-in checker reads it    *)
(* too (no CHOOSE, no recursion, every quantifier bounded).                *)
(***************************************************************************)
EXTENDS Integers, Sequences, FiniteSets

CONSTANTS
    \* @type: Set(Str);
    Replicas,
    \* @type: Int;
    MaxRecords,
    \* @type: Int;
    MaxEpoch,
    \* @type: Int;
    MaxCrashes,
    \* @type: Str;
    TruncationRule

None == "none"
Rules == {"high-watermark", "leader-epoch", "fenced-leader-epoch"}

ASSUME TruncationRule \in Rules /\ MaxEpoch <= 4

VARIABLES
    \* @type: Str -> Seq({id: Int, epoch: Int});
    log,
    \* @type: Str -> Int;
    hw,
    \* @type: Str -> Seq({epoch: Int, start: Int});
    cache,
    \* @type: Str -> Int;
    epoch,
    \* @type: Str -> Str;
    leader,
    \* @type: Str -> Set(Str);
    isr,
    \* @type: {leader: Str, epoch: Int, isr: Set(Str)};
    quorum,
    \* @type: Set({leader: Str, epoch: Int, isr: Set(Str)});
    decisions,
    \* @type: Int;
    nextId,
    \* @type: Int;
    crashes,
    \* @type: Set(<<Int, {id: Int, epoch: Int}>>);
    committed

vars == <<log, hw, cache, epoch, leader, isr, quorum, decisions, nextId, crashes, committed>>

(* -- small helpers ------------------------------------------------------ *)

Min2(a, b) == IF a < b THEN a ELSE b
Max2(a, b) == IF a > b THEN a ELSE b

\* The smallest log end offset over a set of replicas (MaxRecords + 1 for none).
\* @type: (Set(Str)) => Int;
MinLeo(S) == Cardinality({o \in 0..MaxRecords : \A r \in S : Len(log[r]) > o})

\* The first k entries of a sequence whose start offsets grow: those below `at`.
\* @type: (Seq({epoch: Int, start: Int}), Int) => Seq({epoch: Int, start: Int});
EntriesBelow(c, at) == SubSeq(c, 1, Cardinality({i \in 1..Len(c) : c[i].start < at}))

\* LeaderEpochFileCache.assign: a newer epoch starts at `at`; entries that start
\* at or after it are dropped first.
\* @type: (Seq({epoch: Int, start: Int}), Int, Int) => Seq({epoch: Int, start: Int});
Assign(c, e, at) ==
    IF Len(c) > 0 /\ e <= c[Len(c)].epoch
    THEN c
    ELSE Append(EntriesBelow(c, at), [epoch |-> e, start |-> at])

LatestEpoch(c) == IF Len(c) = 0 THEN -1 ELSE c[Len(c)].epoch

\* LeaderEpochFileCache.end_offset_for: <<epoch, end offset>> of the largest known
\* epoch <= e, ending where the next epoch starts (the LEO for the latest one).
\* @type: (Seq({epoch: Int, start: Int}), Int, Int) => <<Int, Int>>;
EndOffsetFor(c, leo, e) ==
    LET higher == Cardinality({i \in 1..Len(c) : c[i].epoch > e})
        first == Len(c) - higher + 1   \* index of the first entry with a larger epoch
    IN  IF e < 0 \/ Len(c) = 0 THEN <<-1, -1>>
        ELSE IF c[Len(c)].epoch = e THEN <<e, leo>>
        ELSE IF higher = 0 THEN <<-1, -1>>
        ELSE IF first = 1 THEN <<e, c[1].start>>
        ELSE <<c[first - 1].epoch, c[first].start>>

\* One round of Partition.truncation_step: follower r asks l where its latest epoch
\* ended (OffsetForLeaderEpoch) and cuts. s is the follower's log end offset and
\* epoch cache so far, and whether it is done. A round that finds the leader never
\* had the epoch it answered about cuts and asks again (KIP-279). Cutting at or
\* past the LEO still drops cached epochs that start at the LEO (UnifiedLog.truncate_to).
\* @type: (Str, Str, {leo: Int, cache: Seq({epoch: Int, start: Int}), done: Bool}) => {leo: Int, cache: Seq({epoch: Int, start: Int}), done: Bool};
Round(r, l, s) ==
    LET Cut(o, fin) == [leo |-> o, cache |-> EntriesBelow(s.cache, o), done |-> fin]
        latest == LatestEpoch(s.cache)
        answer == EndOffsetFor(cache[l], Len(log[l]), latest)
        ours == EndOffsetFor(s.cache, s.leo, answer[1])
    IN  IF s.done THEN s
        ELSE IF TruncationRule = "high-watermark" \/ latest < 0 \/ answer[1] < 0 \/ answer[2] < 0
        THEN Cut(Min2(hw[r], s.leo), TRUE)
        ELSE IF ours[2] < 0 THEN Cut(Min2(answer[2], s.leo), TRUE)
        ELSE IF ours[1] # answer[1] THEN Cut(Min2(ours[2], s.leo), FALSE)
        ELSE Cut(Min2(Min2(ours[2], answer[2]), s.leo), TRUE)

\* Every round until one completes: at most one per cached epoch, plus one
\* (unrolled: no recursion, for Apalache; enough for MaxEpoch <= 4).
Truncation(r, l) ==
    LET s0 == [leo |-> Len(log[r]), cache |-> cache[r], done |-> FALSE]
        s1 == Round(r, l, s0)
        s2 == Round(r, l, s1)
        s3 == Round(r, l, s2)
        s4 == Round(r, l, s3)
        s5 == Round(r, l, s4)
        s6 == Round(r, l, s5)
    IN  s6

IsLeader(r) == leader[r] = r

\* Partition.maybe_increment_high_watermark on leader l with ISR S and log lg: the
\* smallest LEO over S, once every other member follows l in its epoch (the leader
\* knows their LEOs from their fetches); never backwards. The records it passes
\* are committed: acknowledged to acks=all producers.
\* @type: (Str, Set(Str), Seq({id: Int, epoch: Int})) => Int;
HwOver(l, S, lg) ==
    IF \A f \in S \ {l} : leader[f] = l /\ epoch[f] = epoch[l]
    THEN Max2(hw[l], Min2(Len(lg), MinLeo(S \ {l})))
    ELSE hw[l]

\* @type: (Str, Int, Seq({id: Int, epoch: Int})) => Set(<<Int, {id: Int, epoch: Int}>>);
CommittedUpTo(l, newHw, lg) == committed \cup {<<o, lg[o + 1]>> : o \in hw[l]..(newHw - 1)}

\* Move l's HW (and what is committed) to what the implementation computes.
MoveHw(l, S, lg) ==
    /\ hw' = [hw EXCEPT ![l] = HwOver(l, S, lg)]
    /\ committed' = CommittedUpTo(l, HwOver(l, S, lg), lg)

(* -- the initial state: no leader yet; the controller elects one --------- *)

Init ==
    /\ log = [r \in Replicas |-> <<>>]
    /\ hw = [r \in Replicas |-> 0]
    /\ cache = [r \in Replicas |-> <<>>]
    /\ epoch = [r \in Replicas |-> -1]
    /\ leader = [r \in Replicas |-> None]
    /\ isr = [r \in Replicas |-> {}]
    /\ quorum = [leader |-> None, epoch |-> -1, isr |-> Replicas]
    /\ decisions = {}
    /\ nextId = 1
    /\ crashes = 0
    /\ committed = {}

(* -- the controller ----------------------------------------------------- *)

\* A decision every replica will eventually apply (the metadata log).
Decide(q) ==
    /\ quorum' = q
    /\ decisions' = decisions \cup {q}

\* Elect a member of the ISR (clean election): a failed or deposed leader, or a
\* preferred leader election. Every leader change bumps the leader epoch.
ControllerElect(r) ==
    /\ r \in quorum.isr
    /\ r # quorum.leader
    /\ quorum.epoch < MaxEpoch
    /\ Decide([leader |-> r, epoch |-> quorum.epoch + 1, isr |-> quorum.isr])
    /\ UNCHANGED <<log, hw, cache, epoch, leader, isr, nextId, crashes, committed>>

\* Fence a broker (missed heartbeats): it leaves the ISR unless it is the last
\* member; if it led, the partition has no leader until the next election.
ControllerFence(r) ==
    /\ r \in quorum.isr
    /\ quorum.isr # {r}
    /\ IF r = quorum.leader
       THEN /\ quorum.epoch < MaxEpoch
            /\ Decide([leader |-> None, epoch |-> quorum.epoch + 1, isr |-> quorum.isr \ {r}])
       ELSE /\ quorum' = [quorum EXCEPT !.isr = @ \ {r}]
            /\ UNCHANGED decisions
    /\ UNCHANGED <<log, hw, cache, epoch, leader, isr, nextId, crashes, committed>>

(* -- replicas apply the controller's decisions -------------------------- *)

\* A replica applies a newer decision than its own; one that has none (it just
\* started, or restarted) catches up on the metadata log first: the decision of
\* the current epoch (its ISR may have changed since, without a new epoch).
Applies(r, d) ==
    /\ d.epoch > epoch[r]
    /\ epoch[r] >= 0 \/ d.epoch = quorum.epoch

BecomeLeader(r, d) ==
    /\ d.leader = r
    /\ Applies(r, d)
    /\ epoch' = [epoch EXCEPT ![r] = d.epoch]
    /\ leader' = [leader EXCEPT ![r] = r]
    /\ isr' = [isr EXCEPT ![r] = d.isr]
    /\ cache' = [cache EXCEPT ![r] = Assign(@, d.epoch, Len(log[r]))]
    \* Followers' LEOs are unknown until they fetch; alone in the ISR, the leader's
    \* own LEO is the HW at once (Partition.make_leader).
    /\ IF d.isr = {r}
       THEN /\ hw' = [hw EXCEPT ![r] = Max2(@, Len(log[r]))]
            /\ committed' = CommittedUpTo(r, Max2(hw[r], Len(log[r])), log[r])
       ELSE UNCHANGED <<hw, committed>>
    /\ UNCHANGED <<log, quorum, decisions, nextId, crashes>>

\* Become a follower of d.leader and truncate by the rule. The epoch rules need
\* the leader's answer: "leader-epoch" takes it from a broker that believes it
\* leads, in whatever epoch; "fenced-leader-epoch" only from the leader of d's
\* epoch (otherwise it answers FENCED/UNKNOWN_LEADER_EPOCH and we ask again).
BecomeFollower(r, d) ==
    /\ d.leader # r
    /\ Applies(r, d)
    /\ epoch' = [epoch EXCEPT ![r] = d.epoch]
    /\ leader' = [leader EXCEPT ![r] = d.leader]
    /\ isr' = [isr EXCEPT ![r] = d.isr]
    /\ IF d.leader = None
       THEN UNCHANGED <<log, hw, cache>>
       ELSE /\ \/ TruncationRule = "high-watermark"
               \/ TruncationRule = "leader-epoch" /\ IsLeader(d.leader)
               \/ /\ TruncationRule = "fenced-leader-epoch"
                  /\ IsLeader(d.leader)
                  /\ epoch[d.leader] = d.epoch
            /\ LET t == Truncation(r, d.leader)
               IN  /\ log' = [log EXCEPT ![r] = SubSeq(@, 1, t.leo)]
                   /\ cache' = [cache EXCEPT ![r] = t.cache]
                   /\ hw' = [hw EXCEPT ![r] = Min2(@, t.leo)]
    /\ UNCHANGED <<quorum, decisions, nextId, crashes, committed>>

(* -- the leader and its followers --------------------------------------- *)

\* A producer's write, accepted by any broker that believes it leads.
LeaderWrite(r) ==
    /\ IsLeader(r)
    /\ nextId <= MaxRecords
    /\ LET lg == Append(log[r], [id |-> nextId, epoch |-> epoch[r]])
       IN  /\ log' = [log EXCEPT ![r] = lg]
           /\ MoveHw(r, isr[r], lg)
    /\ nextId' = nextId + 1
    /\ UNCHANGED <<cache, epoch, leader, isr, quorum, decisions, crashes>>

\* A fetch, fenced by the current leader epoch (kafkalab always sends it): the
\* follower copies the next record and learns the leader's HW (never past its LEO).
FollowerFetch(f) ==
    LET l == leader[f]
    IN  /\ l # None
        /\ l # f
        /\ IsLeader(l)
        /\ epoch[l] = epoch[f]
        /\ LET grows == Len(log[f]) < Len(log[l])
               newLog == IF grows THEN Append(log[f], log[l][Len(log[f]) + 1]) ELSE log[f]
               newHw == Max2(hw[f], Min2(hw[l], Len(newLog)))
           IN  /\ grows \/ newHw # hw[f]
               /\ log' = [log EXCEPT ![f] = newLog]
               /\ hw' = [hw EXCEPT ![f] = newHw]
               /\ cache' = IF grows
                           THEN [cache EXCEPT ![f] = Assign(@, log[l][Len(log[f]) + 1].epoch, Len(log[f]))]
                           ELSE cache
        /\ UNCHANGED <<epoch, leader, isr, quorum, decisions, nextId, crashes, committed>>

\* The followers' fetches reach the leader: its HW moves to the smallest LEO over
\* its ISR once every member follows it in its epoch.
LeaderIncreaseHw(l) ==
    /\ IsLeader(l)
    /\ l \in isr[l]
    /\ HwOver(l, isr[l], log[l]) > hw[l]
    /\ MoveHw(l, isr[l], log[l])
    /\ UNCHANGED <<log, cache, epoch, leader, isr, quorum, decisions, nextId, crashes>>

\* AlterPartition: the leader of the quorum's epoch changes the ISR, and the
\* controller accepts it. Shrink: a follower behind the leader's LEO or not in
\* its epoch. Expand: a follower in its epoch that has reached the HW and the
\* start of the leader's epoch.
LeaderShrinkIsr(l, f) ==
    /\ IsLeader(l)
    /\ quorum.leader = l /\ quorum.epoch = epoch[l]
    /\ f \in quorum.isr \ {l}
    /\ \/ leader[f] # l
       \/ epoch[f] # epoch[l]
       \/ Len(log[f]) < Len(log[l])
    /\ quorum' = [quorum EXCEPT !.isr = @ \ {f}]
    /\ isr' = [isr EXCEPT ![l] = quorum.isr \ {f}]
    /\ MoveHw(l, quorum.isr \ {f}, log[l])
    /\ UNCHANGED <<log, cache, epoch, leader, decisions, nextId, crashes>>

EpochStart(l) == EndOffsetFor(cache[l], Len(log[l]), epoch[l] - 1)[2]

LeaderExpandIsr(l, f) ==
    /\ IsLeader(l)
    /\ quorum.leader = l /\ quorum.epoch = epoch[l]
    /\ f \in Replicas \ quorum.isr
    /\ f \notin isr[l]
    /\ leader[f] = l /\ epoch[f] = epoch[l]
    /\ Len(log[f]) >= hw[l]
    /\ Len(log[f]) >= EpochStart(l)
    /\ quorum' = [quorum EXCEPT !.isr = @ \cup {f}]
    /\ isr' = [isr EXCEPT ![l] = quorum.isr \cup {f}]
    /\ MoveHw(l, quorum.isr \cup {f}, log[l])
    /\ UNCHANGED <<log, cache, epoch, leader, decisions, nextId, crashes>>

\* The leader applies an ISR change the controller made without it (a fenced
\* follower), read from the metadata log; its HW is computed over the new ISR.
LeaderLearnsIsr(l) ==
    /\ IsLeader(l)
    /\ quorum.leader = l /\ quorum.epoch = epoch[l]
    /\ isr[l] # quorum.isr
    /\ isr' = [isr EXCEPT ![l] = quorum.isr]
    /\ MoveHw(l, quorum.isr, log[l])
    /\ UNCHANGED <<log, cache, epoch, leader, quorum, decisions, nextId, crashes>>

(* -- power failures ------------------------------------------------------ *)

\* A broker loses power: its log keeps only what it had fsynced (any prefix, as
\* kafkalab's power_failure cuts to the recovery point), its HW is clamped, it
\* forgets its role. Restarting, it re-registers and is fenced: out of the ISR
\* unless it is the last member, and a leader change if it led.
Crash(r) ==
    /\ crashes < MaxCrashes
    /\ r = quorum.leader => quorum.epoch < MaxEpoch
    /\ \E keep \in 0..Len(log[r]) :
        /\ log' = [log EXCEPT ![r] = SubSeq(@, 1, keep)]
        /\ cache' = [cache EXCEPT ![r] = EntriesBelow(@, keep)]
        /\ hw' = [hw EXCEPT ![r] = Min2(@, keep)]
    /\ epoch' = [epoch EXCEPT ![r] = -1]
    /\ leader' = [leader EXCEPT ![r] = None]
    /\ isr' = [isr EXCEPT ![r] = {}]
    /\ crashes' = crashes + 1
    /\ LET newIsr == IF quorum.isr = {r} THEN {r} ELSE quorum.isr \ {r}
       IN  IF r = quorum.leader
           THEN Decide([leader |-> None, epoch |-> quorum.epoch + 1, isr |-> newIsr])
           ELSE /\ quorum' = [quorum EXCEPT !.isr = newIsr]
                /\ UNCHANGED decisions
    /\ UNCHANGED <<nextId, committed>>

Next ==
    \/ \E r \in Replicas : ControllerElect(r)
    \/ \E r \in Replicas : ControllerFence(r)
    \/ \E r \in Replicas, d \in decisions : BecomeLeader(r, d)
    \/ \E r \in Replicas, d \in decisions : BecomeFollower(r, d)
    \/ \E r \in Replicas : LeaderWrite(r)
    \/ \E r \in Replicas : FollowerFetch(r)
    \/ \E r \in Replicas : LeaderIncreaseHw(r)
    \/ \E l, f \in Replicas : LeaderShrinkIsr(l, f)
    \/ \E l, f \in Replicas : LeaderExpandIsr(l, f)
    \/ \E r \in Replicas : LeaderLearnsIsr(r)
    \/ \E r \in Replicas : Crash(r)

Spec == Init /\ [][Next]_vars

(* -- invariants ---------------------------------------------------------- *)

TypeOK ==
    /\ \A r \in Replicas : hw[r] \in 0..MaxRecords /\ epoch[r] \in -1..MaxEpoch
    /\ quorum.epoch \in -1..MaxEpoch
    /\ quorum.isr \subseteq Replicas
    /\ nextId \in 1..(MaxRecords + 1)

\* A replica's HW never passes its log end offset.
HwBelowLeo == \A r \in Replicas : hw[r] <= Len(log[r])

\* The controller's leader is a member of its ISR, and the ISR is never empty.
LeaderInIsr ==
    /\ quorum.isr # {}
    /\ quorum.leader # None => quorum.leader \in quorum.isr

\* Leader epochs only grow: along every log, and no replica is ahead of the controller.
EpochsGrow ==
    /\ \A r \in Replicas : \A i \in 1..(Len(log[r]) - 1) : log[r][i].epoch <= log[r][i + 1].epoch
    /\ \A r \in Replicas : epoch[r] <= quorum.epoch

\* No committed record is lost: every member of the controller's ISR holds every
\* committed record at its offset (so whoever is elected next has them all).
NoCommittedLoss ==
    \A c \in committed : \A r \in quorum.isr :
        Len(log[r]) > c[1] /\ log[r][c[1] + 1] = c[2]

\* Replicas that follow the same leader in the same epoch agree on everything
\* below both their HWs (no divergence). (A partition with no leader has not
\* reconciled its replicas yet.)
NoDivergence ==
    \A r1, r2 \in Replicas :
        (epoch[r1] = epoch[r2] /\ leader[r1] = leader[r2] /\ leader[r1] # None) =>
            \A o \in 0..(Min2(hw[r1], hw[r2]) - 1) : log[r1][o + 1] = log[r2][o + 1]

Safety == HwBelowLeo /\ LeaderInIsr /\ EpochsGrow /\ NoCommittedLoss /\ NoDivergence

=============================================================================
