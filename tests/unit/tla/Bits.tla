---- MODULE Bits ----
(* Integers 0 and 1 in sets, tuples and records: the same Python values as FALSE and
   TRUE in Flags (0 == False, 1 == True), which must not leak into it. *)
EXTENDS Naturals
CONSTANT C
VARIABLES x, y, r

Init == /\ x \in {0, 1}
        /\ y \in {<<0, 1>>, <<1, 0>>}
        /\ r \in {[a |-> 0], [a |-> 1]}

Next == \E v \in {0, 1}, w \in {<<0, 1>>, <<1, 0>>}, s \in {[a |-> 0], [a |-> 1]} :
            /\ x' = (v + w[1] + s.a) % 2
            /\ y' = w
            /\ r' = s

Pick == CHOOSE v \in {0, 1} : TRUE
====
