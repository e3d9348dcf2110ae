---- MODULE Flags ----
(* Flags's booleans sit where Bits has its integers 0 and 1. *)
CONSTANT C
VARIABLES x, y, r

Init == /\ x \in BOOLEAN
        /\ y \in {<<FALSE, TRUE>>, <<TRUE, FALSE>>}
        /\ r \in {[a |-> FALSE], [a |-> TRUE]}

Next == \E v \in BOOLEAN, w \in {<<FALSE, TRUE>>, <<TRUE, FALSE>>},
           s \in {[a |-> FALSE], [a |-> TRUE]} :
            /\ x' = IF v THEN w[1] ELSE s.a
            /\ y' = w
            /\ r' = s

Pick == CHOOSE v \in BOOLEAN : TRUE
====
