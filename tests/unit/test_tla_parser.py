"""The TLA+ parser: bullet alignment, precedence, comments, every construct of the
subset, and errors that point at the right line and column."""

from __future__ import annotations

import pytest

from kafkalab.specs.tla import TlaSyntaxError, UnsupportedConstruct, load_module
from kafkalab.specs.tla import nodes as N
from kafkalab.specs.tla.lexer import tokenize
from kafkalab.specs.tla.parser import parse_expression, parse_module


def sx(node) -> str:
    """A compact S-expression of an AST, to compare shapes."""
    if isinstance(node, N.Num | N.Bool):
        return str(node.value)
    if isinstance(node, N.Str):
        return repr(node.value)
    if isinstance(node, N.Name):
        if node.args is None:
            return node.name
        return f"({node.name} {' '.join(sx(a) for a in node.args)})"
    if isinstance(node, N.Binary):
        return f"({node.op} {sx(node.left)} {sx(node.right)})"
    if isinstance(node, N.Unary):
        return f"({node.op} {sx(node.expr)})"
    if isinstance(node, N.Junction):
        return f"({node.op} {' '.join(sx(x) for x in node.items)})"
    if isinstance(node, N.Prime):
        return f"(' {sx(node.expr)})"
    if isinstance(node, N.Product):
        return f"(X {' '.join(sx(x) for x in node.items)})"
    if isinstance(node, N.Tuple):
        return f"<<{' '.join(sx(x) for x in node.items)}>>"
    if isinstance(node, N.FnApp):
        return f"(app {sx(node.fn)} {' '.join(sx(x) for x in node.args)})"
    if isinstance(node, N.SetEnum):
        return "{" + " ".join(sx(x) for x in node.items) + "}"
    if isinstance(node, N.Quant):
        bs = " ".join(f"{p}:{sx(s)}" for p, s in node.binders)
        return f"({node.op} [{bs}] {sx(node.body)})"
    if isinstance(node, N.If):
        return f"(if {sx(node.cond)} {sx(node.then)} {sx(node.other)})"
    if isinstance(node, N.Dot):
        return f"(. {sx(node.expr)} {node.field})"
    return type(node).__name__


def p(text: str) -> str:
    return sx(parse_expression(text))


# -- bullets ---------------------------------------------------------------------------
def test_bulleted_conjunction_and_nested_disjunction():
    text = """
    /\\ a
    /\\ \\/ b
       \\/ c
    /\\ d
    """
    assert p(text) == "(/\\ a (\\/ b c) d)"


def test_bullet_items_end_at_the_bullet_column():
    # The \/ at the column of the outer /\ bullets is not inside the first item.
    text = """
       /\\ a
          /\\ b
       /\\ c
    """
    assert p(text) == "(/\\ (/\\ a b) c)"


def test_bullet_list_ends_at_a_token_left_of_its_column():
    # The inner \/ list ends when the outer bullet (further left) comes back.
    mod = parse_module(
        """---- MODULE M ----
Next == \\/ /\\ x = 1
           /\\ y = 2
        \\/ z = 3
Other == 1
====
""",
        "M.tla",
    )
    defs = {d.name: d for d in mod.definitions}
    assert sx(defs["Next"].body) == "(\\/ (/\\ (= x 1) (= y 2)) (= z 3))"
    assert sx(defs["Other"].body) == "1"


def test_misaligned_bullet_is_an_infix_operator_inside_the_item():
    # The second /\ is right of the first bullet's column: it continues the first item.
    text = """
    /\\ a
      /\\ b
    """
    assert p(text) == "(/\\ (/\\ a b))"


def test_a_token_left_of_the_bullet_cannot_continue_the_item():
    # "2" is at the bullet's column, so it is outside the item that needs it.
    with pytest.raises(TlaSyntaxError) as ei:
        parse_expression("/\\ x = (1 +\n2)\n/\\ y")
    assert ":2:1:" in str(ei.value)
    assert p("/\\ x = (1 +\n 2)\n/\\ y") == "(/\\ (= x (+ 1 2)) y)"


def test_bullet_with_infix_operators_and_nested_quantifier():
    text = """
    \\/ \\E r \\in S : /\\ f[r] = 1
                    /\\ g' = r
    \\/ UNCHANGED <<f, g>>
    """
    assert p(text) == ("(\\/ (\\E [r:S] (/\\ (= (app f r) 1) (= (' g) r))) Unchanged)")


# -- precedence ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, tree",
    [
        ("~a = b", "(~ (= a b))"),
        ("~a /\\ b", "(/\\ (~ a) b)"),
        ("x \\in S \\cup T", "(\\in x (\\cup S T))"),
        ("a + b * c", "(+ a (* b c))"),
        ("a * b + c", "(+ (* a b) c)"),
        ("a - b + c", "(+ (- a b) c)"),
        ("a + b + c", "(+ (+ a b) c)"),
        ("-1", "-1"),
        ("-x + 1", "(+ (- x) 1)"),
        ("a..b+1", "(.. a (+ b 1))"),
        ("a => b /\\ c", "(=> a (/\\ b c))"),
        ("a /\\ b \\/ c => d", None),
        ("a = b /\\ c # d", "(/\\ (= a b) (# c d))"),
        ("x' = x + 1", "(= (' x) (+ x 1))"),
        ("f[x].a", "(. (app f x) a)"),
        ("S \\X T \\X U", "(X S T U)"),
        ("\\E x \\in S : a /\\ b", "(\\E [x:S] (/\\ a b))"),
        ("IF a THEN b ELSE c + 1", "(if a b (+ c 1))"),
        ("a <=> b", "(<=> a b)"),
        ("a \\equiv b", "(<=> a b)"),
        ("a =< b", "(<= a b)"),
        ("a \\leq b", "(<= a b)"),
        ("a /= b", "(# a b)"),
        ("a \\lnot b", None),
        ("a + b % c", None),
        ("a + (b % c)", "(+ a (% b c))"),
    ],
)
def test_precedence(text, tree):
    if tree is None:
        with pytest.raises(TlaSyntaxError):
            parse_expression(text)
    else:
        assert p(text) == tree


def test_mixing_conjunction_and_disjunction_without_parentheses_is_a_conflict():
    with pytest.raises(TlaSyntaxError) as ei:
        parse_expression("a \\/ b /\\ c")
    assert "precedence conflict" in str(ei.value)
    assert ":1:8:" in str(ei.value)
    assert p("a \\/ (b /\\ c)") == "(\\/ a (/\\ b c))"


def test_non_associative_operators_conflict():
    with pytest.raises(TlaSyntaxError):
        parse_expression("a = b = c")


# -- comments and module structure -----------------------------------------------------------
def test_comments_nested_and_type_annotations_are_ignored():
    toks = tokenize(
        '(* outer (* inner *) still comment *) x \\* @type: Int;\n(* @type: Str; *) "s"',
        module=False,
    )
    assert [(t.kind, t.value) for t in toks] == [("id", "x"), ("str", "s"), ("eof", None)]


def test_module_structure(tmp_path):
    f = tmp_path / "M.tla"
    f.write_text(
        """Text before the module is ignored.
------------------------------ MODULE M ------------------------------
EXTENDS Naturals, Sequences
CONSTANTS N, \\* @type: Set(Str);
          Procs
VARIABLES x, y
----
Op(a, b) == a + b
LOCAL Helper == 1
ASSUME N > 0
Spec == x = 0 /\\ [][x' = x + 1]_<<x, y>> /\\ WF_<<x, y>>(x' = 1) /\\ SF_x(TRUE)
THEOREM Spec => []TRUE
=============================================================================
after the end: ignored ( unbalanced
"""
    )
    m = load_module(str(f))
    assert m.constants == ["N", "Procs"]
    assert m.variables == ["x", "y"]
    assert list(m.definitions) == ["Op", "Helper", "Spec"]
    assert m.definitions["Op"].params == ["a", "b"]
    assert m.definitions["Helper"].local
    assert len(m.assumes) == 1


@pytest.mark.parametrize(
    "text, kind",
    [
        ("{1, 2}", N.SetEnum),
        ("{}", N.SetEnum),
        ("{x \\in S : x > 1}", N.SetFilter),
        ("{x + 1 : x \\in S, y \\in T}", N.SetMap),
        ("[x \\in S |-> x]", N.FnCons),
        ("[x \\in S, y \\in T |-> x]", N.FnCons),
        ("[x, y \\in S |-> x]", N.FnCons),
        ("[S -> T]", N.FnSet),
        ("[f EXCEPT ![1] = @ + 1, ![2][3] = 0, !.a = 1]", N.Except),
        ('[a |-> 1, b |-> "x"]', N.RecordCons),
        ("[a : S, b : T]", N.RecordSet),
        ("<<1, 2>>", N.Tuple),
        ("CASE a -> 1 [] b -> 2 [] OTHER -> 3", N.Case),
        ("LET f(x) == x + 1  g == 2 IN f(g)", N.Let),
        ("CHOOSE x \\in S : x > 1", N.Choose),
        ("\\A <<x, y>> \\in S : x = y", N.Quant),
        ("SUBSET S", N.Unary),
        ("UNION S", N.Unary),
        ("DOMAIN f", N.Unary),
        ("UNCHANGED <<x, y>>", N.Unchanged),
        ("ENABLED A", N.Temporal),
        ("[][Next]_vars", N.Temporal),
        ("<<Next>>_vars", N.Temporal),
        ("WF_vars(Next)", N.Temporal),
        ("SF_vars(Next)", N.Temporal),
        ("<>P", N.Temporal),
        ("P ~> Q", N.Temporal),
        ("\\A x : P", N.Unsupported),
        ("LAMBDA x : x + 1", N.Lambda),
        ("1 :> 2 @@ 3 :> 4", N.Binary),
    ],
)
def test_each_construct_parses(text, kind):
    assert isinstance(parse_expression(text), kind)


def test_except_clauses_and_paths():
    e = parse_expression("[f EXCEPT ![1] = @ + 1, ![2][3] = 0, !.a = 1]")
    assert [[k for k, _ in path] for path, _ in e.clauses] == [["idx"], ["idx", "idx"], ["fld"]]
    assert isinstance(e.clauses[0][1].left, N.At)


def test_case_arms_and_other():
    e = parse_expression("CASE a -> 1 [] b -> 2 [] OTHER -> 3")
    assert [sx(g) for g, _ in e.arms] == ["a", "b"]
    assert sx(e.other) == "3"


# -- errors -----------------------------------------------------------------------------------
def test_unsupported_construct_names_it_with_position(tmp_path):
    f = tmp_path / "U.tla"
    f.write_text("---- MODULE U ----\nA == 1\n  B == INSTANCE Foo\n====\n")
    with pytest.raises(UnsupportedConstruct) as ei:
        load_module(str(f))
    assert "INSTANCE" in str(ei.value)
    assert f"{f}:3:8:" in str(ei.value)


def test_recursive_is_unsupported(tmp_path):
    f = tmp_path / "R.tla"
    f.write_text("---- MODULE R ----\nRECURSIVE F(_)\nF(n) == 1\n====\n")
    with pytest.raises(UnsupportedConstruct) as ei:
        load_module(str(f))
    assert "RECURSIVE" in str(ei.value) and ":2:1:" in str(ei.value)


def test_syntax_error_position(tmp_path):
    f = tmp_path / "S.tla"
    f.write_text("---- MODULE S ----\nA == 1\nB == (1 + \n  2\nC == 3\n====\n")
    with pytest.raises(TlaSyntaxError) as ei:
        load_module(str(f))
    assert f"{f}:5:1:" in str(ei.value)
    assert "expected ')'" in str(ei.value)


def test_unterminated_string_position():
    with pytest.raises(TlaSyntaxError) as ei:
        tokenize('x = "abc\n', "F.tla", module=False)
    assert "F.tla:1:5:" in str(ei.value)


def test_duplicate_definition_is_an_error(tmp_path):
    f = tmp_path / "D.tla"
    f.write_text("---- MODULE D ----\nA == 1\nA == 2\n====\n")
    with pytest.raises(TlaSyntaxError, match="defined twice"):
        load_module(str(f))
