"""Parser: tokens -> ``ModuleAst`` / expression ``Node`` trees.

Keeps: ``parse_module``, ``parse_expression`` and the operator precedence table.
Invariants:

* Precedence follows TLA+: every infix operator has a range ``lo..hi``; of two adjacent
  operators the one whose range lies wholly above the other's binds tighter; overlapping
  ranges are a *precedence conflict* (a syntax error, as in SANY: ``a \\/ b /\\ c``),
  except for the same left-associative operator (``a + b + c``).
* Bulleted ``/\\`` and ``\\/`` lists follow the alignment rule: while an item is parsed,
  every token at or left of the bullet's column is invisible (``peek`` answers eof),
  so the item ends there; the list continues with a bullet of the same kind in exactly
  that column.
* Constructs the checker cannot evaluate but specs commonly contain (temporal formulas,
  ``[A]_v``, ``WF_v(A)``, ``ENABLED``, unbounded quantifiers, LAMBDA) become ``Temporal``
  or ``Unsupported`` nodes, so only *evaluating* them fails; module-level constructs
  outside the subset (INSTANCE, RECURSIVE, THEOREM, user-defined infix operators) raise
  ``UnsupportedConstruct`` with the location at once.
"""

from __future__ import annotations

from . import nodes as N
from .errors import TlaSyntaxError, UnsupportedConstruct
from .lexer import Token, tokenize

# op -> (lo, hi, left-associative)
INFIX: dict[str, tuple[int, int, bool]] = {
    "=>": (1, 1, False),
    "<=>": (2, 2, False),
    "~>": (2, 2, False),
    "-+->": (2, 2, False),
    "/\\": (3, 3, True),
    "\\/": (3, 3, True),
    "=": (5, 5, False),
    "#": (5, 5, False),
    "<": (5, 5, False),
    ">": (5, 5, False),
    "<=": (5, 5, False),
    ">=": (5, 5, False),
    "\\in": (5, 5, False),
    "\\notin": (5, 5, False),
    "\\subseteq": (5, 5, False),
    "\\subset": (5, 5, False),
    "\\supseteq": (5, 5, False),
    "\\supset": (5, 5, False),
    ":=": (5, 5, False),
    "\\cdot": (5, 14, True),
    "@@": (6, 6, True),
    ":>": (7, 7, False),
    "\\cup": (8, 8, True),
    "\\cap": (8, 8, True),
    "\\": (8, 8, False),
    "..": (9, 9, False),
    "+": (10, 10, True),
    "-": (11, 11, True),
    "%": (10, 11, False),
    "*": (13, 13, True),
    "\\div": (13, 13, False),
    "\\o": (13, 13, True),
    "^": (14, 14, False),
    "\\X": (10, 13, True),
}
# Infix operators of TLA+ that this subset does not define (user-definable symbols).
OTHER_INFIX = frozenset(
    ["++", "**", "//", "^^", "|", "&", "$", "?", "|-", "/"]
    + [
        "\\" + w
        for w in """prec preceq succ succeq sqsubset sqsubseteq sqsupset sqsupseteq sqcup
        sqcap oplus ominus otimes oslash odot uplus star bullet bigcirc sim simeq approx
        cong asymp doteq propto wr ll gg""".split()
    ]
)
PREFIX: dict[str, tuple[int, int]] = {
    "~": (4, 4),
    "-": (12, 12),
    "SUBSET": (10, 13),
    "UNION": (10, 13),
    "DOMAIN": (10, 13),
    "ENABLED": (4, 15),
    "UNCHANGED": (4, 15),
    "[]": (4, 15),
    "<>": (4, 15),
}
_TEMPORAL_INFIX = {"~>": "~>", "-+->": "-+->", "\\cdot": "\\cdot"}
_UNIT_STARTERS = frozenset(
    """EXTENDS CONSTANT CONSTANTS VARIABLE VARIABLES ASSUME ASSUMPTION AXIOM LOCAL INSTANCE
    RECURSIVE THEOREM LEMMA PROPOSITION COROLLARY""".split()
)


class Parser:
    def __init__(self, tokens: list[Token], filename: str):
        self.toks = tokens
        self.i = 0
        self.file = filename
        self.limit = 0  # tokens at column <= limit are invisible (bullet alignment)
        self._eof = tokens[-1]

    # -- token access -------------------------------------------------------------
    def peek(self) -> Token:
        t = self.toks[self.i]
        if t.col <= self.limit and t.kind != "eof":
            return Token("eof", None, t.line, t.col)
        return t

    def peek2(self) -> Token:
        """The token after the next one (ignores visibility; used for small lookaheads)."""
        return self.toks[min(self.i + 1, len(self.toks) - 1)]

    def advance(self) -> Token:
        t = self.peek()
        if t.kind == "eof":
            self.error("unexpected end of expression", t)
        self.i += 1
        return t

    def loc(self, t: Token) -> N.Loc:
        return (self.file, t.line, t.col)

    def error(self, msg: str, t: Token | None = None):
        t = t or self.peek()
        raise TlaSyntaxError(msg, self.loc(t))

    def unsupported(self, construct: str, t: Token):
        raise UnsupportedConstruct(f"{construct} is not supported by this checker", self.loc(t))

    def describe(self, t: Token) -> str:
        if t.kind == "eof":
            return "end of input (or a token left of an enclosing bullet)"
        return repr(t.value)

    def expect_op(self, value: str) -> Token:
        t = self.peek()
        if not t.is_op(value):
            self.error(f"expected {value!r}, found {self.describe(t)}", t)
        self.i += 1
        return t

    def expect_kw(self, value: str) -> Token:
        t = self.peek()
        if not t.is_kw(value):
            self.error(f"expected {value}, found {self.describe(t)}", t)
        self.i += 1
        return t

    def expect_id(self) -> Token:
        t = self.peek()
        if t.kind != "id":
            self.error(f"expected an identifier, found {self.describe(t)}", t)
        self.i += 1
        return t

    def accept_op(self, value: str) -> bool:
        if self.peek().is_op(value):
            self.i += 1
            return True
        return False

    # -- modules ---------------------------------------------------------------------
    def parse_module(self) -> N.ModuleAst:
        t = self.peek()
        if t.kind != "sep":
            self.error("expected '---- MODULE Name ----'", t)
        self.i += 1
        self.expect_kw("MODULE")
        name = self.expect_id().value
        if self.peek().kind != "sep":
            self.error("expected '----' after the module name")
        self.i += 1
        mod = N.ModuleAst(name=name, file=self.file)
        seen: dict[str, N.Loc] = {}
        while True:
            t = self.peek()
            if t.kind == "sep":
                self.i += 1
                if self.peek().is_kw("MODULE"):
                    self.unsupported("a nested module", t)
                continue
            if t.kind in ("end", "eof"):
                break
            if t.kind == "kw":
                self.parse_unit(t, mod, seen)
                continue
            if t.kind == "id":
                d = self.parse_definition(local=False)
                self.add_def(mod, d, seen)
                continue
            if t.kind == "op" and t.value in ("-", "~", "[]", "<>"):
                self.unsupported(f"defining the prefix operator {t.value}", t)
            self.error(f"unexpected {self.describe(t)} at module level", t)
        return mod

    def add_def(self, mod: N.ModuleAst, d: N.OpDef, seen: dict) -> None:
        if d.name in seen:
            raise TlaSyntaxError(f"{d.name} is defined twice", d.loc)
        seen[d.name] = d.loc
        mod.definitions.append(d)

    def parse_unit(self, t: Token, mod: N.ModuleAst, seen: dict) -> None:
        kw = t.value
        if kw == "EXTENDS":
            self.i += 1
            while True:
                nt = self.expect_id()
                mod.extends.append((nt.value, self.loc(nt)))
                if not self.accept_op(","):
                    break
        elif kw in ("CONSTANT", "CONSTANTS", "VARIABLE", "VARIABLES"):
            self.i += 1
            target = mod.constants if kw.startswith("CONSTANT") else mod.variables
            while True:
                nt = self.expect_id()
                if self.peek().is_op("("):
                    self.unsupported("an operator constant (CONSTANT Op(_))", nt)
                target.append((nt.value, self.loc(nt)))
                if not self.accept_op(","):
                    break
        elif kw in ("ASSUME", "ASSUMPTION", "AXIOM"):
            self.i += 1
            if self.peek().kind == "id" and self.peek2().is_op("=="):
                self.i += 2
            mod.assumes.append(self.parse_expr())
        elif kw == "LOCAL":
            self.i += 1
            if self.peek().is_kw("INSTANCE"):
                self.unsupported("INSTANCE", self.peek())
            d = self.parse_definition(local=True)
            self.add_def(mod, d, seen)
        elif kw == "INSTANCE":
            self.unsupported("INSTANCE", t)
        elif kw == "RECURSIVE":
            self.unsupported("RECURSIVE", t)
        elif kw in ("THEOREM", "LEMMA", "PROPOSITION", "COROLLARY"):
            # A theorem is a claim for TLAPS, not something to check: parse and drop it.
            self.i += 1
            if self.peek().kind == "id" and self.peek2().is_op("=="):
                self.i += 2
            self.parse_expr()
            nt = self.peek()
            if nt.kind == "kw" and nt.value in ("PROOF", "BY", "OBVIOUS", "OMITTED"):
                self.unsupported("a TLAPS proof", nt)
        else:
            self.error(f"unexpected keyword {kw} at module level", t)

    def parse_definition(self, local: bool) -> N.OpDef:
        """``Op == e``, ``Op(p, q) == e`` or ``f[x \\in S] == e`` (at module level or in LET)."""
        nt = self.expect_id()
        loc = self.loc(nt)
        t = self.peek()
        params: list[str] = []
        if t.is_op("("):
            self.i += 1
            while True:
                pt = self.expect_id()
                if self.peek().is_op("("):
                    self.unsupported("an operator parameter (higher-order operator)", pt)
                params.append(pt.value)
                if not self.accept_op(","):
                    break
            self.expect_op(")")
        elif t.is_op("["):
            self.i += 1
            binders = self.parse_binders(bounded_only=True)
            self.expect_op("]")
            self.expect_op("==")
            body = self.parse_expr()
            return N.OpDef(nt.value, [], N.FnCons(binders, body, loc), loc, local, True)
        elif t.kind == "op" and (t.value in INFIX or t.value in OTHER_INFIX):
            self.unsupported(f"defining the infix operator {t.value}", t)
        self.expect_op("==")
        if self.peek().is_kw("INSTANCE"):
            self.unsupported("INSTANCE", self.peek())
        body = self.parse_expr()
        return N.OpDef(nt.value, params, body, loc, local)

    # -- expressions --------------------------------------------------------------------
    def parse_expr(self, ctx: tuple | None = None) -> N.Node:
        """An expression; ``ctx`` is ``(lo, hi, left_assoc, op, is_prefix)`` of the
        operator to the left, which decides where this operand ends."""
        lhs = self.parse_operand()
        while True:
            t = self.peek()
            if t.kind != "op":
                return lhs
            op = t.value
            if op not in INFIX:
                if op in OTHER_INFIX:
                    self.unsupported(f"the infix operator {op}", t)
                return lhs
            lo, hi, left = INFIX[op]
            if ctx is not None:
                clo, chi, cleft, cop, cprefix = ctx
                if cprefix:
                    if lo <= chi:
                        return lhs
                elif lo > chi:
                    pass
                elif hi < clo:
                    return lhs
                elif op == cop and left:
                    return lhs
                else:
                    self.error(f"precedence conflict between {cop} and {op}: add parentheses", t)
            self.i += 1
            rhs = self.parse_expr((lo, hi, left, op, False))
            lhs = self.make_binary(op, lhs, rhs, t)

    def make_binary(self, op: str, lhs: N.Node, rhs: N.Node, t: Token) -> N.Node:
        loc = self.loc(t)
        if op in ("/\\", "\\/"):
            items = []
            for side in (lhs, rhs):
                if isinstance(side, N.Junction) and side.op == op and not side.bulleted:
                    items.extend(side.items)
                else:
                    items.append(side)
            return N.Junction(op, items, loc)
        if op == "\\X":
            if isinstance(lhs, N.Product) and not lhs.paren:
                return N.Product(lhs.items + [rhs], lhs.loc)
            return N.Product([lhs, rhs], loc)
        if op in _TEMPORAL_INFIX:
            return N.Temporal(_TEMPORAL_INFIX[op], [lhs, rhs], loc)
        return N.Binary(op, lhs, rhs, loc)

    def parse_operand(self) -> N.Node:
        t = self.peek()
        loc = self.loc(t)
        kind = t.kind
        if kind == "op":
            v = t.value
            if v in ("/\\", "\\/"):
                return self.parse_bullets(t)
            if v in ("~", "-", "[]", "<>"):
                self.i += 1
                lo, hi = PREFIX[v]
                e = self.parse_expr((lo, hi, False, v, True))
                if v == "-" and isinstance(e, N.Num):
                    return self.postfix(N.Num(-e.value, loc))
                if v in ("[]", "<>"):
                    return N.Temporal(v, [e], loc)
                return N.Unary(v, e, loc)
            if v in ("\\A", "\\E", "\\AA", "\\EE"):
                return self.parse_quant(t)
        if kind == "kw":
            v = t.value
            if v in ("SUBSET", "UNION", "DOMAIN", "ENABLED", "UNCHANGED"):
                self.i += 1
                lo, hi = PREFIX[v]
                e = self.parse_expr((lo, hi, False, v, True))
                if v == "ENABLED":
                    return N.Temporal("ENABLED", [e], loc)
                if v == "UNCHANGED":
                    return N.Unchanged(e, loc)
                return N.Unary(v, e, loc)
            if v == "IF":
                self.i += 1
                c = self.parse_expr()
                self.expect_kw("THEN")
                a = self.parse_expr()
                self.expect_kw("ELSE")
                b = self.parse_expr()
                return N.If(c, a, b, loc)
            if v == "CASE":
                return self.parse_case(t)
            if v == "LET":
                return self.parse_let(t)
            if v == "CHOOSE":
                self.i += 1
                pat = self.parse_pattern()
                if self.accept_op("\\in"):
                    s = self.parse_expr()
                    self.expect_op(":")
                    body = self.parse_expr()
                    return N.Choose(pat, s, body, loc)
                self.expect_op(":")
                self.parse_expr()
                return N.Unsupported("unbounded CHOOSE x : P", loc)
            if v == "LAMBDA":
                self.i += 1
                params = [self.expect_id().value]
                while self.accept_op(","):
                    params.append(self.expect_id().value)
                self.expect_op(":")
                body = self.parse_expr()
                return N.Lambda(params, body, loc)
            if v in ("WF_", "SF_"):
                self.i += 1
                if self.peek().is_op("<<"):
                    sub = self.parse_primary()
                else:
                    st = self.expect_id()
                    sub = N.Name(st.value, None, self.loc(st))
                self.expect_op("(")
                a = self.parse_expr()
                self.expect_op(")")
                return N.Temporal(v, [sub, a], loc)
        return self.postfix(self.parse_primary())

    def postfix(self, e: N.Node) -> N.Node:
        while True:
            t = self.peek()
            if t.kind != "op":
                return e
            if t.value == "[":
                self.i += 1
                args = [self.parse_expr()]
                while self.accept_op(","):
                    args.append(self.parse_expr())
                self.expect_op("]")
                e = N.FnApp(e, args, self.loc(t))
            elif t.value == "." and self.peek2().kind == "id":
                self.i += 1
                ft = self.advance()
                e = N.Dot(e, ft.value, self.loc(ft))
            elif t.value == "'":
                self.i += 1
                e = N.Prime(e, self.loc(t))
            else:
                return e

    def parse_primary(self) -> N.Node:
        t = self.peek()
        loc = self.loc(t)
        if t.kind == "num":
            self.i += 1
            return N.Num(t.value, loc)
        if t.kind == "str":
            self.i += 1
            return N.Str(t.value, loc)
        if t.kind == "id":
            self.i += 1
            if t.value == "TRUE":
                return N.Bool(True, loc)
            if t.value == "FALSE":
                return N.Bool(False, loc)
            nxt = self.peek()
            if nxt.is_op("!"):
                self.unsupported("an instance reference (M!Op)", nxt)
            if nxt.is_op("("):
                self.i += 1
                args = [self.parse_expr()]
                while self.accept_op(","):
                    args.append(self.parse_expr())
                self.expect_op(")")
                return N.Name(t.value, args, loc)
            return N.Name(t.value, None, loc)
        if t.kind == "op":
            v = t.value
            if v == "(":
                self.i += 1
                e = self.parse_expr()
                self.expect_op(")")
                if isinstance(e, N.Product):
                    return N.Product(e.items, e.loc, paren=True)
                return e
            if v == "@":
                self.i += 1
                return N.At(loc)
            if v == "<<":
                return self.parse_tuple(t)
            if v == "{":
                return self.parse_braces(t)
            if v == "[":
                return self.parse_brackets(t)
        self.error(f"unexpected {self.describe(t)} in an expression", t)

    def parse_bullets(self, first: Token) -> N.Node:
        op = first.value
        col = first.col
        items = []
        saved = self.limit
        while True:
            t = self.peek()
            if not (t.is_op(op) and t.col == col):
                break
            self.i += 1
            self.limit = col
            try:
                items.append(self.parse_expr())
            finally:
                self.limit = saved
        return N.Junction(op, items, self.loc(first), bulleted=True)

    def parse_pattern(self):
        """A bound name ``x`` or a tuple of names ``<<x, y>>``."""
        if self.accept_op("<<"):
            names = [self.expect_id().value]
            while self.accept_op(","):
                names.append(self.expect_id().value)
            self.expect_op(">>")
            return tuple(names)
        return self.expect_id().value

    def parse_binders(self, bounded_only: bool = False):
        """``x, y \\in S, <<a, b>> \\in T``; returns the list of (pattern, set) or, for an
        unbounded binder list, None."""
        binders = []
        while True:
            names = [self.parse_pattern()]
            while self.accept_op(","):
                names.append(self.parse_pattern())
            t = self.peek()
            if not t.is_op("\\in"):
                if bounded_only:
                    self.error(f"expected \\in, found {self.describe(t)}", t)
                return None
            self.i += 1
            s = self.parse_expr()
            binders.extend((n, s) for n in names)
            if not self.accept_op(","):
                return binders

    def parse_quant(self, t: Token) -> N.Node:
        self.i += 1
        loc = self.loc(t)
        if t.value in ("\\AA", "\\EE"):
            self.unsupported(f"the temporal quantifier {t.value}", t)
        binders = self.parse_binders()
        self.expect_op(":")
        body = self.parse_expr()
        if binders is None:
            return N.Unsupported(f"unbounded quantifier {t.value} x : P", loc)
        return N.Quant(t.value, binders, body, loc)

    def parse_case(self, t: Token) -> N.Node:
        self.i += 1
        arms = []
        other = None
        while True:
            if self.peek().is_kw("OTHER"):
                self.i += 1
                self.expect_op("->")
                other = self.parse_expr()
                break
            g = self.parse_expr()
            self.expect_op("->")
            arms.append((g, self.parse_expr()))
            if not self.accept_op("[]"):
                break
        return N.Case(arms, other, self.loc(t))

    def parse_let(self, t: Token) -> N.Node:
        self.i += 1
        defs = []
        while True:
            nt = self.peek()
            if nt.is_kw("IN"):
                self.i += 1
                break
            if nt.is_kw("RECURSIVE"):
                self.unsupported("RECURSIVE", nt)
            if nt.kind != "id":
                self.error(f"expected a definition or IN, found {self.describe(nt)}", nt)
            defs.append(self.parse_definition(local=False))
        if not defs:
            self.error("LET without definitions", t)
        body = self.parse_expr()
        return N.Let(defs, body, self.loc(t))

    def parse_tuple(self, t: Token) -> N.Node:
        self.i += 1
        loc = self.loc(t)
        items = []
        if not self.peek().is_op(">>"):
            items.append(self.parse_expr())
            while self.accept_op(","):
                items.append(self.parse_expr())
        close = self.peek()
        if close.is_op(">>_"):
            self.i += 1
            sub = self.postfix(self.parse_primary())
            if len(items) != 1:
                self.error("<<A>>_v takes one action", t)
            return N.Temporal("<<>>_", [items[0], sub], loc)
        self.expect_op(">>")
        return self.postfix(N.Tuple(items, loc))

    def parse_braces(self, t: Token) -> N.Node:
        self.i += 1
        loc = self.loc(t)
        if self.accept_op("}"):
            return self.postfix(N.SetEnum([], loc))
        first = self.parse_expr()
        if self.accept_op(":"):
            pat = _as_pattern(first)
            if pat is not None:
                pred = self.parse_expr()
                self.expect_op("}")
                return self.postfix(N.SetFilter(pat, first.right, pred, loc))
            binders = self.parse_binders(bounded_only=True)
            self.expect_op("}")
            return self.postfix(N.SetMap(first, binders, loc))
        items = [first]
        while self.accept_op(","):
            items.append(self.parse_expr())
        self.expect_op("}")
        return self.postfix(N.SetEnum(items, loc))

    def parse_brackets(self, t: Token) -> N.Node:
        self.i += 1
        loc = self.loc(t)
        a, b = self.peek(), self.peek2()
        if a.kind == "id" and b.is_op("|->"):
            fields = []
            while True:
                ft = self.expect_id()
                self.expect_op("|->")
                fields.append((ft.value, self.parse_expr()))
                if not self.accept_op(","):
                    break
            self.expect_op("]")
            return self.postfix(N.RecordCons(fields, loc))
        if a.kind == "id" and b.is_op(":"):
            fields = []
            while True:
                ft = self.expect_id()
                self.expect_op(":")
                fields.append((ft.value, self.parse_expr()))
                if not self.accept_op(","):
                    break
            self.expect_op("]")
            return self.postfix(N.RecordSet(fields, loc))
        first = self.parse_expr()
        nt = self.peek()
        if nt.is_op("->"):
            self.i += 1
            cod = self.parse_expr()
            self.expect_op("]")
            return self.postfix(N.FnSet(first, cod, loc))
        if nt.is_kw("EXCEPT"):
            self.i += 1
            clauses = []
            while True:
                self.expect_op("!")
                path = []
                while True:
                    pt = self.peek()
                    if pt.is_op("["):
                        self.i += 1
                        args = [self.parse_expr()]
                        while self.accept_op(","):
                            args.append(self.parse_expr())
                        self.expect_op("]")
                        path.append(("idx", args))
                    elif pt.is_op("."):
                        self.i += 1
                        path.append(("fld", self.expect_id().value))
                    else:
                        break
                if not path:
                    self.error("expected ![...] or !.field in EXCEPT")
                self.expect_op("=")
                clauses.append((path, self.parse_expr()))
                if not self.accept_op(","):
                    break
            self.expect_op("]")
            return self.postfix(N.Except(first, clauses, loc))
        if nt.is_op("]_"):
            self.i += 1
            sub = self.postfix(self.parse_primary())
            return N.Temporal("[]_", [first, sub], loc)
        items = [first]
        while self.accept_op(","):
            items.append(self.parse_expr())
        if self.accept_op("|->"):
            binders = []
            pending = []
            for it in items:
                if isinstance(it, N.Name) and it.args is None:
                    pending.append(it.name)
                    continue
                pat = _as_pattern(it)
                if pat is None:
                    self.error("expected x \\in S before |->", t)
                for name in pending + [pat]:
                    binders.append((name, it.right))
                pending = []
            if pending or not binders:
                self.error("expected x \\in S before |->", t)
            body = self.parse_expr()
            self.expect_op("]")
            return self.postfix(N.FnCons(binders, body, loc))
        self.error(f"unexpected {self.describe(self.peek())} in [...]", self.peek())


def _as_pattern(e: N.Node):
    """If ``e`` is ``x \\in S`` or ``<<x, y>> \\in S``, the pattern; else None."""
    if not (isinstance(e, N.Binary) and e.op == "\\in"):
        return None
    lhs = e.left
    if isinstance(lhs, N.Name) and lhs.args is None:
        return lhs.name
    if isinstance(lhs, N.Tuple) and all(
        isinstance(x, N.Name) and x.args is None for x in lhs.items
    ):
        return tuple(x.name for x in lhs.items)
    return None


def parse_module(text: str, filename: str) -> N.ModuleAst:
    """Parse one module file's text."""
    p = Parser(tokenize(text, filename), filename)
    return p.parse_module()


def parse_expression(text: str, filename: str = "<expr>") -> N.Node:
    """Parse a standalone expression (used by ``Module.evaluate``)."""
    p = Parser(tokenize(text, filename, module=False), filename)
    e = p.parse_expr()
    t = p.peek()
    if t.kind != "eof":
        p.error(f"unexpected {p.describe(t)} after the expression", t)
    return e
