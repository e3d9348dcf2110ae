"""TLA+ values as Python values.

Keeps the value representation and the operations every other module shares:

* ``int``, ``bool``, ``str`` stand for themselves; finite sets are ``frozenset``;
* a function whose domain is ``1..n`` (a sequence, a tuple; ``n`` may be 0) is *always* a
  Python ``tuple`` - ``make_fn`` normalizes, so ``[i \\in 1..2 |-> i] = <<1, 2>>`` is
  Python equality and ``<<>>`` equals every function with an empty domain;
* every other function (records included: a record is a function on strings) is an
  ``Fn``, an immutable, hashable mapping;
* sets that are infinite or better not enumerated (``Nat``, ``Int``, ``STRING``,
  ``Seq(S)``, ``[S -> T]``, ``SUBSET S``, ``[a : S]``) are ``LazySet`` objects that answer
  membership and enumerate only when finite.

Invariant: for all values built through this module, Python ``==``/``hash`` are TLA+
equality, so states (tuples of values) can be deduplicated in a dict.  (A spec that mixes
booleans and integers in one place is ill-typed; Python would equate ``TRUE`` and ``1``.
So a cache shared by evaluations - ``sorted_elems``, ``Module.instance`` - must not key
by Python equality alone: {0, 1} and BOOLEAN are one dict key.)
``sort_key`` gives the deterministic total order used for printing, CHOOSE and for the
order in which the checker branches over sets.
"""

from __future__ import annotations

import itertools

from .errors import TlaEvalError


class Fn:
    """A TLA+ function that is not a sequence; ``d`` maps argument -> value."""

    __slots__ = ("d", "_h", "_b")

    def __init__(self, d: dict):
        self.d = d
        self._h = None
        self._b = None  # whether a boolean is in it (see _has_bool), once known

    def __hash__(self) -> int:
        h = self._h
        if h is None:
            h = self._h = hash(frozenset(self.d.items())) ^ 0x5F3759DF
        return h

    def __eq__(self, other) -> bool:
        return self is other or (type(other) is Fn and self.d == other.d)

    def __ne__(self, other) -> bool:
        return not self.__eq__(other)

    def __repr__(self) -> str:
        return fmt(self)

    def is_record(self) -> bool:
        return all(type(k) is str for k in self.d)


def make_fn(d: dict):
    """The value of the function ``d`` (argument -> value), normalized: a tuple when the
    domain is ``1..n`` (including the empty domain), else an ``Fn``."""
    n = len(d)
    if n == 0:
        return ()
    for k in d:
        if type(k) is not int:
            return Fn(d)
        break
    if all(type(k) is int and 1 <= k <= n for k in d):
        return tuple(d[i] for i in range(1, n + 1))
    return Fn(d)


def is_fn(v) -> bool:
    return type(v) is tuple or type(v) is Fn


def domain(f) -> frozenset:
    if type(f) is tuple:
        return frozenset(range(1, len(f) + 1))
    if type(f) is Fn:
        return frozenset(f.d)
    raise TypeError


# -- lazy sets ---------------------------------------------------------------------------
class LazySet:
    """A set given by a membership test; ``materialize`` enumerates it when finite."""

    __slots__ = ()
    name = "set"

    def contains(self, v) -> bool:  # pragma: no cover - abstract
        raise NotImplementedError

    def __contains__(self, v) -> bool:
        return self.contains(v)

    def finite(self) -> bool:
        return False

    def materialize(self) -> frozenset:
        raise TlaEvalError(f"cannot enumerate the infinite set {self.name}")

    def cardinality(self) -> int:
        return len(self.materialize())

    def __eq__(self, other) -> bool:
        if self is other:
            return True
        if isinstance(other, LazySet) and type(other) is type(self) and self.key() == other.key():
            return True
        if isinstance(other, (frozenset, LazySet)):
            return as_frozenset(self) == as_frozenset(other)
        return False

    def __hash__(self) -> int:
        return hash(self.materialize())

    def key(self):
        return id(self)

    def __repr__(self) -> str:
        return self.name


class _Nat(LazySet):
    __slots__ = ()
    name = "Nat"

    def contains(self, v) -> bool:
        return type(v) is int and v >= 0

    def key(self):
        return "Nat"


class _Int(LazySet):
    __slots__ = ()
    name = "Int"

    def contains(self, v) -> bool:
        return type(v) is int

    def key(self):
        return "Int"


class _String(LazySet):
    __slots__ = ()
    name = "STRING"

    def contains(self, v) -> bool:
        return type(v) is str

    def key(self):
        return "STRING"


NAT = _Nat()
INT = _Int()
STRING = _String()


class SeqSet(LazySet):
    """``Seq(S)``: all finite sequences over ``S``."""

    __slots__ = ("base",)

    def __init__(self, base):
        self.base = base

    @property
    def name(self) -> str:
        return f"Seq({fmt(self.base)})"

    def contains(self, v) -> bool:
        return type(v) is tuple and all(member(x, self.base) for x in v)

    def key(self):
        return ("Seq", self.base)


class FunSet(LazySet):
    """``[D -> C]``."""

    __slots__ = ("dom", "cod")

    def __init__(self, dom, cod):
        self.dom = dom
        self.cod = cod

    @property
    def name(self) -> str:
        return f"[{fmt(self.dom)} -> {fmt(self.cod)}]"

    def contains(self, v) -> bool:
        if type(v) is tuple:
            if len(v) != len(self.dom) or domain(v) != as_frozenset(self.dom):
                return False
            return all(member(x, self.cod) for x in v)
        if type(v) is Fn:
            if v.d.keys() != as_frozenset(self.dom):
                return False
            return all(member(x, self.cod) for x in v.d.values())
        return False

    def finite(self) -> bool:
        return is_finite(self.dom) and is_finite(self.cod)

    def materialize(self) -> frozenset:
        dom = sorted_elems(as_frozenset(self.dom))
        cod = sorted_elems(as_frozenset(self.cod))
        return frozenset(
            make_fn(dict(zip(dom, combo, strict=True)))
            for combo in itertools.product(cod, repeat=len(dom))
        )

    def cardinality(self) -> int:
        return cardinality(self.cod) ** cardinality(self.dom)

    def key(self):
        return ("Fun", self.dom, self.cod)


class PowerSet(LazySet):
    """``SUBSET S``."""

    __slots__ = ("base",)

    def __init__(self, base):
        self.base = base

    @property
    def name(self) -> str:
        return f"SUBSET {fmt(self.base)}"

    def contains(self, v) -> bool:
        if type(v) is frozenset:
            return all(member(x, self.base) for x in v)
        if isinstance(v, LazySet):
            return all(member(x, self.base) for x in v.materialize())
        return False

    def finite(self) -> bool:
        return is_finite(self.base)

    def materialize(self) -> frozenset:
        elems = sorted_elems(as_frozenset(self.base))
        return frozenset(
            frozenset(c) for r in range(len(elems) + 1) for c in itertools.combinations(elems, r)
        )

    def cardinality(self) -> int:
        return 2 ** cardinality(self.base)

    def key(self):
        return ("Subset", self.base)


class RecordSet(LazySet):
    """``[a : S, b : T]``; ``fields`` maps field name -> set."""

    __slots__ = ("fields",)

    def __init__(self, fields: dict):
        self.fields = fields

    @property
    def name(self) -> str:
        return "[" + ", ".join(f"{k} : {fmt(v)}" for k, v in self.fields.items()) + "]"

    def contains(self, v) -> bool:
        if type(v) is not Fn or v.d.keys() != self.fields.keys():
            return False
        return all(member(v.d[k], s) for k, s in self.fields.items())

    def finite(self) -> bool:
        return all(is_finite(s) for s in self.fields.values())

    def materialize(self) -> frozenset:
        names = list(self.fields)
        sets = [sorted_elems(as_frozenset(self.fields[k])) for k in names]
        return frozenset(
            make_fn(dict(zip(names, combo, strict=True))) for combo in itertools.product(*sets)
        )

    def cardinality(self) -> int:
        c = 1
        for s in self.fields.values():
            c *= cardinality(s)
        return c

    def key(self):
        return ("Rec", tuple(sorted(self.fields.items(), key=lambda kv: kv[0])))


# -- set helpers ---------------------------------------------------------------------
def is_set(v) -> bool:
    return type(v) is frozenset or isinstance(v, LazySet)


def is_finite(s) -> bool:
    if type(s) is frozenset:
        return True
    if isinstance(s, LazySet):
        return s.finite()
    raise TlaEvalError(f"expected a set, found {fmt(s)}")


def as_frozenset(s) -> frozenset:
    """The elements of a finite set; raises TlaEvalError for an infinite set or a non-set."""
    if type(s) is frozenset:
        return s
    if isinstance(s, LazySet):
        if not s.finite():
            raise TlaEvalError(f"cannot enumerate the infinite set {s.name}")
        return s.materialize()
    raise TlaEvalError(f"expected a set, found {type_name(s)} {fmt(s)}")


def member(x, s) -> bool:
    if type(s) is frozenset:
        return x in s
    if isinstance(s, LazySet):
        return s.contains(x)
    raise TlaEvalError(f"\\in expects a set on its right, found {type_name(s)} {fmt(s)}")


def cardinality(s) -> int:
    if type(s) is frozenset:
        return len(s)
    if isinstance(s, LazySet):
        if not s.finite():
            raise TlaEvalError(f"Cardinality of the infinite set {s.name}")
        return s.cardinality()
    raise TlaEvalError(f"Cardinality expects a set, found {fmt(s)}")


def _has_bool(v) -> bool:
    """Whether ``v`` contains a boolean (or a lazy set, which may) at any depth."""
    t = type(v)
    if t is tuple or t is frozenset:
        for x in v:
            tx = type(x)
            if tx is int or tx is str:
                continue
            if tx is Fn:
                b = x._b
                if b is None:
                    b = _has_bool(x)
                if b:
                    return True
            elif tx is bool or _has_bool(x):
                return True
        return False
    if t is Fn:
        b = v._b
        if b is None:
            b = v._b = _has_bool(tuple(v.d)) or _has_bool(tuple(v.d.values()))
        return b
    return not (t is int or t is str)  # bool, LazySet: True


def _has_01(v) -> bool:
    """Whether ``v`` contains the integer 0 or 1 (or a lazy set) at any depth."""
    t = type(v)
    if t is int:
        return v == 0 or v == 1
    if t is str:
        return False
    if t is tuple or t is frozenset:
        return any(_has_01(x) for x in v)
    if t is Fn:
        return any(_has_01(k) or _has_01(x) for k, x in v.d.items())
    return True


# set -> (its elements in canonical order, whether the set has a 0 or 1 in it).  Python
# equates FALSE/TRUE with 0/1 (also inside tuples, sets and functions), so a set keyed
# here must not be confused with one that has booleans where it has 0 or 1: only sets
# without booleans are stored, and a hit on a set with 0 or 1 in it is only taken by a
# set without booleans.  (Else ``\E b \in BOOLEAN`` after sorting {0, 1} anywhere in
# the process would bind b to 0 and 1.)
_SORTED: dict = {}


def sorted_elems(s) -> list:
    """The elements of a finite set in canonical order (cached per set value)."""
    if type(s) is not frozenset:
        s = as_frozenset(s)
    hit = _SORTED.get(s)
    if hit is not None and (not hit[1] or not _has_bool(s)):
        return hit[0]
    r = sorted(s, key=sort_key)
    if hit is None and not _has_bool(s):
        if len(_SORTED) > 50_000:
            _SORTED.clear()
        _SORTED[s] = (r, _has_01(s))
    return r


# -- order, names, printing ------------------------------------------------------------
def sort_key(v):
    t = type(v)
    if t is int:
        return (1, v)
    if t is str:
        return (2, v)
    if t is bool:
        return (0, v)
    if t is tuple:
        return (3, len(v), tuple(sort_key(x) for x in v))
    if t is Fn:
        return (4, tuple(sorted((sort_key(k), sort_key(x)) for k, x in v.d.items())))
    if t is frozenset:
        return (5, len(v), tuple(sorted(sort_key(x) for x in v)))
    if isinstance(v, LazySet):
        return (6, repr(v))
    return (7, repr(v))


def type_name(v) -> str:
    t = type(v)
    if t is bool:
        return "boolean"
    if t is int:
        return "integer"
    if t is str:
        return "string"
    if t is tuple:
        return "sequence"
    if t is Fn:
        return "record" if v.d and v.is_record() else "function"
    if t is frozenset or isinstance(v, LazySet):
        return "set"
    return t.__name__


def fmt(v) -> str:
    """TLA+ text of a value (sets in canonical order)."""
    t = type(v)
    if t is bool:
        return "TRUE" if v else "FALSE"
    if t is int:
        return str(v)
    if t is str:
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    if t is tuple:
        return "<<" + ", ".join(fmt(x) for x in v) + ">>"
    if t is frozenset:
        return "{" + ", ".join(fmt(x) for x in sorted_elems(v)) + "}"
    if t is Fn:
        keys = sorted(v.d, key=sort_key)
        if v.is_record():
            return "[" + ", ".join(f"{k} |-> {fmt(v.d[k])}" for k in keys) + "]"
        return "(" + " @@ ".join(f"{fmt(k)} :> {fmt(v.d[k])}" for k in keys) + ")"
    if isinstance(v, LazySet):
        return v.name
    return repr(v)


def from_python(v):
    """Convert plain Python data (lists, sets, dicts) into TLA+ values: list -> tuple,
    set -> frozenset, dict -> function (normalized)."""
    if isinstance(v, bool | int | str):
        return v
    if isinstance(v, tuple | list):
        return tuple(from_python(x) for x in v)
    if isinstance(v, frozenset | set):
        return frozenset(from_python(x) for x in v)
    if isinstance(v, dict):
        return make_fn({from_python(k): from_python(x) for k, x in v.items()})
    if isinstance(v, Fn | LazySet):
        return v
    raise TypeError(f"cannot convert {v!r} to a TLA+ value")
