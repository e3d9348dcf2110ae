"""Compiler of actions (Init and Next) to closures that enumerate assignments, as TLC does.

Keeps ``ActionCompiler``.  A compiled action is ``act(s, n, e) -> sequence of n'`` where
``s`` is the current state, ``n`` the partial next state (a tuple with ``UNSET`` holes)
and each returned ``n'`` extends ``n`` by the assignments of one way the action can be
taken.  Invariants (TLC's semantics):

* conjuncts are evaluated left to right; ``x' = e`` assigns ``x'`` when it is unassigned
  and otherwise compares; ``x' \\in S`` branches over ``S`` (in canonical order) when
  ``x'`` is unassigned and otherwise tests membership; ``UNCHANGED v`` is ``v' = v``;
* disjunctions, ``\\E``, IF/CASE and calls of operators whose bodies contain primes
  branch structurally; any other conjunct is a guard (a boolean of the values so far);
* in *init* mode the same rules apply to unprimed variables (``x = e``, ``x \\in S``),
  and the partial state being built is what every guard reads;
* an expression that cannot assign anything is compiled once by the value compiler
  (``evaluator.Compiler``) and used as a guard.
"""

from __future__ import annotations

from . import nodes as N
from .errors import TlaEvalError, TlaSyntaxError
from .evaluator import ROOT, UNSET, C, Compiler, Scope, _bad, _enum, _member, _with_cells
from .values import sorted_elems


class ActionCompiler:
    def __init__(self, inst, init: bool):
        self.inst = inst
        self.init = init
        self.vc: Compiler = inst.compiler("init" if init else "value")
        self.defacts: dict = {}
        self.busy: set = set()

    # -- helpers ----------------------------------------------------------------------
    def value(self, node: N.Node, sc: Scope) -> C:
        """A value closure; in init mode it reads the partial state ``n`` as the state."""
        c = self.vc.comp(node, sc)
        if self.init:
            f = c.fn
            return C(lambda s, n, e: f(n, n, e), c.st, c.pr, c.mr, c.lit)
        return c

    def may_assign(self, c: C) -> bool:
        return c.st if self.init else c.pr

    @staticmethod
    def guard(g, loc):
        def f(s, n, e):
            v = g(s, n, e)
            if v is True:
                return (n,)
            if v is False:
                return ()
            raise _bad(loc, "an action must be a boolean", v)

        return f

    def assignable(self, node: N.Node, sc: Scope):
        """The variable slot if ``node`` is what this mode may assign (``x'`` / ``x``)."""
        if not self.init:
            if not isinstance(node, N.Prime):
                return None
            node = node.expr
        if isinstance(node, N.Name) and node.args is None:
            ent = self.vc.resolve(node.name, sc, node.loc)
            if ent[0] == "var":
                return ent[1]
        return None

    # -- entry points -------------------------------------------------------------------
    def act(self, node: N.Node, sc: Scope = ROOT):
        """Compile an action; returns ``act(s, n, e)``."""
        kind, f = self.item(node, sc)
        if kind == "g":
            return self.guard(f, node.loc)
        return f

    def components(self, node: N.Node, sc: Scope = ROOT, label: str | None = None):
        """Split a next-state action into its top-level disjuncts, each named by the
        operator it calls: ``[(label, act)]``.  Their union is the action."""
        if isinstance(node, N.Junction) and node.op == "\\/":
            out = []
            for item in node.items:
                out.extend(self.components(item, sc, label))
            return out
        if isinstance(node, N.Name):
            ent = self.vc.resolve(node.name, sc, node.loc)
            if ent[0] == "def":
                d = ent[1]
                if not d.params and not node.args:
                    return self.components(d.body, ROOT, d.name)
                return [(d.name, self.act(node, sc))]
        if isinstance(node, N.Quant) and node.op == "\\E":
            inner, steps = self.vc.binders(node.binders, sc)
            parts = self.components(node.body, inner, label)
            if len(parts) > 1:
                steps = self.wrap_steps(steps)
                return [(lb, self.exists(steps, a, node.loc, sc)) for lb, a in parts]
        return [(label, self.act(node, sc))]

    # -- compilation ----------------------------------------------------------------------
    def item(self, node: N.Node, sc: Scope):
        """("g", bool closure) for a guard or ("a", action closure)."""
        t = type(node)
        if t is N.Junction:
            c = self.value(node, sc)
            if not self.may_assign(c):
                return "g", c.fn
            items = [self.item(x, sc) for x in node.items]
            if node.op == "/\\":
                return "a", self.conj(items, node.loc)
            return "a", self.disj(items, node.loc)
        if t is N.Binary and node.op in ("=", ":=", "\\in"):
            slot = self.assignable(node.left, sc)
            if slot is not None:
                rhs = self.value(node.right, sc).fn
                if node.op == "\\in":
                    return "a", self.branch(slot, rhs, node.loc)
                return "a", self.assign(slot, rhs)
            return "g", self.value(node, sc).fn
        if t is N.Unchanged and not self.init:
            slots = self.unchanged_slots(node.expr, sc, set())
            if slots is not None:
                return "a", self.unchanged(slots)
            return "g", self.value(node, sc).fn
        c = self.value(node, sc)
        if not self.may_assign(c):
            return "g", c.fn
        if t is N.Quant and node.op == "\\E":
            inner, steps = self.vc.binders(node.binders, sc)
            body = self.act(node.body, inner)
            return "a", self.exists(self.wrap_steps(steps), body, node.loc, sc)
        if t is N.If:
            cond = self.value(node.cond, sc).fn
            a, b = self.act(node.then, sc), self.act(node.other, sc)
            loc = node.loc

            def ite(s, n, e):
                v = cond(s, n, e)
                if v is True:
                    return a(s, n, e)
                if v is False:
                    return b(s, n, e)
                raise _bad(loc, "IF expects a boolean condition", v)

            return "a", ite
        if t is N.Case:
            arms = [(self.value(g, sc).fn, self.act(x, sc)) for g, x in node.arms]
            other = self.act(node.other, sc) if node.other is not None else None
            loc = node.loc

            def case(s, n, e):
                for g, a in arms:
                    v = g(s, n, e)
                    if v is True:
                        return a(s, n, e)
                    if v is not False:
                        raise _bad(loc, "CASE expects boolean guards", v)
                if other is not None:
                    return other(s, n, e)
                raise TlaEvalError("no CASE arm applies (and there is no OTHER)", loc)

            return "a", case
        if t is N.Let:
            inner, ncells = self.vc.let_scope(node, sc)
            body = self.act(node.body, inner)
            return "a", (_with_cells(body, ncells) if ncells else body)
        if t is N.Name:
            return "a", self.call(node, sc)
        return "g", c.fn

    def call(self, node: N.Name, sc: Scope):
        ent = self.vc.resolve(node.name, sc, node.loc)
        args = node.args or []
        fs = [self.value(a, sc).fn for a in args]
        if ent[0] == "def":
            d = ent[1]
            if len(args) != len(d.params):
                raise TlaSyntaxError(
                    f"{d.name} takes {len(d.params)} argument(s), given {len(args)}", node.loc
                )
            body = self.def_act(d)
            if not fs:
                return lambda s, n, e: body(s, n, ())
            if len(fs) == 1:
                (a0,) = fs
                return lambda s, n, e: body(s, n, (a0(s, n, e),))
            return lambda s, n, e: body(s, n, tuple([f(s, n, e) for f in fs]))
        if ent[0] == "op":
            op = ent[1]
            if len(args) != len(op.d.params):
                raise TlaSyntaxError(
                    f"{op.d.name} takes {len(op.d.params)} argument(s), given {len(args)}",
                    node.loc,
                )
            body = op.acts.get(self.init)
            if body is None:
                key = ("let", id(op))
                if key in self.busy:
                    raise TlaSyntaxError(f"recursive definition of {op.d.name}", op.d.loc)
                self.busy.add(key)
                try:
                    body = op.acts[self.init] = self.act(op.d.body, op.scope.bind(op.d.params))
                finally:
                    self.busy.discard(key)
            dl = op.depth
            return lambda s, n, e: body(s, n, e[:dl] + tuple([f(s, n, e) for f in fs]))
        return self.guard(self.value(node, sc).fn, node.loc)

    def def_act(self, d: N.OpDef):
        a = self.defacts.get(d.name)
        if a is None:
            if d.name in self.busy:
                raise TlaSyntaxError(f"recursive definition of {d.name}", d.loc)
            self.busy.add(d.name)
            try:
                a = self.defacts[d.name] = self.act(d.body, ROOT.bind(d.params))
            finally:
                self.busy.discard(d.name)
        return a

    def wrap_steps(self, steps):
        if not self.init:
            return steps
        out = []
        for c, pat in steps:
            f = c.fn
            out.append((C(lambda s, n, e, f=f: f(n, n, e), c.st, c.pr, c.mr), pat))
        return out

    # -- combinators --------------------------------------------------------------------
    def conj(self, items, loc):
        items = list(items)

        def f(s, n, e):
            ns = (n,)
            for kind, g in items:
                if kind == "g":
                    if len(ns) == 1:
                        v = g(s, ns[0], e)
                        if v is not True:
                            if v is False:
                                return ()
                            raise _bad(loc, "a conjunct of an action must be a boolean", v)
                    else:
                        kept = []
                        for m in ns:
                            v = g(s, m, e)
                            if v is True:
                                kept.append(m)
                            elif v is not False:
                                raise _bad(loc, "a conjunct of an action must be a boolean", v)
                        if not kept:
                            return ()
                        ns = kept
                else:
                    if len(ns) == 1:
                        ns = g(s, ns[0], e)
                    else:
                        out = []
                        for m in ns:
                            out.extend(g(s, m, e))
                        ns = out
                    if not ns:
                        return ()
            return ns

        return f

    def disj(self, items, loc):
        acts = [g if kind == "a" else self.guard(g, loc) for kind, g in items]

        def f(s, n, e):
            out = []
            for a in acts:
                r = a(s, n, e)
                if r:
                    out.extend(r)
            return out

        return f

    def exists(self, steps, body, loc, sc):
        if Compiler.single(steps):
            S = steps[0][0].fn

            def f(s, n, e):
                out = []
                for v in sorted_elems(_enum(S(s, n, e), loc)):
                    r = body(s, n, e + (v,))
                    if r:
                        out.extend(r)
                return out

            return f
        it = Compiler.env_iter(steps, loc, ordered=True)

        def g(s, n, e):
            out = []
            for e2 in it(s, n, e):
                r = body(s, n, e2)
                if r:
                    out.extend(r)
            return out

        return g

    @staticmethod
    def assign(i, rhs):
        def f(s, n, e):
            v = rhs(s, n, e)
            c = n[i]
            if c is UNSET:
                return (n[:i] + (v,) + n[i + 1 :],)
            return (n,) if c == v else ()

        return f

    @staticmethod
    def branch(i, setf, loc):
        def f(s, n, e):
            S = setf(s, n, e)
            c = n[i]
            if c is UNSET:
                pre, post = n[:i], n[i + 1 :]
                return [pre + (v,) + post for v in sorted_elems(_enum(S, loc))]
            return (n,) if _member(c, S, loc) else ()

        return f

    def unchanged_slots(self, node: N.Node, sc: Scope, seen: set):
        """Variable slots of ``UNCHANGED node`` when node is a variable, a tuple of them,
        or a definition that is one; else None."""
        if isinstance(node, N.Tuple):
            out = []
            for x in node.items:
                r = self.unchanged_slots(x, sc, seen)
                if r is None:
                    return None
                out.extend(r)
            return out
        if isinstance(node, N.Name) and node.args is None:
            ent = self.vc.resolve(node.name, sc, node.loc)
            if ent[0] == "var":
                return [ent[1]]
            if ent[0] == "def" and not ent[1].params and node.name not in seen:
                seen.add(node.name)
                return self.unchanged_slots(ent[1].body, ROOT, seen)
        return None

    @staticmethod
    def unchanged(slots):
        slots = tuple(slots)

        def f(s, n, e):
            for i in slots:
                c = n[i]
                if c is UNSET:
                    n = n[:i] + (s[i],) + n[i + 1 :]
                elif c != s[i]:
                    return ()
            return (n,)

        return f
