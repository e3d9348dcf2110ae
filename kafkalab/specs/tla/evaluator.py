"""Compiler from expression ASTs to Python closures, and the compile environment.

Keeps ``Instance`` (a module with its CONSTANTS fixed: what names mean) and ``Compiler``
(turns a ``Node`` into a closure ``fn(s, n, e)``).  A closure's arguments are:

* ``s`` - the current state, a tuple of values in variable order (``UNSET`` marks a
  variable not assigned yet, as inside Init);
* ``n`` - the next state being built by an action (a tuple with ``UNSET`` holes), or
  ``None`` outside actions; primed variables read it;
* ``e`` - the environment of bound names, a tuple indexed by positions that are fixed at
  compile time (quantifier and function variables, operator parameters, LET cells).

Invariants:

* Names are resolved once, at compile time: bound name > LET definition > module
  definition > constant > variable > standard-module operator.
* ``mode`` decides what an unprimed variable means: ``value`` (read ``s``), ``init``
  (read ``s``, which is then Init's partial state) or ``primed`` (read ``n``: the body of
  ``e'`` for a non-variable ``e``).
* Every compiled node also carries whether it reads the state (``st``), the next state
  (``pr``) and the lowest environment slot it reads (``mr``); a node that reads none of
  them from outside itself is *constant* and is evaluated at most once (lazily: an
  expression that fails is only an error when it is evaluated).
* Evaluation errors are ``TlaEvalError`` with the location of the failing construct.
"""

from __future__ import annotations

import functools
import itertools

from . import nodes as N
from .errors import TlaEvalError, TlaSyntaxError, UnsupportedConstruct
from .stdlib import BUILTIN_OPS, BUILTIN_VALUES, OPERATOR_ARG_OPS
from .values import (
    Fn,
    FunSet,
    LazySet,
    PowerSet,
    RecordSet,
    as_frozenset,
    fmt,
    is_fn,
    is_set,
    make_fn,
    member,
    sorted_elems,
    type_name,
)

INF = 1 << 30


class _Unset:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<unassigned>"


UNSET = _Unset()
_NOT_YET = _Unset()


def located(ex: TlaEvalError, loc) -> TlaEvalError:
    """Give ``ex`` the location ``loc`` unless it already has one."""
    if ex.loc is None:
        ex.loc = loc
        ex.args = (ex._render(),)
    return ex


def _bad(loc, what: str, v) -> TlaEvalError:
    return TlaEvalError(f"{what}, found {type_name(v)} {fmt(v)}", loc)


def _enum(S, loc):
    if type(S) is frozenset:
        return S
    try:
        return as_frozenset(S)
    except TlaEvalError as ex:
        raise located(ex, loc) from None


def _member(x, S, loc) -> bool:
    try:
        return member(x, S)
    except TlaEvalError as ex:
        raise located(ex, loc) from None


class C:
    """A compiled expression: the closure and what it depends on."""

    __slots__ = ("fn", "st", "pr", "mr", "lit")

    def __init__(self, fn, st=False, pr=False, mr=INF, lit=False):
        self.fn = fn
        self.st = st
        self.pr = pr
        self.mr = mr
        self.lit = lit


def _lit(v) -> C:
    return C(lambda s, n, e: v, lit=True)


def _memo(fn):
    cell = []

    def f(s, n, e):
        if cell:
            return cell[0]
        v = fn(s, n, e)
        cell.append(v)
        return v

    return f


def _join(fn, *parts, st=False, pr=False, mr=INF) -> C:
    for p in parts:
        st = st or p.st
        pr = pr or p.pr
        if p.mr < mr:
            mr = p.mr
    return C(fn, st, pr, mr)


class LetOp:
    """A LET definition: compiled at ``depth`` (its parameters follow), in ``scope``."""

    __slots__ = ("d", "scope", "depth", "codes", "acts")

    def __init__(self, d: N.OpDef, scope: Scope):
        self.d = d
        self.scope = scope
        self.depth = scope.depth
        self.codes: dict = {}
        self.acts: dict = {}


class Scope:
    """Compile-time lexical scope: name -> entry, and the env depth at this point.
    Entries: ("bound", slot), ("cell", slot, LetOp), ("op", LetOp), ("const", C)."""

    __slots__ = ("names", "depth", "parent")

    def __init__(self, names: dict, depth: int, parent: Scope | None):
        self.names = names
        self.depth = depth
        self.parent = parent

    def lookup(self, name: str):
        sc = self
        while sc is not None:
            ent = sc.names.get(name)
            if ent is not None:
                return ent
            sc = sc.parent
        return None

    def bind(self, names) -> Scope:
        d = self.depth
        return Scope({nm: ("bound", d + i) for i, nm in enumerate(names)}, d + len(names), self)

    def with_entry(self, name: str, entry, slots: int = 0) -> Scope:
        return Scope({name: entry}, self.depth + slots, self)


ROOT = Scope({}, 0, None)


def pattern_names(pat) -> list[str]:
    return [pat] if isinstance(pat, str) else list(pat)


class _Steps(list):
    """Compiled binders: a list of (C of set, pattern), plus ``independent``."""

    independent = False


_NAMES_CACHE: dict[int, tuple[N.Node, frozenset]] = {}


def names_in(node) -> frozenset:
    """Every identifier mentioned in ``node`` (a syntactic over-approximation)."""
    hit = _NAMES_CACHE.get(id(node))
    if hit is not None and hit[0] is node:
        return hit[1]
    out: set[str] = set()
    stack = [node]
    while stack:
        x = stack.pop()
        if isinstance(x, N.Name):
            out.add(x.name)
        if isinstance(x, N.Node | N.OpDef):
            for slot in x.__dataclass_fields__:
                stack.append(getattr(x, slot, None))
        elif isinstance(x, list | tuple):
            stack.extend(x)
    res = frozenset(out)
    _NAMES_CACHE[id(node)] = (node, res)
    return res


class Instance:
    """A module with its constants fixed: the meaning of every top-level name.

    ``var_names`` are the names whose values live in the state tuple (the module's
    VARIABLES; or its CONSTANTS while a ConstInit predicate is being solved)."""

    def __init__(self, module, consts: dict, var_names: list[str]):
        self.module = module
        self.defs = module.definitions
        self.consts = dict(consts)
        self.declared = set(module.constants)
        self.var_names = list(var_names)
        self.var_index = {v: i for i, v in enumerate(self.var_names)}
        self._compilers: dict = {}
        self._actions: dict = {}

    def compiler(self, mode: str) -> Compiler:
        c = self._compilers.get(mode)
        if c is None:
            c = self._compilers[mode] = Compiler(self, mode)
        return c

    def actions(self, init: bool):
        from .actions import ActionCompiler

        a = self._actions.get(init)
        if a is None:
            a = self._actions[init] = ActionCompiler(self, init)
        return a

    def blank(self) -> tuple:
        return (UNSET,) * len(self.var_names)


class Compiler:
    """Compiles expressions for one ``Instance`` in one mode (value, init or primed)."""

    def __init__(self, inst: Instance, mode: str):
        self.inst = inst
        self.mode = mode
        self.defcache: dict[str, C] = {}
        self.busy: set[str] = set()
        self.dispatch = {
            N.Num: self.c_lit,
            N.Str: self.c_lit,
            N.Bool: self.c_lit,
            N.Name: self.c_name,
            N.At: self.c_at,
            N.Prime: self.c_prime,
            N.Unary: self.c_unary,
            N.Binary: self.c_binary,
            N.Junction: self.c_junction,
            N.Product: self.c_product,
            N.Quant: self.c_quant,
            N.Choose: self.c_choose,
            N.SetEnum: self.c_setenum,
            N.SetFilter: self.c_setfilter,
            N.SetMap: self.c_setmap,
            N.FnCons: self.c_fncons,
            N.FnApp: self.c_fnapp,
            N.FnSet: self.c_fnset,
            N.Except: self.c_except,
            N.RecordCons: self.c_record,
            N.RecordSet: self.c_recordset,
            N.Dot: self.c_dot,
            N.Tuple: self.c_tuple,
            N.If: self.c_if,
            N.Case: self.c_case,
            N.Let: self.c_let,
            N.Unchanged: self.c_unchanged,
            N.Lambda: self.c_lambda,
            N.Temporal: self.c_temporal,
            N.Unsupported: self.c_unsupported,
        }

    # -- entry points -----------------------------------------------------------------
    def comp(self, node: N.Node, sc: Scope) -> C:
        c = self.dispatch[type(node)](node, sc)
        if not (c.st or c.pr or c.lit) and c.mr >= sc.depth:
            return C(_memo(c.fn), False, False, INF)
        return c

    def def_code(self, d: N.OpDef) -> C:
        """The body of a module-level definition, compiled at depth len(params)."""
        c = self.defcache.get(d.name)
        if c is None:
            if d.name in self.busy:
                raise UnsupportedConstruct(
                    f"recursive definition of {d.name} (RECURSIVE and recursive functions "
                    "are not supported)",
                    d.loc,
                )
            self.busy.add(d.name)
            try:
                c = self.comp(d.body, ROOT.bind(d.params))
            finally:
                self.busy.discard(d.name)
            self.defcache[d.name] = c
        return c

    def letop_code(self, op: LetOp) -> C:
        c = op.codes.get(self.mode)
        if c is None:
            key = ("let", id(op))
            if key in self.busy:
                raise UnsupportedConstruct(f"recursive definition of {op.d.name}", op.d.loc)
            self.busy.add(key)
            try:
                c = self.comp(op.d.body, op.scope.bind(op.d.params))
            finally:
                self.busy.discard(key)
            op.codes[self.mode] = c
        return c

    def resolve(self, name: str, sc: Scope, loc):
        """What ``name`` means here: a scope entry, ("def", OpDef), ("var", slot),
        ("constant", value), ("builtin", value), ("builtin_op", (arity, fn)),
        ("oparg_op", spec), or ("missing_constant", name)."""
        ent = sc.lookup(name)
        if ent is not None:
            return ent
        inst = self.inst
        d = inst.defs.get(name)
        if d is not None:
            return ("def", d)
        if name in inst.var_index:
            return ("var", inst.var_index[name])
        if name in inst.consts:
            return ("constant", inst.consts[name])
        if name in inst.declared:
            return ("missing_constant", name)
        if name in BUILTIN_VALUES:
            return ("builtin", BUILTIN_VALUES[name])
        if name in BUILTIN_OPS:
            return ("builtin_op", BUILTIN_OPS[name])
        if name in OPERATOR_ARG_OPS:
            return ("oparg_op", OPERATOR_ARG_OPS[name])
        if name in self.inst.module.variables:
            raise TlaEvalError(f"the variable {name} cannot be used here", loc)
        raise TlaSyntaxError(f"unknown identifier {name}", loc)

    # -- names --------------------------------------------------------------------------
    def c_lit(self, node, sc) -> C:
        return _lit(node.value)

    def c_at(self, node, sc) -> C:
        ent = sc.lookup("@")
        if ent is None:
            raise TlaSyntaxError("@ outside an EXCEPT value", node.loc)
        i = ent[1]
        return C(lambda s, n, e: e[i], mr=i)

    def var_ref(self, i: int, name: str, loc, primed: bool) -> C:
        if primed:

            def f(s, n, e):
                try:
                    v = n[i]
                except TypeError:
                    raise TlaEvalError(f"{name}' used outside an action", loc) from None
                if v is UNSET:
                    raise TlaEvalError(f"{name}' is read before it is assigned", loc)
                return v

            return C(f, pr=True)
        what = "read before Init assigns it" if self.mode == "init" else "has no value"

        def g(s, n, e):
            v = s[i]
            if v is UNSET:
                raise TlaEvalError(f"the variable {name} {what}", loc)
            return v

        return C(g, st=True)

    def c_name(self, node: N.Name, sc) -> C:
        name, loc, args = node.name, node.loc, node.args
        ent = self.resolve(name, sc, loc)
        kind = ent[0]
        nargs = 0 if args is None else len(args)
        if kind in ("def", "op", "builtin_op", "oparg_op"):
            return self.c_call(node, sc, ent)
        if nargs:
            raise TlaSyntaxError(f"{name} is not an operator and takes no arguments", loc)
        if kind == "bound":
            i = ent[1]
            return C(lambda s, n, e: e[i], mr=i)
        if kind == "cell":
            i, op = ent[1], ent[2]
            body = self.letop_code(op).fn

            def cell(s, n, e):
                c = e[i]
                v = c[0]
                if v is _NOT_YET:
                    v = c[0] = body(s, n, e[:i])
                return v

            return C(cell, st=True, mr=i)
        if kind == "const":
            return ent[1]
        if kind == "var":
            return self.var_ref(ent[1], name, loc, self.mode == "primed")
        if kind in ("constant", "builtin"):
            return _lit(ent[1])
        if kind == "missing_constant":

            def missing(s, n, e):
                raise TlaEvalError(
                    f"the constant {name} has no value (fix it with cinit= or constants=)", loc
                )

            return C(missing, st=True)
        raise TlaSyntaxError(f"cannot use {name} here", loc)

    def c_call(self, node: N.Name, sc, ent) -> C:
        name, loc = node.name, node.loc
        args = node.args or []
        kind = ent[0]
        if kind == "oparg_op":
            return self.c_oparg_call(node, sc, ent[1])
        if kind == "builtin_op":
            arity, impl = ent[1]
            if len(args) != arity:
                raise TlaSyntaxError(f"{name} takes {arity} argument(s), given {len(args)}", loc)
            cs = [self.comp(a, sc) for a in args]
            fs = [c.fn for c in cs]

            def bcall(s, n, e):
                vals = [f(s, n, e) for f in fs]
                try:
                    return impl(*vals)
                except TlaEvalError as ex:
                    raise located(ex, loc) from None

            return _join(bcall, *cs)
        if kind == "def":
            d = ent[1]
            params = d.params
            depth0 = None
        else:
            op = ent[1]
            d = op.d
            params = d.params
            depth0 = op.depth
        if len(args) != len(params):
            raise TlaSyntaxError(f"{name} takes {len(params)} argument(s), given {len(args)}", loc)
        body = self.def_code(d) if kind == "def" else self.letop_code(op)
        bf = body.fn
        cs = [self.comp(a, sc) for a in args]
        fs = [c.fn for c in cs]
        st, pr = body.st, body.pr
        mr = INF
        if depth0 is not None and body.mr < depth0:
            mr = body.mr
        if kind == "def":
            if not fs:
                if sc.depth == 0:
                    return C(bf, st, pr, INF)
                return C(lambda s, n, e: bf(s, n, ()), st, pr, INF)
            if len(fs) == 1:
                (a0,) = fs
                fn = lambda s, n, e: bf(s, n, (a0(s, n, e),))  # noqa: E731
            elif len(fs) == 2:
                a0, a1 = fs
                fn = lambda s, n, e: bf(s, n, (a0(s, n, e), a1(s, n, e)))  # noqa: E731
            else:
                fn = lambda s, n, e: bf(s, n, tuple([f(s, n, e) for f in fs]))  # noqa: E731
            return _join(fn, *cs, st=st, pr=pr)
        dl = depth0
        if not fs:
            if sc.depth == dl:
                return C(bf, st, pr, mr)
            return C(lambda s, n, e: bf(s, n, e[:dl]), st, pr, mr)

        def lcall(s, n, e):
            return bf(s, n, e[:dl] + tuple([f(s, n, e) for f in fs]))

        return _join(lcall, *cs, st=st, pr=pr, mr=mr)

    def opref(self, node: N.Node, sc: Scope, arity: int):
        """An operator passed as an argument: returns (call(s, n, e, args), C-flags)."""
        if isinstance(node, N.Lambda):
            if len(node.params) != arity:
                raise TlaSyntaxError(f"expected a LAMBDA of {arity} parameter(s)", node.loc)
            body = self.comp(node.body, sc.bind(node.params))
            bf = body.fn
            flags = C(None, body.st, body.pr, body.mr if body.mr < sc.depth else INF)
            return (lambda s, n, e, args: bf(s, n, e + args)), flags
        if isinstance(node, N.Name) and node.args is None:
            ent = self.resolve(node.name, sc, node.loc)
            if ent[0] == "def" and len(ent[1].params) == arity:
                body = self.def_code(ent[1])
                bf = body.fn
                return (lambda s, n, e, args: bf(s, n, args)), C(None, body.st, body.pr)
            if ent[0] == "op" and len(ent[1].d.params) == arity:
                op = ent[1]
                body = self.letop_code(op)
                bf = body.fn
                dl = op.depth
                mr = body.mr if body.mr < dl else INF
                return (lambda s, n, e, args: bf(s, n, e[:dl] + args)), C(
                    None, body.st, body.pr, mr
                )
            if ent[0] == "builtin_op" and ent[1][0] == arity:
                impl = ent[1][1]
                return (lambda s, n, e, args: impl(*args)), C(None)
        raise UnsupportedConstruct(
            f"an operator argument must be the name of an operator of {arity} parameter(s) "
            "or a LAMBDA",
            node.loc,
        )

    def c_oparg_call(self, node: N.Name, sc, spec) -> C:
        name, loc = node.name, node.loc
        arity, opidx, oparity = spec
        args = node.args or []
        if len(args) != arity:
            raise TlaSyntaxError(f"{name} takes {arity} argument(s), given {len(args)}", loc)
        call, flags = self.opref(args[opidx], sc, oparity)
        cs = [self.comp(a, sc) for i, a in enumerate(args) if i != opidx]
        fs = [c.fn for c in cs]

        def truth(v):
            if v is True or v is False:
                return v
            raise _bad(loc, f"the operator given to {name} must return a boolean", v)

        def f(s, n, e):
            vals = [g(s, n, e) for g in fs]
            try:
                if name == "SelectSeq":
                    seq = vals[0]
                    if type(seq) is not tuple:
                        raise _bad(loc, "SelectSeq expects a sequence", seq)
                    return tuple(x for x in seq if truth(call(s, n, e, (x,))))
                if name == "MkSeq":
                    k = vals[0]
                    if type(k) is not int:
                        raise _bad(loc, "MkSeq expects an integer length", k)
                    return tuple(call(s, n, e, (i,)) for i in range(1, k + 1))
                if name == "SortSeq":
                    seq = vals[0]
                    if type(seq) is not tuple:
                        raise _bad(loc, "SortSeq expects a sequence", seq)

                    def cmp(a, b):
                        if truth(call(s, n, e, (a, b))):
                            return -1
                        if truth(call(s, n, e, (b, a))):
                            return 1
                        return 0

                    return tuple(sorted(seq, key=functools.cmp_to_key(cmp)))
                acc, coll = vals
                if name == "ApaFoldSet":
                    items = sorted_elems(_enum(coll, loc))
                else:
                    if type(coll) is not tuple:
                        raise _bad(loc, "ApaFoldSeqLeft expects a sequence", coll)
                    items = coll
                for x in items:
                    acc = call(s, n, e, (acc, x))
                return acc
            except TlaEvalError as ex:
                raise located(ex, loc) from None

        return _join(f, flags, *cs)

    # -- primes ---------------------------------------------------------------------------
    def c_prime(self, node: N.Prime, sc) -> C:
        if self.mode == "primed":
            raise TlaEvalError("a primed expression inside a primed expression", node.loc)
        inner = node.expr
        if isinstance(inner, N.Name) and inner.args is None:
            ent = self.resolve(inner.name, sc, inner.loc)
            if ent[0] == "var":
                if self.mode == "init":

                    def f(s, n, e):
                        raise TlaEvalError(f"{inner.name}' in an initial predicate", node.loc)

                    return C(f, pr=True)
                return self.var_ref(ent[1], inner.name, node.loc, True)
        c = self.inst.compiler("primed").comp(inner, sc)
        return C(c.fn, False, True, c.mr)

    def c_unchanged(self, node: N.Unchanged, sc) -> C:
        now = self.comp(node.expr, sc)
        nxt = self.c_prime(N.Prime(node.expr, node.loc), sc)
        a, b = now.fn, nxt.fn
        return _join(lambda s, n, e: a(s, n, e) == b(s, n, e), now, nxt, pr=True)

    # -- operators ------------------------------------------------------------------------
    def c_unary(self, node: N.Unary, sc) -> C:
        c = self.comp(node.expr, sc)
        a, op, loc = c.fn, node.op, node.loc
        if op == "~":

            def f(s, n, e):
                v = a(s, n, e)
                if v is True:
                    return False
                if v is False:
                    return True
                raise _bad(loc, "~ expects a boolean", v)

        elif op == "-":

            def f(s, n, e):
                v = a(s, n, e)
                if type(v) is int:
                    return -v
                raise _bad(loc, "unary - expects an integer", v)

        elif op == "SUBSET":

            def f(s, n, e):
                v = a(s, n, e)
                if not is_set(v):
                    raise _bad(loc, "SUBSET expects a set", v)
                return PowerSet(v)

        elif op == "UNION":

            def f(s, n, e):
                out = set()
                for m in _enum(a(s, n, e), loc):
                    if not is_set(m):
                        raise _bad(loc, "UNION expects a set of sets", m)
                    out.update(_enum(m, loc))
                return frozenset(out)

        elif op == "DOMAIN":

            def f(s, n, e):
                v = a(s, n, e)
                if type(v) is tuple:
                    return frozenset(range(1, len(v) + 1))
                if type(v) is Fn:
                    return frozenset(v.d)
                raise _bad(loc, "DOMAIN expects a function", v)

        else:  # pragma: no cover - the parser produces no other prefix operator
            raise UnsupportedConstruct(f"prefix operator {op}", loc)
        return _join(f, c)

    def c_binary(self, node: N.Binary, sc) -> C:
        op, loc = node.op, node.loc
        ca = self.comp(node.left, sc)
        cb = self.comp(node.right, sc)
        a, b = ca.fn, cb.fn
        maker = _BINARY.get(op)
        if maker is None:
            raise UnsupportedConstruct(f"the operator {op}", loc)
        if op in ("=", ":=") and cb.lit:
            v = cb.fn(None, None, ())
            return _join(lambda s, n, e: a(s, n, e) == v, ca)
        return _join(maker(a, b, loc, op), ca, cb)

    def c_junction(self, node: N.Junction, sc) -> C:
        cs = [self.comp(x, sc) for x in node.items]
        fs = [c.fn for c in cs]
        loc = node.loc
        if node.op == "/\\":
            stop, other = False, True
        else:
            stop, other = True, False
        if len(fs) == 1:
            (a,) = fs

            def f1(s, n, e):
                v = a(s, n, e)
                if v is True or v is False:
                    return v
                raise _bad(loc, f"{node.op} expects booleans", v)

            return _join(f1, *cs)
        if len(fs) == 2:
            a, b = fs

            def f2(s, n, e):
                v = a(s, n, e)
                if v is stop:
                    return stop
                if v is not other:
                    raise _bad(loc, f"{node.op} expects booleans", v)
                v = b(s, n, e)
                if v is True or v is False:
                    return v
                raise _bad(loc, f"{node.op} expects booleans", v)

            return _join(f2, *cs)

        def fn(s, n, e):
            for g in fs:
                v = g(s, n, e)
                if v is stop:
                    return stop
                if v is not other:
                    raise _bad(loc, f"{node.op} expects booleans", v)
            return other

        return _join(fn, *cs)

    def c_product(self, node: N.Product, sc) -> C:
        cs = [self.comp(x, sc) for x in node.items]
        fs = [c.fn for c in cs]
        loc = node.loc

        def f(s, n, e):
            sets = [_enum(g(s, n, e), loc) for g in fs]
            return frozenset(itertools.product(*sets))

        return _join(f, *cs)

    # -- binders --------------------------------------------------------------------------
    def binders(self, binders, sc: Scope):
        """Compile binder sets; returns (inner scope, [(C of set, pattern)]).  When no set
        mentions a name bound before it, the sets are compiled in the outer scope and the
        returned list is marked ``independent`` (see ``env_iter``)."""
        bound: set[str] = set()
        independent = True
        for pat, setnode in binders:
            if bound and bound & names_in(setnode):
                independent = False
            bound.update(pattern_names(pat))
        steps = _Steps()
        steps.independent = independent and len(binders) > 1
        cur = sc
        for pat, setnode in binders:
            steps.append((self.comp(setnode, sc if steps.independent else cur), pat))
            cur = cur.bind(pattern_names(pat))
        return cur, steps

    @staticmethod
    def env_iter(steps, loc, ordered=False):
        """A generator function yielding the environments the binders range over."""
        k = len(steps)
        if getattr(steps, "independent", False):
            fns = [c.fn for c, _ in steps]
            widths = [None if isinstance(p, str) else len(p) for _, p in steps]
            flat = all(w is None for w in widths)
            order = sorted_elems if ordered else (lambda S: S)

            def it_product(s, n, e):
                sets = [order(_enum(f(s, n, e), loc)) for f in fns]
                for combo in itertools.product(*sets):
                    if flat:
                        yield e + combo
                        continue
                    ext = e
                    for v, w in zip(combo, widths, strict=True):
                        if w is None:
                            ext = ext + (v,)
                        elif type(v) is not tuple or len(v) != w:
                            raise _bad(loc, f"expected a tuple of {w} to bind", v)
                        else:
                            ext = ext + v
                    yield ext

            return it_product
        fns = [(c.fn, None if isinstance(p, str) else len(p)) for c, p in steps]
        elems = sorted_elems if ordered else (lambda S: S)

        def it(s, n, e, i=0):
            if i == k:
                yield e
                return
            f, width = fns[i]
            for v in elems(_enum(f(s, n, e), loc)):
                if width is None:
                    yield from it(s, n, e + (v,), i + 1)
                else:
                    if type(v) is not tuple or len(v) != width:
                        raise _bad(loc, f"expected a tuple of {width} to bind", v)
                    yield from it(s, n, e + v, i + 1)

        return it

    @staticmethod
    def single(steps) -> bool:
        return len(steps) == 1 and isinstance(steps[0][1], str)

    def c_quant(self, node: N.Quant, sc) -> C:
        inner, steps = self.binders(node.binders, sc)
        body = self.comp(node.body, inner)
        bf, loc = body.fn, node.loc
        exists = node.op == "\\E"
        what = f"{node.op} expects a boolean body"
        if self.single(steps):
            S = steps[0][0].fn
            if exists:

                def f(s, n, e):
                    for v in _enum(S(s, n, e), loc):
                        r = bf(s, n, e + (v,))
                        if r is True:
                            return True
                        if r is not False:
                            raise _bad(loc, what, r)
                    return False

            else:

                def f(s, n, e):
                    for v in _enum(S(s, n, e), loc):
                        r = bf(s, n, e + (v,))
                        if r is False:
                            return False
                        if r is not True:
                            raise _bad(loc, what, r)
                    return True

        else:
            it = self.env_iter(steps, loc)

            def f(s, n, e):
                for e2 in it(s, n, e):
                    r = bf(s, n, e2)
                    if r is not True and r is not False:
                        raise _bad(loc, what, r)
                    if r is exists:
                        return exists
                return not exists

        return _join(f, body, *(c for c, _ in steps))

    def c_choose(self, node: N.Choose, sc) -> C:
        inner, steps = self.binders([(node.pattern, node.set)], sc)
        body = self.comp(node.body, inner)
        it = self.env_iter(steps, node.loc, ordered=True)
        bf, loc = body.fn, node.loc
        width = None if isinstance(node.pattern, str) else len(node.pattern)

        def f(s, n, e):
            for e2 in it(s, n, e):
                r = bf(s, n, e2)
                if r is True:
                    return e2[len(e)] if width is None else e2[len(e) :]
                if r is not False:
                    raise _bad(loc, "CHOOSE expects a boolean body", r)
            raise TlaEvalError("CHOOSE found no element satisfying the predicate", loc)

        return _join(f, body, *(c for c, _ in steps))

    # -- sets -------------------------------------------------------------------------------
    def c_setenum(self, node: N.SetEnum, sc) -> C:
        if not node.items:
            return _lit(frozenset())
        cs = [self.comp(x, sc) for x in node.items]
        fs = [c.fn for c in cs]
        if len(fs) == 1:
            (a,) = fs
            return _join(lambda s, n, e: frozenset((a(s, n, e),)), *cs)
        return _join(lambda s, n, e: frozenset([g(s, n, e) for g in fs]), *cs)

    def c_setfilter(self, node: N.SetFilter, sc) -> C:
        inner, steps = self.binders([(node.pattern, node.set)], sc)
        body = self.comp(node.pred, inner)
        bf, loc = body.fn, node.loc
        S = steps[0][0].fn
        width = None if isinstance(node.pattern, str) else len(node.pattern)

        def f(s, n, e):
            out = []
            for v in _enum(S(s, n, e), loc):
                if width is None:
                    r = bf(s, n, e + (v,))
                else:
                    if type(v) is not tuple or len(v) != width:
                        raise _bad(loc, f"expected a tuple of {width} to bind", v)
                    r = bf(s, n, e + v)
                if r is True:
                    out.append(v)
                elif r is not False:
                    raise _bad(loc, "a set filter expects a boolean predicate", r)
            return frozenset(out)

        return _join(f, body, *(c for c, _ in steps))

    def c_setmap(self, node: N.SetMap, sc) -> C:
        inner, steps = self.binders(node.binders, sc)
        body = self.comp(node.expr, inner)
        bf, loc = body.fn, node.loc
        if self.single(steps):
            S = steps[0][0].fn

            def f(s, n, e):
                return frozenset([bf(s, n, e + (v,)) for v in _enum(S(s, n, e), loc)])

        else:
            it = self.env_iter(steps, loc)

            def f(s, n, e):
                return frozenset([bf(s, n, e2) for e2 in it(s, n, e)])

        return _join(f, body, *(c for c, _ in steps))

    # -- functions ------------------------------------------------------------------------
    def c_fncons(self, node: N.FnCons, sc) -> C:
        inner, steps = self.binders(node.binders, sc)
        body = self.comp(node.body, inner)
        bf, loc = body.fn, node.loc
        if self.single(steps):
            S = steps[0][0].fn

            def f(s, n, e):
                return make_fn({v: bf(s, n, e + (v,)) for v in _enum(S(s, n, e), loc)})

        else:
            it = self.env_iter(steps, loc)
            d0 = sc.depth
            one_tuple = len(steps) == 1  # [<<a, b>> \in S |-> ...]: the argument is the pair

            def f(s, n, e):
                out = {}
                for e2 in it(s, n, e):
                    key = e2[d0:]
                    if one_tuple:
                        key = tuple(key)
                    out[key] = bf(s, n, e2)
                return make_fn(out)

        return _join(f, body, *(c for c, _ in steps))

    def c_fnapp(self, node: N.FnApp, sc) -> C:
        cf = self.comp(node.fn, sc)
        cs = [self.comp(a, sc) for a in node.args]
        F, loc = cf.fn, node.loc
        if len(cs) == 1:
            X = cs[0].fn
        else:
            xs = [c.fn for c in cs]

            def X(s, n, e):
                return tuple([g(s, n, e) for g in xs])

        def f(s, n, e):
            fv = F(s, n, e)
            x = X(s, n, e)
            t = type(fv)
            if t is Fn:
                try:
                    return fv.d[x]
                except KeyError:
                    pass
            elif t is tuple:
                if type(x) is int and 0 < x <= len(fv):
                    return fv[x - 1]
            else:
                raise _bad(loc, f"cannot apply a non-function to {fmt(x)}", fv)
            raise TlaEvalError(f"{fmt(x)} is outside the domain of the function {fmt(fv)}", loc)

        return _join(f, cf, *cs)

    def c_fnset(self, node: N.FnSet, sc) -> C:
        ca = self.comp(node.domain, sc)
        cb = self.comp(node.codomain, sc)
        a, b, loc = ca.fn, cb.fn, node.loc

        def f(s, n, e):
            dom, cod = a(s, n, e), b(s, n, e)
            if not is_set(dom):
                raise _bad(loc, "[S -> T] expects a set S", dom)
            if not is_set(cod):
                raise _bad(loc, "[S -> T] expects a set T", cod)
            return FunSet(dom, cod)

        return _join(f, ca, cb)

    def c_except(self, node: N.Except, sc) -> C:
        cf = self.comp(node.fn, sc)
        parts = [cf]
        clauses = []
        at_scope = sc.bind(["@"])
        for path, value in node.clauses:
            keys = []
            for kind, arg in path:
                if kind == "fld":
                    keys.append(_lit(arg).fn)
                    continue
                cs = [self.comp(a, sc) for a in arg]
                parts.extend(cs)
                if len(cs) == 1:
                    keys.append(cs[0].fn)
                else:
                    fs = [c.fn for c in cs]
                    keys.append(lambda s, n, e, fs=fs: tuple([g(s, n, e) for g in fs]))
            cv = self.comp(value, at_scope)
            parts.append(cv)
            clauses.append((keys, cv.fn))
        F, loc = cf.fn, node.loc

        def update(fv, ks, i, vf, s, n, e):
            k = ks[i]
            t = type(fv)
            last = i == len(ks) - 1
            if t is tuple:
                if type(k) is not int or not 0 < k <= len(fv):
                    return fv
                old = fv[k - 1]
                new = vf(s, n, e + (old,)) if last else update(old, ks, i + 1, vf, s, n, e)
                return fv[: k - 1] + (new,) + fv[k:]
            if t is Fn:
                if k not in fv.d:
                    return fv
                old = fv.d[k]
                new = vf(s, n, e + (old,)) if last else update(old, ks, i + 1, vf, s, n, e)
                d = dict(fv.d)
                d[k] = new
                return Fn(d)
            raise _bad(loc, "EXCEPT expects a function", fv)

        def f(s, n, e):
            fv = F(s, n, e)
            for keys, vf in clauses:
                ks = [k(s, n, e) for k in keys]
                fv = update(fv, ks, 0, vf, s, n, e)
            return fv

        c = _join(f, *parts)
        if c.mr == sc.depth:  # the @ slot is bound inside
            c.mr = INF
        return c

    def c_record(self, node: N.RecordCons, sc) -> C:
        names = [k for k, _ in node.fields]
        cs = [self.comp(v, sc) for _, v in node.fields]
        fs = [c.fn for c in cs]
        pairs = list(zip(names, fs, strict=True))
        return _join(lambda s, n, e: Fn({k: g(s, n, e) for k, g in pairs}), *cs)

    def c_recordset(self, node: N.RecordSet, sc) -> C:
        names = [k for k, _ in node.fields]
        cs = [self.comp(v, sc) for _, v in node.fields]
        pairs = list(zip(names, [c.fn for c in cs], strict=True))
        loc = node.loc

        def f(s, n, e):
            fields = {}
            for k, g in pairs:
                v = g(s, n, e)
                if not is_set(v):
                    raise _bad(loc, f"the record set field {k} expects a set", v)
                fields[k] = v
            return RecordSet(fields)

        return _join(f, *cs)

    def c_dot(self, node: N.Dot, sc) -> C:
        c = self.comp(node.expr, sc)
        R, fld, loc = c.fn, node.field, node.loc

        def f(s, n, e):
            r = R(s, n, e)
            if type(r) is Fn:
                try:
                    return r.d[fld]
                except KeyError:
                    pass
            raise _bad(loc, f"no field {fld} in", r)

        return _join(f, c)

    def c_tuple(self, node: N.Tuple, sc) -> C:
        if not node.items:
            return _lit(())
        cs = [self.comp(x, sc) for x in node.items]
        fs = [c.fn for c in cs]
        if len(fs) == 2:
            a, b = fs
            return _join(lambda s, n, e: (a(s, n, e), b(s, n, e)), *cs)
        return _join(lambda s, n, e: tuple([g(s, n, e) for g in fs]), *cs)

    # -- control ----------------------------------------------------------------------------
    def c_if(self, node: N.If, sc) -> C:
        cc = self.comp(node.cond, sc)
        ca = self.comp(node.then, sc)
        cb = self.comp(node.other, sc)
        c, a, b, loc = cc.fn, ca.fn, cb.fn, node.loc

        def f(s, n, e):
            v = c(s, n, e)
            if v is True:
                return a(s, n, e)
            if v is False:
                return b(s, n, e)
            raise _bad(loc, "IF expects a boolean condition", v)

        return _join(f, cc, ca, cb)

    def c_case(self, node: N.Case, sc) -> C:
        parts = []
        arms = []
        for g, x in node.arms:
            cg, cx = self.comp(g, sc), self.comp(x, sc)
            parts += [cg, cx]
            arms.append((cg.fn, cx.fn))
        other = None
        if node.other is not None:
            co = self.comp(node.other, sc)
            parts.append(co)
            other = co.fn
        loc = node.loc

        def f(s, n, e):
            for g, x in arms:
                v = g(s, n, e)
                if v is True:
                    return x(s, n, e)
                if v is not False:
                    raise _bad(loc, "CASE expects boolean guards", v)
            if other is not None:
                return other(s, n, e)
            raise TlaEvalError("no CASE arm applies (and there is no OTHER)", loc)

        return _join(f, *parts)

    def let_scope(self, node: N.Let, sc: Scope):
        """Scope after a LET's definitions and the number of env cells they need."""
        cur = sc
        for d in node.defs:
            op = LetOp(d, cur)
            if d.params:
                cur = cur.with_entry(d.name, ("op", op))
                continue
            body = self.letop_code(op)
            if not (body.st or body.pr) and body.mr >= op.depth:
                cur = cur.with_entry(d.name, ("const", C(_depth_memo(body.fn, op.depth))))
            elif not body.pr and not (self.mode == "init" and body.st):
                cur = cur.with_entry(d.name, ("cell", cur.depth, op), slots=1)
            else:
                cur = cur.with_entry(d.name, ("op", op))
        return cur, cur.depth - sc.depth

    def c_let(self, node: N.Let, sc) -> C:
        inner, ncells = self.let_scope(node, sc)
        body = self.comp(node.body, inner)
        bf = body.fn
        c = C(bf, body.st, body.pr, body.mr)
        if ncells:
            c.fn = _with_cells(bf, ncells)
            if c.mr >= sc.depth:
                c.mr = INF
            c.st = True  # cells live per evaluation; never fold across them
        return c

    def c_lambda(self, node, sc) -> C:
        raise UnsupportedConstruct(
            "LAMBDA outside an operator argument of SelectSeq/MkSeq/SortSeq/ApaFold*",
            node.loc,
        )

    def c_temporal(self, node: N.Temporal, sc) -> C:
        kind, loc = node.kind, node.loc
        names = {
            "[]": "the temporal operator []",
            "<>": "the temporal operator <>",
            "~>": "the temporal operator ~>",
            "-+->": "the temporal operator -+->",
            "ENABLED": "ENABLED",
            "[]_": "[A]_v (a stuttering action)",
            "<<>>_": "<<A>>_v",
            "WF_": "WF_v(A) (weak fairness)",
            "SF_": "SF_v(A) (strong fairness)",
            "\\cdot": "\\cdot (action composition)",
        }
        what = names.get(kind, kind)

        def f(s, n, e):
            raise UnsupportedConstruct(f"{what} cannot be evaluated by this checker", loc)

        return C(f, st=True)

    def c_unsupported(self, node: N.Unsupported, sc) -> C:
        what, loc = node.construct, node.loc

        def f(s, n, e):
            raise UnsupportedConstruct(f"{what} is not supported by this checker", loc)

        return C(f, st=True)


def _depth_memo(fn, depth):
    cell = []

    def f(s, n, e):
        if cell:
            return cell[0]
        v = fn(s, n, e[:depth])
        cell.append(v)
        return v

    return f


def _with_cells(bf, k):
    if k == 1:
        return lambda s, n, e: bf(s, n, e + ([_NOT_YET],))
    return lambda s, n, e: bf(s, n, e + tuple([_NOT_YET] for _ in range(k)))


# -- binary operators --------------------------------------------------------------------
def _int_op(py, name):
    def maker(a, b, loc, op):
        def f(s, n, e):
            x = a(s, n, e)
            y = b(s, n, e)
            if type(x) is int and type(y) is int:
                return py(x, y, loc)
            raise TlaEvalError(
                f"{name} expects integers, found {type_name(x)} {fmt(x)} and "
                f"{type_name(y)} {fmt(y)}",
                loc,
            )

        return f

    return maker


def _div(x, y, loc):
    if y == 0:
        raise TlaEvalError("division by zero", loc)
    return x // y


def _mod(x, y, loc):
    if y <= 0:
        raise TlaEvalError(f"% needs a positive divisor, found {y}", loc)
    return x % y


def _pow(x, y, loc):
    if y < 0:
        raise TlaEvalError("negative exponent", loc)
    return x**y


def _add(a, b, loc, op):
    def f(s, n, e):
        x = a(s, n, e)
        y = b(s, n, e)
        if type(x) is int and type(y) is int:
            return x + y
        raise TlaEvalError(f"+ expects integers, found {fmt(x)} and {fmt(y)}", loc)

    return f


def _sub(a, b, loc, op):
    def f(s, n, e):
        x = a(s, n, e)
        y = b(s, n, e)
        if type(x) is int and type(y) is int:
            return x - y
        raise TlaEvalError(f"- expects integers, found {fmt(x)} and {fmt(y)}", loc)

    return f


def _eq(a, b, loc, op):
    return lambda s, n, e: a(s, n, e) == b(s, n, e)


def _neq(a, b, loc, op):
    return lambda s, n, e: a(s, n, e) != b(s, n, e)


def _in(a, b, loc, op):
    def f(s, n, e):
        x = a(s, n, e)
        S = b(s, n, e)
        if type(S) is frozenset:
            return x in S
        return _member(x, S, loc)

    return f


def _notin(a, b, loc, op):
    f = _in(a, b, loc, op)
    return lambda s, n, e: not f(s, n, e)


def _sets(x, y, loc, op):
    if type(x) is frozenset and type(y) is frozenset:
        return x, y
    if not is_set(x):
        raise _bad(loc, f"{op} expects sets", x)
    if not is_set(y):
        raise _bad(loc, f"{op} expects sets", y)
    return _enum(x, loc), _enum(y, loc)


def _set_op(py):
    """A binary operator on two sets (union, difference, subset, ...)."""

    def maker(a, b, loc, op):
        def f(s, n, e):
            x, y = _sets(a(s, n, e), b(s, n, e), loc, op)
            return py(x, y)

        return f

    return maker


def _subseteq(a, b, loc, op):
    def f(s, n, e):
        x = a(s, n, e)
        y = b(s, n, e)
        if type(x) is frozenset and type(y) is frozenset:
            return x <= y
        if not is_set(y):
            raise _bad(loc, "\\subseteq expects sets", y)
        return all(_member(v, y, loc) for v in _enum(x, loc))

    return f


def _range(a, b, loc, op):
    def f(s, n, e):
        x = a(s, n, e)
        y = b(s, n, e)
        if type(x) is int and type(y) is int:
            return frozenset(range(x, y + 1))
        raise TlaEvalError(f".. expects integers, found {fmt(x)} and {fmt(y)}", loc)

    return f


def _bool_pair(name):
    def check(v, loc):
        if v is True or v is False:
            return v
        raise _bad(loc, f"{name} expects booleans", v)

    return check


def _implies(a, b, loc, op):
    check = _bool_pair("=>")

    def f(s, n, e):
        if check(a(s, n, e), loc) is False:
            return True
        return check(b(s, n, e), loc)

    return f


def _equiv(a, b, loc, op):
    check = _bool_pair("<=>")
    return lambda s, n, e: check(a(s, n, e), loc) is check(b(s, n, e), loc)


def _colon_gt(a, b, loc, op):
    return lambda s, n, e: make_fn({a(s, n, e): b(s, n, e)})


def _atat(a, b, loc, op):
    def f(s, n, e):
        x = a(s, n, e)
        y = b(s, n, e)
        if not is_fn(x):
            raise _bad(loc, "@@ expects functions", x)
        if not is_fn(y):
            raise _bad(loc, "@@ expects functions", y)
        d = dict(enumerate(y, 1)) if type(y) is tuple else dict(y.d)
        d.update(enumerate(x, 1) if type(x) is tuple else x.d)
        return make_fn(d)

    return f


def _concat(a, b, loc, op):
    def f(s, n, e):
        x = a(s, n, e)
        y = b(s, n, e)
        if type(x) is tuple and type(y) is tuple:
            return x + y
        if type(x) is str and type(y) is str:
            return x + y
        raise TlaEvalError(f"\\o expects sequences, found {fmt(x)} and {fmt(y)}", loc)

    return f


def _int_cmp(py, name):
    def maker(a, b, loc, op):
        def f(s, n, e):
            x = a(s, n, e)
            y = b(s, n, e)
            if type(x) is int and type(y) is int:
                return py(x, y)
            raise TlaEvalError(f"{name} expects integers, found {fmt(x)} and {fmt(y)}", loc)

        return f

    return maker


_BINARY = {
    "=": _eq,
    ":=": _eq,
    "#": _neq,
    "\\in": _in,
    "\\notin": _notin,
    "+": _add,
    "-": _sub,
    "*": _int_op(lambda x, y, loc: x * y, "*"),
    "\\div": _int_op(_div, "\\div"),
    "%": _int_op(_mod, "%"),
    "^": _int_op(_pow, "^"),
    "<": _int_cmp(lambda x, y: x < y, "<"),
    ">": _int_cmp(lambda x, y: x > y, ">"),
    "<=": _int_cmp(lambda x, y: x <= y, "<="),
    ">=": _int_cmp(lambda x, y: x >= y, ">="),
    "..": _range,
    "\\cup": _set_op(lambda x, y: x | y),
    "\\cap": _set_op(lambda x, y: x & y),
    "\\": _set_op(lambda x, y: x - y),
    "\\subseteq": _subseteq,
    "\\subset": _set_op(lambda x, y: x < y),
    "\\supseteq": _set_op(lambda x, y: x >= y),
    "\\supset": _set_op(lambda x, y: x > y),
    "=>": _implies,
    "<=>": _equiv,
    ":>": _colon_gt,
    "@@": _atat,
    "\\o": _concat,
}

__all__ = ["C", "Compiler", "Instance", "LazySet", "Scope", "UNSET", "ROOT", "located"]
