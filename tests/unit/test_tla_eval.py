"""The TLA+ evaluator: each operator family, TLA+ equality of records, functions and
tuples, EXCEPT with @, LET with parameters, CHOOSE, laziness, and errors with positions."""

from __future__ import annotations

import os

import pytest

from kafkalab.specs.tla import (
    Fn,
    TlaEvalError,
    TlaSyntaxError,
    UnsupportedConstruct,
    fmt,
    load_module,
    make_fn,
)

HERE = os.path.join(os.path.dirname(__file__), "tla")
CONSTS = {"N": 3, "Procs": {"p2", "p1", "p3"}}


@pytest.fixture(scope="module")
def mod():
    return load_module(os.path.join(HERE, "Eval.tla"))


def ev(mod, text, state=None, **kw):
    return mod.evaluate(text, constants=CONSTS, state=state or {"x": 1, "q": (1, 2, 4)}, **kw)


@pytest.mark.parametrize(
    "text, value",
    [
        # logic
        ("TRUE /\\ ~FALSE", True),
        ("FALSE \\/ (TRUE => FALSE)", False),
        ("FALSE => 1", True),  # short-circuit: the right side is not evaluated
        ("(TRUE <=> FALSE) \\equiv FALSE", True),
        ("\\A i \\in 1..3 : i > 0", True),
        ("\\E i, j \\in 1..3 : i + j = 6", True),
        ("\\E i \\in 1..3, j \\in {10} : i + j = 14", False),
        ("\\E <<a, b>> \\in {<<1, 2>>, <<3, 4>>} : a + b = 7", True),
        ("\\A i \\in {} : FALSE", True),
        # arithmetic and comparison
        ("1 + 2 * 3 - 4", 3),
        ("(7 \\div 2) + (7 % 3)", 4),
        ("-7 % 3", 2),
        ("2 ^ 10", 1024),
        ("-(3 - 5)", 2),
        ("1 < 2 /\\ 2 <= 2 /\\ 3 >= 2 /\\ 3 > 2 /\\ 2 =< 2 /\\ 1 # 2 /\\ 1 /= 2", True),
        ("Cardinality(1..0)", 0),
        # sets
        ("{1, 2} \\cup {3} = 1..3", True),
        ("{1, 2} \\cap {2, 3}", frozenset({2})),
        ("{1, 2} \\ {2}", frozenset({1})),
        ("{1} \\subseteq {1, 2} /\\ ~({3} \\subseteq {1, 2})", True),
        ("3 \\notin {1, 2}", True),
        ("{x \\in 1..6 : x % 3 = 0}", frozenset({3, 6})),
        ("{a + b : a \\in {1, 2}, b \\in {10}}", frozenset({11, 12})),
        ("SUBSET {1, 2} = {{}, {1}, {2}, {1, 2}}", True),
        ("UNION {{1}, {2, 3}}", frozenset({1, 2, 3})),
        ("Cardinality(SUBSET (1..4))", 16),
        ("IsFiniteSet({1})", True),
        ("{1} \\X {2, 3} = {<<1, 2>>, <<1, 3>>}", True),
        ("Cardinality({1, 2} \\X {3} \\X {4, 5})", 4),
        ("<<1, 2, 3>> \\in {1} \\X {2} \\X {3}", True),
        ("{} = {}", True),
        ("5 \\in Nat /\\ -5 \\in Int /\\ -5 \\notin Nat", True),
        ("BOOLEAN = {TRUE, FALSE}", True),
        # functions
        ("[i \\in 1..3 |-> i * i][3]", 9),
        ('DOMAIN [i \\in {"a", "b"} |-> 0]', frozenset({"a", "b"})),
        ("[i \\in 1..2, j \\in 1..2 |-> i * 10 + j][2, 1]", 21),
        ('Cardinality([1..2 -> {"a", "b", "c"}])', 9),
        ('[k \\in 1..2 |-> "a"] \\in [1..2 -> {"a"}]', True),
        ('(1 :> "a" @@ 2 :> "b") = <<"a", "b">>', True),
        ('((1 :> "x") @@ (1 :> "y"))[1]', "x"),
        ("fact[3]", 3),
        # records
        ('[a |-> 1, b |-> "x"].b', "x"),
        ("[a |-> 1, b |-> 2] = [b |-> 2, a |-> 1]", True),
        ("[a |-> 1] \\in [a : {1, 2}]", True),
        ("[a |-> 1, b |-> 1] \\in [a : {1, 2}]", False),
        ('Cardinality([a : {1, 2}, b : {"x", "y", "z"}])', 6),
        ('[i \\in {"a"} |-> 5] = [a |-> 5]', True),
        # tuples / sequences
        ("<<1, 2>> = [i \\in 1..2 |-> i]", True),
        ('DOMAIN <<"a", "b">> = {1, 2}', True),
        ("<<>> = [i \\in {} |-> 0]", True),
        ("Len(<<1, 2, 3>>) + Len(<<>>)", 3),
        ("Append(<<1>>, 2) = <<1, 2>>", True),
        ("Head(<<5, 6>>) + Head(Tail(<<5, 6>>))", 11),
        ("SubSeq(<<1, 2, 3, 4>>, 2, 3)", (2, 3)),
        ("SubSeq(<<1, 2>>, 2, 1)", ()),
        ("<<1>> \\o <<2, 3>>", (1, 2, 3)),
        ("<<1, 2>> \\in Seq({1, 2}) /\\ <<3>> \\notin Seq({1, 2})", True),
        ("SelectSeq(<<1, 2, 3, 4>>, IsEven)", (2, 4)),
        ("SelectSeq(<<1, 2, 3>>, LAMBDA k : k > 1)", (2, 3)),
        ("Evens", (2, 4)),
        ('<<1, "a">>[2]', "a"),
        # control
        ('IF 1 > 2 THEN "a" ELSE "b"', "b"),
        ('CASE 1 > 2 -> "a" [] 2 > 1 -> "b" [] OTHER -> "c"', "b"),
        ("CASE FALSE -> 1 [] OTHER -> 2", 2),
        ("LET sq(a) == a * a  y == sq(3) IN y + sq(2)", 13),
        ("LET a == 1 IN LET b(c) == a + c IN b(10)", 11),
        ("\\A i \\in 1..3 : LET d(k) == k + i IN d(0) = i", True),
        ("Double(Double(x))", 4),
        ("Sum(<<1, 2, 3>>)", 6),
        ("Lazy", 1),
        # state and constants
        ("x + Len(q)", 4),
        ("TypeOK", True),
        ("N", 3),
    ],
)
def test_operators(mod, text, value):
    assert ev(mod, text) == value


def test_choose_is_deterministic_and_smallest(mod):
    assert ev(mod, "Pick") == "p1"
    assert ev(mod, "CHOOSE i \\in {5, 3, 9} : i > 4") == 5
    assert ev(mod, "CHOOSE s \\in SUBSET {1, 2} : Cardinality(s) = 1") == frozenset({1})


def test_except_with_at_and_nested_paths(mod):
    v = ev(
        mod,
        "[[i \\in 1..2 |-> [a |-> i, b |-> <<0, 0>>]] EXCEPT "
        "![1].a = @ + 10, ![2].b[2] = @ + 5, ![2].a = 7]",
    )
    assert v == (make_fn({"a": 11, "b": (0, 0)}), make_fn({"a": 7, "b": (0, 5)}))
    assert ev(mod, "[<<1, 2>> EXCEPT ![1] = @ * 100]") == (100, 2)
    assert ev(mod, '[[a |-> 1] EXCEPT !["a"] = 2]') == Fn({"a": 2})
    # a key outside the domain leaves the function as it is (TLA+'s definition)
    assert ev(mod, "[<<1>> EXCEPT ![5] = 0]") == (1,)


def test_values_are_canonical_and_hashable():
    assert make_fn({1: "a", 2: "b"}) == ("a", "b")
    assert make_fn({}) == ()
    r1 = make_fn({"a": 1, "b": frozenset({1})})
    r2 = make_fn({"b": frozenset({1}), "a": 1})
    assert r1 == r2 and hash(r1) == hash(r2)
    assert len({r1, r2, make_fn({2: 1})}) == 2
    assert fmt(make_fn({"a": 1})) == "[a |-> 1]"
    assert fmt(frozenset({"b", "a"})) == '{"a", "b"}'
    assert fmt(make_fn({2: 1})) == "(2 :> 1)"


def test_primed_variables_read_the_next_state(mod):
    assert ev(mod, "x' - x", next_state={"x": 5, "q": ()}) == 4
    assert ev(mod, "UNCHANGED q", next_state={"x": 5, "q": (1, 2, 4)}) is True
    assert ev(mod, "UNCHANGED <<x, q>>", next_state={"x": 5, "q": (1, 2, 4)}) is False


@pytest.mark.parametrize(
    "text, message, col",
    [
        ("[i \\in 1..2 |-> i][3]", "outside the domain", 19),
        ("Bad", "Head of the empty sequence", 8),
        ('1 + "a"', "+ expects integers", 3),
        ("{n \\in Nat : n < 3}", "cannot enumerate the infinite set Nat", 1),
        ("\\E s \\in Seq({1}) : TRUE", "cannot enumerate", 1),
        ("[a |-> 1].b", "no field b", 11),
        ("CHOOSE i \\in 1..3 : i > 5", "no element", 1),
        ("CASE 1 > 2 -> 1", "no CASE arm", 1),
        ("IF 1 THEN 2 ELSE 3", "IF expects a boolean", 1),
        ("1 \\div 0", "division by zero", 3),
        ("x'", "outside an action", 2),
    ],
)
def test_errors_have_positions(mod, text, message, col):
    with pytest.raises(TlaEvalError) as ei:
        ev(mod, text)
    assert message in str(ei.value)
    if text == "Bad":
        assert "Eval.tla:15:8:" in str(ei.value)
    else:
        assert f"<expr>:1:{col}:" in str(ei.value)


def test_unknown_identifier_is_reported(mod):
    with pytest.raises(TlaSyntaxError, match="unknown identifier Nope"):
        ev(mod, "Nope + 1")


def test_temporal_formulas_are_unsupported_only_when_evaluated(mod):
    with pytest.raises(UnsupportedConstruct, match=r"\[A\]_v"):
        ev(mod, "[x' = x]_x")
    with pytest.raises(UnsupportedConstruct, match="temporal operator"):
        ev(mod, "[][x' = x]_x")
    with pytest.raises(UnsupportedConstruct, match="ENABLED"):
        ev(mod, "ENABLED (x' = 1)")
    with pytest.raises(UnsupportedConstruct, match="unbounded quantifier"):
        ev(mod, "\\A i : i = i")
    # not evaluated: no error
    assert ev(mod, "IF TRUE THEN 1 ELSE WF_x(x' = 1)") == 1


def test_missing_constant_is_an_error_only_when_used(mod):
    assert mod.evaluate("1 + 1") == 2
    with pytest.raises(TlaEvalError, match="constant N has no value"):
        mod.evaluate("N + 1")
