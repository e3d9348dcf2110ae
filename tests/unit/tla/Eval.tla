---- MODULE Eval ----
EXTENDS Naturals, Integers, Sequences, FiniteSets, TLC
CONSTANTS N, Procs
VARIABLES x, q

Double(a) == 2 * a
Sum(s) == LET F(i, acc) == acc + s[i]
              Go(k) == IF k = 0 THEN 0 ELSE k
          IN  ApaFoldSeqLeft(Plus, 0, s)
Plus(a, b) == a + b
IsEven(k) == k % 2 = 0
Evens == SelectSeq(q, IsEven)
Pick == CHOOSE p \in Procs : TRUE
Lazy == IF q = <<>> THEN 0 ELSE Head(q)
Bad == Head(<<>>)
TypeOK == /\ x \in 0..N
          /\ q \in Seq(Nat)
fact[k \in 0..5] == IF k = 0 THEN 1 ELSE k
====
