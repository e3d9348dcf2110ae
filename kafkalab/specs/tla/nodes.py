"""Abstract syntax of the TLA+ subset: one class per construct, each with a source ``loc``.

Invariants: nodes are immutable after parsing; ``loc`` is ``(file, line, col)`` of the
construct's first token (for infix operators, the operator's token); bound-variable
patterns are a ``str`` (``x``) or a ``tuple`` of ``str`` (``<<x, y>>``); a binder list is a
list of ``(pattern, set_expression)`` pairs, one per bound name, in source order.
Operators have the lexer's normalized spelling (``/\\``, ``#``, ``<=``, ``\\cup`` ...).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .errors import Loc


class Node:
    """Base of all expression nodes."""

    __slots__ = ()
    loc: Loc


@dataclass(eq=False, slots=True)
class Num(Node):
    value: int
    loc: Loc


@dataclass(eq=False, slots=True)
class Str(Node):
    value: str
    loc: Loc


@dataclass(eq=False, slots=True)
class Bool(Node):
    value: bool
    loc: Loc


@dataclass(eq=False, slots=True)
class Name(Node):
    """An identifier, or an operator application ``Op(a, b)`` when ``args`` is a list."""

    name: str
    args: list[Node] | None
    loc: Loc


@dataclass(eq=False, slots=True)
class At(Node):
    """``@`` inside an EXCEPT value: the old value at the clause's path."""

    loc: Loc


@dataclass(eq=False, slots=True)
class Prime(Node):
    expr: Node
    loc: Loc


@dataclass(eq=False, slots=True)
class Unary(Node):
    """Prefix operator: ``~``, ``-`` (negation), SUBSET, UNION, DOMAIN."""

    op: str
    expr: Node
    loc: Loc


@dataclass(eq=False, slots=True)
class Binary(Node):
    op: str
    left: Node
    right: Node
    loc: Loc


@dataclass(eq=False, slots=True)
class Junction(Node):
    """Conjunction (``/\\``) or disjunction (``\\/``) of items; bulleted or infix chains."""

    op: str
    items: list[Node]
    loc: Loc
    bulleted: bool = False


@dataclass(eq=False, slots=True)
class Product(Node):
    """``S \\X T \\X U``: the set of triples (not nested pairs)."""

    items: list[Node]
    loc: Loc
    paren: bool = False


@dataclass(eq=False, slots=True)
class Quant(Node):
    op: str  # "\\A" or "\\E"
    binders: list
    body: Node
    loc: Loc


@dataclass(eq=False, slots=True)
class Choose(Node):
    pattern: object
    set: Node
    body: Node
    loc: Loc


@dataclass(eq=False, slots=True)
class SetEnum(Node):
    items: list[Node]
    loc: Loc


@dataclass(eq=False, slots=True)
class SetFilter(Node):
    pattern: object
    set: Node
    pred: Node
    loc: Loc


@dataclass(eq=False, slots=True)
class SetMap(Node):
    expr: Node
    binders: list
    loc: Loc


@dataclass(eq=False, slots=True)
class FnCons(Node):
    binders: list
    body: Node
    loc: Loc


@dataclass(eq=False, slots=True)
class FnApp(Node):
    fn: Node
    args: list[Node]
    loc: Loc


@dataclass(eq=False, slots=True)
class FnSet(Node):
    domain: Node
    codomain: Node
    loc: Loc


@dataclass(eq=False, slots=True)
class Except(Node):
    """``[f EXCEPT ![a][b] = v, !.x = w]``: clauses are (path, value); a path element is
    ``("idx", [exprs])`` or ``("fld", name)``."""

    fn: Node
    clauses: list
    loc: Loc


@dataclass(eq=False, slots=True)
class RecordCons(Node):
    fields: list  # [(name, expr)]
    loc: Loc


@dataclass(eq=False, slots=True)
class RecordSet(Node):
    fields: list  # [(name, set expr)]
    loc: Loc


@dataclass(eq=False, slots=True)
class Dot(Node):
    expr: Node
    field: str
    loc: Loc


@dataclass(eq=False, slots=True)
class Tuple(Node):
    items: list[Node]
    loc: Loc


@dataclass(eq=False, slots=True)
class If(Node):
    cond: Node
    then: Node
    other: Node
    loc: Loc


@dataclass(eq=False, slots=True)
class Case(Node):
    arms: list  # [(guard, expr)]
    other: Node | None
    loc: Loc


@dataclass(eq=False, slots=True)
class Let(Node):
    defs: list  # [OpDef]
    body: Node
    loc: Loc


@dataclass(eq=False, slots=True)
class Unchanged(Node):
    expr: Node
    loc: Loc


@dataclass(eq=False, slots=True)
class Lambda(Node):
    params: list[str]
    body: Node
    loc: Loc


@dataclass(eq=False, slots=True)
class Temporal(Node):
    """A construct that is parsed but never evaluated by the checker: ``[]A``, ``<>A``,
    ``A ~> B``, ``ENABLED A``, ``[A]_v``, ``<<A>>_v``, ``WF_v(A)``, ``SF_v(A)``, ``\\cdot``."""

    kind: str
    args: list[Node]
    loc: Loc


@dataclass(eq=False, slots=True)
class Unsupported(Node):
    """A construct outside the subset, parsed so that an unused definition is harmless;
    evaluating it raises UnsupportedConstruct naming ``construct``."""

    construct: str
    loc: Loc


@dataclass(eq=False, slots=True)
class OpDef:
    """``name(params) == body``; ``local`` for LOCAL definitions."""

    name: str
    params: list[str]
    body: Node
    loc: Loc
    local: bool = False
    is_function: bool = False  # defined as f[x \in S] == e


@dataclass(eq=False)
class ModuleAst:
    """One parsed module file, before EXTENDS are resolved."""

    name: str
    file: str
    extends: list[tuple[str, Loc]] = field(default_factory=list)
    constants: list[tuple[str, Loc]] = field(default_factory=list)
    variables: list[tuple[str, Loc]] = field(default_factory=list)
    definitions: list[OpDef] = field(default_factory=list)
    assumes: list[Node] = field(default_factory=list)
