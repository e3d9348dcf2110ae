---- MODULE Counter ----
(* A bounded counter that logs what it counted: it deadlocks at Limit. *)
EXTENDS Naturals, Sequences
CONSTANT Limit
ASSUME Limit \in Nat
VARIABLES c, log

Init == c = 0 /\ log = <<>>

Inc == /\ c < Limit
       /\ c' = c + 1
       /\ log' = Append(log, c)

Next == Inc

Small == c < 3

LogMatches == Len(log) = c /\ \A i \in DOMAIN log : log[i] = i - 1

ForgetsLog == c' = c + 1
Crash == /\ c' = Head(log)
         /\ log' = log

ConstInit == Limit = 5
====
