"""Lexer: TLA+ source text -> list of tokens with 1-based line and column.

Keeps: ``Token`` and ``tokenize``.  Invariants: comments (``\\* ...`` and nested
``(* ... *)``, which is where Apalache's ``@type:`` annotations live) never reach the
parser; text before the first ``---- MODULE`` line and after the closing ``====`` is not
tokenized; synonyms are normalized here, so the parser sees one spelling per operator
(``\\land`` -> ``/\\``, ``\\lnot`` and ``\\neg`` -> ``~``, ``=<`` and ``\\leq`` -> ``<=``,
``/=`` -> ``#``, ``\\union`` -> ``\\cup`` ...).  Columns count characters (a tab is one),
which is what the alignment of ``/\\`` and ``\\/`` bullets is measured in.  The last token
is always ``eof``.
"""

from __future__ import annotations

import re

from .errors import TlaSyntaxError

KEYWORDS = frozenset(
    """ASSUME ASSUMPTION AXIOM CASE CHOOSE CONSTANT CONSTANTS DOMAIN ELSE ENABLED EXCEPT
    EXTENDS IF IN INSTANCE LET LOCAL MODULE OTHER SUBSET THEN THEOREM UNCHANGED UNION
    VARIABLE VARIABLES WITH LAMBDA RECURSIVE LEMMA PROPOSITION COROLLARY PROOF BY QED
    OBVIOUS OMITTED USE HIDE DEFINE DEF HAVE TAKE WITNESS PICK SUFFICES NEW STATE ACTION
    TEMPORAL""".split()
)

# Backslash operators: spelling after the backslash -> normalized token value.
BACKSLASH_OPS = {
    "in": "\\in",
    "notin": "\\notin",
    "A": "\\A",
    "E": "\\E",
    "AA": "\\AA",
    "EE": "\\EE",
    "cup": "\\cup",
    "union": "\\cup",
    "cap": "\\cap",
    "intersect": "\\cap",
    "subseteq": "\\subseteq",
    "subset": "\\subset",
    "supseteq": "\\supseteq",
    "supset": "\\supset",
    "div": "\\div",
    "o": "\\o",
    "circ": "\\o",
    "X": "\\X",
    "times": "\\X",
    "lnot": "~",
    "neg": "~",
    "land": "/\\",
    "lor": "\\/",
    "equiv": "<=>",
    "leq": "<=",
    "geq": ">=",
    "cdot": "\\cdot",
}
# Other backslash operators TLA+ knows; they are lexed so the parser can name them.
OTHER_BACKSLASH = frozenset(
    """prec preceq succ succeq sqsubset sqsubseteq sqsupset sqsupseteq sqcup sqcap oplus
    ominus otimes oslash odot uplus star bullet bigcirc sim simeq approx cong asymp doteq
    propto wr ll gg""".split()
)

# Symbolic operators, longest first; value -> normalized value.
SYMBOLS = {
    "-+->": "-+->",
    "<=>": "<=>",
    "|->": "|->",
    "==": "==",
    "=>": "=>",
    "=<": "<=",
    "<=": "<=",
    ">=": ">=",
    "/=": "#",
    "/\\": "/\\",
    "\\/": "\\/",
    "<<": "<<",
    ">>": ">>",
    "<>": "<>",
    "[]": "[]",
    "::": "::",
    "..": "..",
    "->": "->",
    ":>": ":>",
    "~>": "~>",
    "@@": "@@",
    "|-": "|-",
    ":=": ":=",
    "++": "++",
    "**": "**",
    "//": "//",
    "^^": "^^",
    "=": "=",
    "#": "#",
    "<": "<",
    ">": ">",
    "(": "(",
    ")": ")",
    "[": "[",
    "]": "]",
    "{": "{",
    "}": "}",
    ",": ",",
    ":": ":",
    ".": ".",
    "'": "'",
    "+": "+",
    "-": "-",
    "*": "*",
    "/": "/",
    "%": "%",
    "^": "^",
    "~": "~",
    "@": "@",
    "!": "!",
    "|": "|",
    "&": "&",
    "$": "$",
    "?": "?",
    "_": "_",
}
_SYMBOL_LIST = sorted(SYMBOLS, key=len, reverse=True)

# A few Unicode spellings (TLA+ 2 allows them) -> ASCII tokens.
UNICODE = {
    "∧": "/\\",
    "∨": "\\/",
    "¬": "~",
    "⇒": "=>",
    "⇔": "<=>",
    "≜": "==",
    "∈": "\\in",
    "∉": "\\notin",
    "∀": "\\A",
    "∃": "\\E",
    "≠": "#",
    "≤": "<=",
    "≥": ">=",
    "∪": "\\cup",
    "∩": "\\cap",
    "⊆": "\\subseteq",
    "⟨": "<<",
    "⟩": ">>",
    "↦": "|->",
    "→": "->",
    "×": "\\X",
    "□": "[]",
    "◇": "<>",
    "≡": "<=>",
}

_HEADER = re.compile(r"-{4,}[ \t]*MODULE\b")
_WORD = re.compile(r"[A-Za-z0-9_]+")
_ESCAPES = {'"': '"', "\\": "\\", "n": "\n", "t": "\t", "r": "\r", "f": "\f"}


class Token:
    """One token: ``kind`` is id, num, str, op, kw, sep (a ``----`` line), end (``====``)
    or eof; ``value`` is the normalized text (an int for num)."""

    __slots__ = ("kind", "value", "line", "col")

    def __init__(self, kind: str, value, line: int, col: int):
        self.kind = kind
        self.value = value
        self.line = line
        self.col = col

    def is_op(self, value: str) -> bool:
        return self.kind == "op" and self.value == value

    def is_kw(self, value: str) -> bool:
        return self.kind == "kw" and self.value == value

    def __repr__(self) -> str:
        return f"Token({self.kind}, {self.value!r}, {self.line}:{self.col})"


def tokenize(text: str, filename: str = "<string>", module: bool = True) -> list[Token]:
    """Tokens of ``text``.  With ``module`` true, lexing starts at the first
    ``---- MODULE`` and stops after the first ``====`` outside comments."""
    pos = 0
    if module:
        m = _HEADER.search(text)
        if m is None:
            raise TlaSyntaxError("no '---- MODULE Name ----' header found", (filename, 1, 1))
        pos = m.start()
    line = text.count("\n", 0, pos) + 1
    line_start = text.rfind("\n", 0, pos) + 1
    toks: list[Token] = []
    n = len(text)

    def err(msg: str, at: int):
        raise TlaSyntaxError(msg, (filename, line, at - line_start + 1))

    while pos < n:
        c = text[pos]
        if c == "\n":
            line += 1
            pos += 1
            line_start = pos
            continue
        if c in " \t\r\f":
            pos += 1
            continue
        col = pos - line_start + 1
        if c == "\\" and text.startswith("\\*", pos):
            end = text.find("\n", pos)
            pos = n if end < 0 else end
            continue
        if c == "(" and text.startswith("(*", pos):
            depth = 0
            start = pos
            while True:
                if pos >= n:
                    err("unterminated comment", start)
                if text.startswith("(*", pos):
                    depth += 1
                    pos += 2
                elif text.startswith("*)", pos):
                    depth -= 1
                    pos += 2
                    if depth == 0:
                        break
                else:
                    if text[pos] == "\n":
                        line += 1
                        line_start = pos + 1
                    pos += 1
            continue
        if c == '"':
            start = pos
            pos += 1
            buf = []
            while True:
                if pos >= n or text[pos] == "\n":
                    err("unterminated string", start)
                ch = text[pos]
                if ch == '"':
                    pos += 1
                    break
                if ch == "\\":
                    nxt = text[pos + 1 : pos + 2]
                    if nxt not in _ESCAPES:
                        err(f"unknown escape \\{nxt} in string", pos)
                    buf.append(_ESCAPES[nxt])
                    pos += 2
                    continue
                buf.append(ch)
                pos += 1
            toks.append(Token("str", "".join(buf), line, col))
            continue
        if c == "-" and text.startswith("----", pos):
            end = pos
            while end < n and text[end] == "-":
                end += 1
            toks.append(Token("sep", "----", line, col))
            pos = end
            continue
        if c == "=" and text.startswith("====", pos):
            toks.append(Token("end", "====", line, col))
            if module:
                break
            pos += 4
            while pos < n and text[pos] == "=":
                pos += 1
            continue
        m = _WORD.match(text, pos)
        if m:
            word = m.group(0)
            end = m.end()
            if word.isdigit():
                if text.startswith(".", end) and end + 1 < n and text[end + 1].isdigit():
                    err("real numbers are not supported", pos)
                toks.append(Token("num", int(word), line, col))
            elif word in KEYWORDS:
                toks.append(Token("kw", word, line, col))
            elif word.startswith(("WF_", "SF_")):
                toks.append(Token("kw", word[:3], line, col))
                if len(word) > 3:
                    toks.append(Token("id", word[3:], line, col + 3))
            elif word == "_":
                toks.append(Token("op", "_", line, col))
            else:
                toks.append(Token("id", word, line, col))
            pos = end
            continue
        if c == "\\":
            m = re.compile(r"[A-Za-z]+").match(text, pos + 1)
            if m:
                word = m.group(0)
                if word in BACKSLASH_OPS:
                    toks.append(Token("op", BACKSLASH_OPS[word], line, col))
                    pos = m.end()
                    continue
                if word in OTHER_BACKSLASH:
                    toks.append(Token("op", "\\" + word, line, col))
                    pos = m.end()
                    continue
            if text.startswith("\\/", pos):
                toks.append(Token("op", "\\/", line, col))
                pos += 2
                continue
            toks.append(Token("op", "\\", line, col))
            pos += 1
            continue
        if c in UNICODE:
            toks.append(Token("op", UNICODE[c], line, col))
            pos += 1
            continue
        for sym in _SYMBOL_LIST:
            if text.startswith(sym, pos):
                value = SYMBOLS[sym]
                pos += len(sym)
                if value in ("]", ">>") and pos < n and text[pos] == "_":
                    value += "_"
                    pos += 1
                toks.append(Token("op", value, line, col))
                break
        else:
            err(f"unexpected character {c!r}", pos)
    toks.append(Token("eof", None, line, pos - line_start + 1))
    return toks
