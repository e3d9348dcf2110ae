---- MODULE BranchInit ----
(* Init and Next that branch over sets, LET, CASE and nested operators. *)
EXTENDS Integers, FiniteSets
CONSTANTS Procs, Max
VARIABLES pc, n

Init == /\ pc \in [Procs -> {"idle"}]
        /\ n \in 0..1

Step(p) ==
  LET cur == pc[p]
      nxt(s) == CASE s = "idle" -> "busy" [] s = "busy" -> "done" [] OTHER -> "idle"
  IN /\ pc' = [pc EXCEPT ![p] = nxt(cur)]
     /\ IF cur = "done" THEN n' = n ELSE n' \in {k \in 0..Max : k >= n}

Next == \E p \in Procs : Step(p)

Bounded == n <= Max

ConstInit == /\ Procs = {"a", "b"}
             /\ Max = 2
====
