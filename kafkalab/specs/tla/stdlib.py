"""Operators of the standard modules (Naturals, Integers, Sequences, FiniteSets, TLC,
Apalache) as plain Python functions over values.

Keeps ``BUILTIN_VALUES`` (zero-argument names: Nat, Int, BOOLEAN, STRING) and
``BUILTIN_OPS`` (name -> (arity, function)).  Invariants: functions take already
evaluated values, check their argument types, and raise ``TlaEvalError`` without a
location (the evaluator adds the call's location).  Operators that take an *operator*
argument (SelectSeq, MkSeq, ApaFoldSet, ApaFoldSeqLeft, SortSeq) are compiled by the
evaluator itself and are listed in ``OPERATOR_ARG_OPS``.  User definitions shadow these.
"""

from __future__ import annotations

import itertools
import sys

from .errors import TlaEvalError, UnsupportedConstruct
from .values import (
    INT,
    NAT,
    STRING,
    Fn,
    SeqSet,
    as_frozenset,
    cardinality,
    fmt,
    is_finite,
    is_set,
    make_fn,
    sorted_elems,
    type_name,
)

STANDARD_MODULES = frozenset(["Naturals", "Integers", "Sequences", "FiniteSets", "TLC", "Apalache"])

BUILTIN_VALUES = {
    "Nat": NAT,
    "Int": INT,
    "BOOLEAN": frozenset([False, True]),
    "STRING": STRING,
}


def _seq(v, op: str) -> tuple:
    if type(v) is tuple:
        return v
    raise TlaEvalError(f"{op} expects a sequence, found {type_name(v)} {fmt(v)}")


def _int(v, op: str) -> int:
    if type(v) is int:
        return v
    raise TlaEvalError(f"{op} expects an integer, found {type_name(v)} {fmt(v)}")


def _set(v, op: str):
    if is_set(v):
        return v
    raise TlaEvalError(f"{op} expects a set, found {type_name(v)} {fmt(v)}")


def op_len(s):
    return len(_seq(s, "Len"))


def op_append(s, x):
    return _seq(s, "Append") + (x,)


def op_head(s):
    s = _seq(s, "Head")
    if not s:
        raise TlaEvalError("Head of the empty sequence")
    return s[0]


def op_tail(s):
    s = _seq(s, "Tail")
    if not s:
        raise TlaEvalError("Tail of the empty sequence")
    return s[1:]


def op_subseq(s, m, n):
    s = _seq(s, "SubSeq")
    m = _int(m, "SubSeq")
    n = _int(n, "SubSeq")
    if m > n:
        return ()
    if m < 1 or n > len(s):
        raise TlaEvalError(f"SubSeq({fmt(s)}, {m}, {n}): indices outside 1..{len(s)}")
    return s[m - 1 : n]


def op_seq(S):
    return SeqSet(_set(S, "Seq"))


def op_cardinality(S):
    return cardinality(_set(S, "Cardinality"))


def op_is_finite_set(S):
    return is_finite(_set(S, "IsFiniteSet"))


def op_print(out, val):
    print(fmt(out), file=sys.stderr)
    return val


def op_printt(out):
    print(fmt(out), file=sys.stderr)
    return True


def op_assert(cond, msg):
    if cond is True:
        return True
    if cond is False:
        raise TlaEvalError(f"Assert failed: {msg if isinstance(msg, str) else fmt(msg)}")
    raise TlaEvalError(f"Assert expects a boolean, found {fmt(cond)}")


def op_tostring(v):
    return fmt(v)


def op_permutations(S):
    elems = sorted_elems(as_frozenset(_set(S, "Permutations")))
    out = set()
    for p in itertools.permutations(elems):
        out.add(make_fn(dict(zip(elems, p, strict=True))))
    return frozenset(out)


def op_identity(v):
    return v


def op_guess(S):
    elems = sorted_elems(as_frozenset(_set(S, "Guess")))
    if not elems:
        raise TlaEvalError("Guess of the empty set")
    return elems[0]


def op_fun_as_seq(f, n, _cap):
    n = _int(n, "FunAsSeq")
    if type(f) is tuple:
        if n > len(f):
            raise TlaEvalError(f"FunAsSeq: length {n} exceeds the domain of {fmt(f)}")
        return f[:n]
    if type(f) is Fn:
        try:
            return tuple(f.d[i] for i in range(1, n + 1))
        except KeyError:
            raise TlaEvalError(f"FunAsSeq: {fmt(f)} is not defined on 1..{n}") from None
    raise TlaEvalError(f"FunAsSeq expects a function, found {fmt(f)}")


def op_set_as_fun(S):
    d = {}
    for pair in as_frozenset(_set(S, "SetAsFun")):
        if type(pair) is not tuple or len(pair) != 2:
            raise TlaEvalError(f"SetAsFun expects a set of pairs, found {fmt(pair)}")
        d[pair[0]] = pair[1]
    return make_fn(d)


def _unsupported(name):
    def f(*_args):
        raise UnsupportedConstruct(f"the operator {name} is not supported by this checker")

    return f


BUILTIN_OPS = {
    "Len": (1, op_len),
    "Append": (2, op_append),
    "Head": (1, op_head),
    "Tail": (1, op_tail),
    "SubSeq": (3, op_subseq),
    "Seq": (1, op_seq),
    "Cardinality": (1, op_cardinality),
    "IsFiniteSet": (1, op_is_finite_set),
    "Print": (2, op_print),
    "PrintT": (1, op_printt),
    "Assert": (2, op_assert),
    "ToString": (1, op_tostring),
    "Permutations": (1, op_permutations),
    "Skolem": (1, op_identity),
    "Expand": (1, op_identity),
    "ConstCardinality": (1, op_identity),
    "Guess": (1, op_guess),
    "FunAsSeq": (3, op_fun_as_seq),
    "SetAsFun": (1, op_set_as_fun),
    "TLCGet": (1, _unsupported("TLCGet")),
    "TLCSet": (2, _unsupported("TLCSet")),
    "RandomElement": (1, _unsupported("RandomElement")),
    "JavaTime": (0, _unsupported("JavaTime")),
    "Gen": (1, _unsupported("Gen")),
}

# name -> (arity, index of the operator argument, arity of that operator)
OPERATOR_ARG_OPS = {
    "SelectSeq": (2, 1, 1),
    "MkSeq": (2, 1, 1),
    "SortSeq": (2, 1, 2),
    "ApaFoldSet": (3, 0, 2),
    "ApaFoldSeqLeft": (3, 0, 2),
}
