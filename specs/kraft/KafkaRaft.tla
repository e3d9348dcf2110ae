------------------------------ MODULE KafkaRaft ------------------------------
(***************************************************************************)
(* KRaft: the Raft of Kafka's controller quorum (KIP-595), as Kafka's      *)
(* raft/ module does it (KafkaRaftClient, QuorumState and its states,      *)
(* LeaderState): elections by Vote, leaders announced by BeginQuorumEpoch, *)
(* replication by followers that Fetch with their last fetched epoch, the  *)
(* high watermark (HW) of the leader, and crashes that keep only what is   *)
(* on disk.                                                                 *)
(*                                                                         *)
(* Each voter has, on disk, its log and its quorum-state file (epoch and   *)
(* the candidate it voted for, written and fsynced before a vote is        *)
(* granted or a candidacy starts: QuorumState.transitionTo). In memory: its *)
(* role (QuorumState's Unattached, Candidate, Leader, Follower, Resigned;   *)
(* Unattached with a vote is Kafka's Voted state), the leader it knows,    *)
(* the votes a candidate has, the HW, and a leader's view of its followers' *)
(* fetch offsets (LeaderState's ReplicaState).                              *)
(*                                                                         *)
(* A record is its epoch: offset o of voter v is log[v][o + 1]. Offsets    *)
(* are 0-based as in Kafka; an empty log ends at offset 0 in epoch 0.      *)
(*                                                                         *)
(* Two switches make the broken variants (checks.toml):                    *)
(*   CommitOwnEpochFirst = FALSE: the leader moves its HW once a majority  *)
(*     has reached the start of its epoch, before its LeaderChange record  *)
(*     (the first of its epoch) is committed: the off-by-one of            *)
(*     KAFKA-12619.                                                         *)
(*   PersistElectionState = FALSE: a restart forgets the vote of the       *)
(*     current epoch (the quorum-state write did not reach the disk before *)
(*     a power failure), and a leader restarts Unattached rather than      *)
(*     Resigned (KAFKA-10527): it can vote a second time in one epoch.      *)
(*                                                                         *)
(* Bounds: Voters; Candidates, the voters that stand for election;        *)
(* MaxEpoch; MaxLog, records per log; MaxRestarts; ClientWrites, whether   *)
(* the leader appends records other than its LeaderChange.                 *)
(*                                                                         *)
(* Requests and their responses are single steps (the voter handles the   *)
(* request, the sender the response); a fetch response may be lost after   *)
(* the leader handled the request. Typed for Apalache; kafkalab's built-in *)
(* checker reads it too (no CHOOSE, no recursion, quantifiers bounded).    *)
(***************************************************************************)
EXTENDS Integers, Sequences, FiniteSets

CONSTANTS
    \* @type: Set(Str);
    Voters,
    \* @type: Set(Str);
    Candidates,
    \* @type: Int;
    MaxEpoch,
    \* @type: Int;
    MaxLog,
    \* @type: Int;
    MaxRestarts,
    \* @type: Bool;
    CommitOwnEpochFirst,
    \* @type: Bool;
    PersistElectionState,
    \* @type: Bool;
    ClientWrites

None == "none"
Roles == {"unattached", "candidate", "leader", "follower", "resigned"}

ASSUME Cardinality(Voters) >= 2 /\ Candidates \subseteq Voters /\ MaxEpoch >= 1 /\ MaxLog >= 1

VARIABLES
    \* @type: Str -> Str;
    role,
    \* @type: Str -> Int;
    epoch,
    \* @type: Str -> Str;
    votedFor,
    \* @type: Str -> Str;
    leader,
    \* @type: Str -> Set(Str);
    votes,
    \* @type: Str -> Seq(Int);
    log,
    \* @type: Str -> Int;
    hw,
    \* @type: Str -> (Str -> Int);
    fetched,
    \* @type: Int;
    restarts,
    \* History, for the invariants: every <<epoch, voter>> that became leader,
    \* and every <<offset, record epoch, epoch of the leader whose HW passed it
    \* first>>.
    \* @type: Set(<<Int, Str>>);
    elected,
    \* @type: Set(<<Int, Int, Int>>);
    committed

vars == <<role, epoch, votedFor, leader, votes, log, hw, fetched, restarts, elected, committed>>

(* -- helpers ------------------------------------------------------------- *)

Min2(a, b) == IF a < b THEN a ELSE b
Max2(a, b) == IF a > b THEN a ELSE b

IsMajority(S) == Cardinality(S) * 2 > Cardinality(Voters)

\* The epoch of the last record (0 for an empty log).
\* @type: (Seq(Int)) => Int;
LastEpoch(lg) == IF Len(lg) = 0 THEN 0 ELSE lg[Len(lg)]

\* ReplicatedLog.endOffsetForEpoch: where the largest epoch <= e ends (the
\* number of records of epochs <= e: epochs only grow along a log).
\* @type: (Seq(Int), Int) => Int;
EndOffsetFor(lg, e) == Cardinality({i \in 1..Len(lg) : lg[i] <= e})

\* ...and that epoch (0 when the log has none <= e).
\* @type: (Seq(Int), Int) => Int;
EpochAtOrBelow(lg, e) == IF EndOffsetFor(lg, e) = 0 THEN 0 ELSE lg[EndOffsetFor(lg, e)]

\* The Vote rule: the candidate's log is at least as up to date as the
\* voter's, comparing (last epoch, end offset).
LogUpToDate(c, v) ==
    \/ LastEpoch(log[c]) > LastEpoch(log[v])
    \/ LastEpoch(log[c]) = LastEpoch(log[v]) /\ Len(log[c]) >= Len(log[v])

\* The offset of l's LeaderChange record: where its epoch starts.
EpochStart(l) == Cardinality({i \in 1..Len(log[l]) : log[l][i] < epoch[l]})

\* A leader knows no follower's fetch offset yet (-1).
NoFetches == [v \in Voters |-> -1]

\* LeaderState.maybeUpdateHighWatermark, for leader l whose log is lg and
\* whose followers fetched from the offsets in off: the largest offset a
\* majority of voters has reached (the leader counts its own end offset)...
\* @type: (Str -> Int) => Int;
MajorityOffset(off) == Cardinality({n \in 1..MaxLog : IsMajority({v \in Voters : off[v] >= n})})

\* ...becomes the HW if it passes the start of l's epoch (the LeaderChange
\* record, committed: a record of l's own epoch) and the HW does not go back.
\* The broken rule only asks it to reach the start of the epoch.
\* @type: (Str, Str -> Int) => Int;
NewHw(l, off) ==
    LET m == MajorityOffset(off)
        ownEpochCommitted == IF CommitOwnEpochFirst THEN m > EpochStart(l) ELSE m >= EpochStart(l)
    IN  IF ownEpochCommitted /\ m > hw[l] THEN m ELSE hw[l]

\* The records l's HW passes for the first time are committed (by l's epoch).
\* @type: (Str, Seq(Int), Int) => Set(<<Int, Int, Int>>);
Commit(l, lg, newHw) ==
    committed \cup
        {<<o, lg[o + 1], epoch[l]>> :
            o \in {p \in 0..(newHw - 1) : \A c \in committed : ~(c[1] = p /\ c[2] = lg[p + 1])}}

\* The offsets the leader counts: its own log end, its followers' fetch offsets.
Offsets(l) == [v \in Voters |-> IF v = l THEN Len(log[l]) ELSE fetched[l][v]]

(* -- the initial state: epoch 0, no leader, empty logs ----------------- *)

Init ==
    /\ role = [v \in Voters |-> "unattached"]
    /\ epoch = [v \in Voters |-> 0]
    /\ votedFor = [v \in Voters |-> None]
    /\ leader = [v \in Voters |-> None]
    /\ votes = [v \in Voters |-> {}]
    /\ log = [v \in Voters |-> <<>>]
    /\ hw = [v \in Voters |-> 0]
    /\ fetched = [v \in Voters |-> NoFetches]
    /\ restarts = 0
    /\ elected = {}
    /\ committed = {}

(* -- elections ----------------------------------------------------------- *)

\* The election timeout of an Unattached, Candidate or Resigned voter, or the
\* fetch timeout of a Follower: it becomes a candidate in the next epoch and
\* votes for itself (QuorumState.transitionToCandidate, persisted first).
\* (Bounds: only the voters in Candidates stand, and not with a full log,
\* where their LeaderChange record would not fit.)
Timeout(v) ==
    /\ v \in Candidates
    /\ role[v] # "leader"
    /\ epoch[v] < MaxEpoch
    /\ Len(log[v]) < MaxLog
    /\ role' = [role EXCEPT ![v] = "candidate"]
    /\ epoch' = [epoch EXCEPT ![v] = @ + 1]
    /\ votedFor' = [votedFor EXCEPT ![v] = v]
    /\ leader' = [leader EXCEPT ![v] = None]
    /\ votes' = [votes EXCEPT ![v] = {v}]
    /\ UNCHANGED <<log, hw, fetched, restarts, elected, committed>>

\* Candidate c asks voter v for its vote (KafkaRaftClient.handleVoteRequest,
\* then handleVoteResponse). A voter in a newer epoch refuses, and c learns
\* that epoch and the leader v knows in it (maybeTransition: c follows it, or
\* is Unattached when v knows none). Otherwise v first moves to c's epoch if it is
\* behind (Unattached, no vote), then grants the vote if it is Unattached in
\* that epoch and has not voted, and c's log is at least as up to date as its
\* own, or if it already voted for c. The vote is persisted before the
\* response. A candidate with a majority becomes leader at once and appends
\* a LeaderChange record in its epoch (QuorumState.transitionToLeader,
\* KafkaRaftClient.onBecomeLeader); the HW it knew is forgotten.
RequestVote(c, v) ==
    /\ role[c] = "candidate"
    /\ v # c
    /\ v \notin votes[c]
    /\ IF epoch[v] > epoch[c]
       THEN /\ role' = [role EXCEPT ![c] = IF leader[v] # None THEN "follower" ELSE "unattached"]
            /\ epoch' = [epoch EXCEPT ![c] = epoch[v]]
            /\ votedFor' = [votedFor EXCEPT ![c] = None]
            /\ leader' = [leader EXCEPT ![c] = leader[v]]
            /\ votes' = [votes EXCEPT ![c] = {}]
            /\ UNCHANGED <<log, hw, fetched, elected, committed>>
       ELSE LET e == epoch[c]
                fresh == epoch[v] < e
                vRole == IF fresh THEN "unattached" ELSE role[v]
                vVoted == IF fresh THEN None ELSE votedFor[v]
                grant == /\ vRole = "unattached"
                         /\ \/ vVoted = None /\ LogUpToDate(c, v)
                            \/ vVoted = c
                won == grant /\ IsMajority(votes[c] \cup {v})
            IN  /\ fresh \/ grant
                /\ epoch' = [epoch EXCEPT ![v] = e]
                /\ votedFor' = [votedFor EXCEPT ![v] = IF grant THEN c ELSE vVoted]
                /\ IF won
                   THEN /\ role' = [role EXCEPT ![v] = vRole, ![c] = "leader"]
                        /\ leader' = [leader EXCEPT ![v] = IF fresh THEN None ELSE @, ![c] = c]
                        /\ votes' = [votes EXCEPT ![v] = IF fresh THEN {} ELSE @, ![c] = {}]
                        /\ log' = [log EXCEPT ![c] = Append(@, e)]
                        /\ hw' = [hw EXCEPT ![c] = 0]
                        /\ fetched' = [fetched EXCEPT ![v] = NoFetches, ![c] = NoFetches]
                        /\ elected' = elected \cup {<<e, c>>}
                   ELSE /\ role' = [role EXCEPT ![v] = vRole]
                        /\ leader' = [leader EXCEPT ![v] = IF fresh THEN None ELSE @]
                        /\ votes' = [votes EXCEPT
                                        ![v] = IF fresh THEN {} ELSE @,
                                        ![c] = IF grant THEN @ \cup {v} ELSE @]
                        /\ fetched' = [fetched EXCEPT ![v] = NoFetches]
                        /\ UNCHANGED <<log, hw, elected>>
                /\ UNCHANGED committed
    /\ UNCHANGED restarts

\* The leader's BeginQuorumEpoch reaches v: a voter in an older epoch (a
\* deposed leader too), or an Unattached voter or a Candidate of the same
\* epoch, becomes a Follower of l (persisted: epoch, leader; the vote stays
\* if the epoch does).
BeginQuorumEpoch(l, v) ==
    /\ role[l] = "leader"
    /\ v # l
    /\ \/ epoch[v] < epoch[l]
       \/ epoch[v] = epoch[l] /\ role[v] \in {"unattached", "candidate"}
    /\ role' = [role EXCEPT ![v] = "follower"]
    /\ epoch' = [epoch EXCEPT ![v] = epoch[l]]
    /\ votedFor' = [votedFor EXCEPT ![v] = IF epoch[v] < epoch[l] THEN None ELSE @]
    /\ leader' = [leader EXCEPT ![v] = l]
    /\ votes' = [votes EXCEPT ![v] = {}]
    /\ fetched' = [fetched EXCEPT ![v] = NoFetches]
    /\ UNCHANGED <<log, hw, restarts, elected, committed>>

\* A leader resigns: gracefully (EndQuorumEpoch) or by check-quorum (no
\* fetch from a majority within the fetch timeout). Resigned, it votes for
\* nobody in its epoch.
Resign(l) ==
    /\ role[l] = "leader"
    /\ role' = [role EXCEPT ![l] = "resigned"]
    /\ fetched' = [fetched EXCEPT ![l] = NoFetches]
    /\ UNCHANGED <<epoch, votedFor, leader, votes, log, hw, restarts, elected, committed>>

(* -- replication --------------------------------------------------------- *)

\* The active controller appends a record (a metadata change) in its epoch.
\* Its own end offset counts towards the HW (LeaderState.updateLocalState).
ClientWrite(l) ==
    /\ ClientWrites
    /\ role[l] = "leader"
    /\ Len(log[l]) < MaxLog
    /\ LET lg == Append(log[l], epoch[l])
           newHw == NewHw(l, [Offsets(l) EXCEPT ![l] = Len(lg)])
       IN  /\ log' = [log EXCEPT ![l] = lg]
           /\ hw' = [hw EXCEPT ![l] = newHw]
           /\ committed' = Commit(l, lg, newHw)
    /\ UNCHANGED <<role, epoch, votedFor, leader, votes, fetched, restarts, elected>>

\* Follower f fetches from its leader l in their epoch, from its log end
\* offset, with the epoch of its last record (LastFetchedEpoch). The leader
\* validates them (ReplicatedLog.validateOffsetAndEpoch): where the largest of
\* its epochs <= LastFetchedEpoch ends. If that is not the follower's epoch,
\* or ends before the fetch offset, the logs diverged: the response names
\* that epoch and end offset (DivergingEpoch) and the follower truncates to
\* the smaller of it and its own end of that epoch. Otherwise the leader
\* records the fetch offset (LeaderState.updateReplicaState), moves its HW,
\* and answers with its next record (one per fetch: a response is bounded
\* in bytes) and its HW; the follower appends it and takes the HW (never
\* past its log end, never backwards). A response may be lost
\* (delivered = FALSE): the leader has handled the request, the follower
\* has nothing.
Fetch(f) ==
    LET l == leader[f]
    IN  /\ role[f] = "follower"
        /\ role[l] = "leader"
        /\ epoch[l] = epoch[f]
        /\ \E delivered \in BOOLEAN :
            LET fo == Len(log[f])
                lfe == LastEpoch(log[f])
                n == EndOffsetFor(log[l], lfe)
                ep == EpochAtOrBelow(log[l], lfe)
                valid == ep = lfe /\ fo <= n
                newHw == NewHw(l, [Offsets(l) EXCEPT ![f] = fo])
                appended == log[f] \o SubSeq(log[l], fo + 1, Min2(fo + 1, Len(log[l])))
                cut == Min2(n, EndOffsetFor(log[f], ep))
            IN  IF valid
                THEN /\ fetched' = [fetched EXCEPT ![l][f] = fo]
                     /\ committed' = Commit(l, log[l], newHw)
                     /\ IF delivered
                        THEN /\ log' = [log EXCEPT ![f] = appended]
                             /\ hw' = [hw EXCEPT ![l] = newHw,
                                                 ![f] = Max2(@, Min2(newHw, Len(appended)))]
                        ELSE /\ hw' = [hw EXCEPT ![l] = newHw]
                             /\ UNCHANGED log
                ELSE /\ delivered
                     /\ log' = [log EXCEPT ![f] = SubSeq(@, 1, cut)]
                     /\ hw' = [hw EXCEPT ![f] = Min2(@, cut)]
                     /\ UNCHANGED <<fetched, committed>>
        /\ UNCHANGED <<role, epoch, votedFor, leader, votes, restarts, elected>>

(* -- crashes ------------------------------------------------------------- *)

\* A voter crashes and restarts (a kill or a power failure): the log and the
\* quorum-state file survive, everything else is gone (QuorumState.initialize).
\* A former leader comes back Resigned in its epoch (it must neither vote for
\* another leader of that epoch nor write it again), a candidate as a
\* candidate with only its own vote, a follower as a follower, a voter with a
\* vote keeps it. The HW is unknown until the next fetch.
\* With PersistElectionState = FALSE the last quorum-state write is lost:
\* the voter keeps its epoch but forgets its vote and comes back Unattached.
Restart(v) ==
    /\ restarts < MaxRestarts
    /\ IF PersistElectionState
       THEN LET back == IF role[v] \in {"leader", "resigned"} THEN "resigned"
                        ELSE IF leader[v] # None THEN "follower"
                        ELSE IF votedFor[v] = v THEN "candidate"
                        ELSE "unattached"
            IN  /\ role' = [role EXCEPT ![v] = back]
                /\ votes' = [votes EXCEPT ![v] = IF back = "candidate" THEN {v} ELSE {}]
            /\ UNCHANGED <<votedFor, leader>>
       ELSE /\ role' = [role EXCEPT ![v] = "unattached"]
            /\ votedFor' = [votedFor EXCEPT ![v] = None]
            /\ leader' = [leader EXCEPT ![v] = None]
            /\ votes' = [votes EXCEPT ![v] = {}]
    /\ hw' = [hw EXCEPT ![v] = 0]
    /\ fetched' = [fetched EXCEPT ![v] = NoFetches]
    /\ restarts' = restarts + 1
    /\ UNCHANGED <<epoch, log, elected, committed>>

Next ==
    \/ \E v \in Voters : Timeout(v)
    \/ \E c, v \in Voters : RequestVote(c, v)
    \/ \E l, v \in Voters : BeginQuorumEpoch(l, v)
    \/ \E l \in Voters : Resign(l)
    \/ \E l \in Voters : ClientWrite(l)
    \/ \E f \in Voters : Fetch(f)
    \/ \E v \in Voters : Restart(v)

Spec == Init /\ [][Next]_vars

(* -- invariants ---------------------------------------------------------- *)

TypeOK ==
    /\ \A v \in Voters :
        /\ role[v] \in Roles
        /\ epoch[v] \in 0..MaxEpoch
        /\ votedFor[v] \in Voters \cup {None}
        /\ leader[v] \in Voters \cup {None}
        /\ votes[v] \subseteq Voters
        /\ Len(log[v]) <= MaxLog
        /\ hw[v] \in 0..MaxLog
    /\ restarts \in 0..MaxRestarts

\* A voter's HW never passes its log end offset.
HwBelowLeo == \A v \in Voters : hw[v] <= Len(log[v])

\* At most one leader per epoch, ever.
ElectionSafety == \A x, y \in elected : x[1] = y[1] => x[2] = y[2]

\* Two logs with a record of the same epoch at the same offset agree on
\* everything up to that offset.
LogMatching ==
    \A v, w \in Voters :
        \A o \in 0..(Min2(Len(log[v]), Len(log[w])) - 1) :
            log[v][o + 1] = log[w][o + 1] =>
                \A i \in 0..o : log[v][i + 1] = log[w][i + 1]

\* A committed record is in the log of every leader of a later epoch than
\* the one that committed it.
LeaderCompleteness ==
    \A c \in committed : \A l \in Voters :
        (role[l] = "leader" /\ epoch[l] > c[3]) =>
            Len(log[l]) > c[1] /\ log[l][c[1] + 1] = c[2]

\* Once below a HW, a record stays: every committed record is, at its
\* offset, on a majority of voters (so every future leader has it), and what
\* any voter has below its HW is committed.
CommittedNeverLost ==
    /\ \A c \in committed :
        IsMajority({v \in Voters : Len(log[v]) > c[1] /\ log[v][c[1] + 1] = c[2]})
    /\ \A v \in Voters : \A o \in 0..(hw[v] - 1) :
        \E c \in committed : c[1] = o /\ c[2] = log[v][o + 1]

Safety == HwBelowLeo /\ ElectionSafety /\ LogMatching /\ LeaderCompleteness /\ CommittedNeverLost

=============================================================================
