"""Loading modules: a root ``.tla`` file with its EXTENDS resolved, and evaluation in it.

Keeps ``Module`` and ``load_module``.  Invariants: user modules named in EXTENDS are read
from the root module's directory (recursively, each file once); the standard modules
(Naturals, Integers, Sequences, FiniteSets, TLC, Apalache) are built in; definitions,
constants and variables of extended modules come first, LOCAL definitions of an extended
module are not visible to its extenders, and a name defined twice is an error.
``Module.instance(constants)`` gives the compile environment for one assignment of the
constants (cached), which is what evaluation and checking use.
"""

from __future__ import annotations

import os

from . import nodes as N
from .errors import TlaEvalError, TlaSyntaxError, UnsupportedConstruct
from .evaluator import ROOT, UNSET, Instance
from .parser import parse_expression, parse_module
from .stdlib import STANDARD_MODULES
from .values import fmt, from_python, sort_key


class Module:
    """A root module with everything it extends merged in."""

    def __init__(self, root: N.ModuleAst, path: str):
        self.name = root.name
        self.file = path
        self.constants: list[str] = []
        self.variables: list[str] = []
        self.definitions: dict[str, N.OpDef] = {}
        self.assumes: list[N.Node] = []
        self.modules: list[str] = []  # files merged, extended ones first
        self._instances: dict = {}

    # -- evaluation -------------------------------------------------------------------
    def instance(self, constants: dict | None = None) -> Instance:
        consts = {k: from_python(v) for k, v in (constants or {}).items()}
        for k in consts:
            if k not in self.constants:
                raise TlaEvalError(f"{k} is not a CONSTANT of module {self.name}")
        # sort_key tells FALSE/TRUE from 0/1, which Python equality does not
        key = tuple(sorted((k, sort_key(v)) for k, v in consts.items()))
        inst = self._instances.get(key)
        if inst is None:
            inst = self._instances[key] = Instance(self, consts, self.variables)
        return inst

    def _state_tuple(self, state: dict | None) -> tuple:
        state = state or {}
        for k in state:
            if k not in self.variables:
                raise TlaEvalError(f"{k} is not a VARIABLE of module {self.name}")
        return tuple(from_python(state[v]) if v in state else UNSET for v in self.variables)

    def parse(self, expr: str) -> N.Node:
        return parse_expression(expr, "<expr>")

    def evaluate(
        self,
        expr: str,
        constants: dict | None = None,
        state: dict | None = None,
        next_state: dict | None = None,
    ):
        """Value of ``expr`` (an expression text or a definition's name) with the given
        constants and current (and optionally next) state; Python dicts/lists/sets in
        them are converted to TLA+ values."""
        inst = self.instance(constants)
        node = self.parse(expr)
        s = self._state_tuple(state)
        n = self._state_tuple(next_state) if next_state is not None else None
        code = inst.compiler("value").comp(node, ROOT)
        try:
            return code.fn(s, n, ())
        except RecursionError:
            raise TlaEvalError(f"evaluation of {expr!r} recursed too deeply") from None

    def initial_states(self, init: str = "Init", constants: dict | None = None) -> list[dict]:
        """All states satisfying the initial predicate ``init`` (a name or expression)."""
        inst = self.instance(constants)
        act = inst.actions(True).act(self.parse(init))
        blank = inst.blank()
        out = []
        for n in act(blank, blank, ()):
            _check_assigned(n, self.variables, init)
            out.append(dict(zip(self.variables, n, strict=True)))
        return out

    def successors(
        self, state: dict, next: str = "Next", constants: dict | None = None
    ) -> list[tuple[str | None, dict]]:
        """``(action label, next state)`` for every way ``next`` can be taken from ``state``
        (duplicates removed, order kept)."""
        inst = self.instance(constants)
        comps = inst.actions(False).components(self.parse(next))
        s = self._state_tuple(state)
        blank = inst.blank()
        out, seen = [], set()
        for label, act in comps:
            for t in act(s, blank, ()):
                _check_assigned(t, self.variables, label or next)
                if (label, t) not in seen:
                    seen.add((label, t))
                    out.append((label, dict(zip(self.variables, t, strict=True))))
        return out

    def check_assumes(self, inst: Instance) -> None:
        comp = inst.compiler("value")
        for a in self.assumes:
            v = comp.comp(a, ROOT).fn((), None, ())
            if v is not True:
                raise TlaEvalError(f"ASSUME does not hold (it is {fmt(v)})", a.loc)

    def __repr__(self) -> str:
        return f"<Module {self.name} from {self.file}>"


def _check_assigned(n: tuple, names: list[str], action: str) -> None:
    for name, v in zip(names, n, strict=True):
        if v is UNSET:
            raise TlaEvalError(f"{action} does not assign the variable {name}")


_STD_UNSUPPORTED = frozenset(
    ["Reals", "Bags", "TLCExt", "Json", "Randomization", "Functions", "SequencesExt",
     "FiniteSetsExt", "Folds", "Variants", "Option", "IOUtils", "CSV", "Bitwise", "Graphs"]
)  # fmt: skip


def load_module(path: str) -> Module:
    """Parse the module at ``path`` and every user module it EXTENDS (same directory)."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    shown_dir = os.path.dirname(path)
    cache: dict[str, N.ModuleAst] = {}

    def read(p: str) -> N.ModuleAst:
        ap = os.path.abspath(p)
        if ap not in cache:
            with open(ap, encoding="utf-8") as fh:
                text = fh.read()
            cache[ap] = parse_module(text, p)
        return cache[ap]

    root = read(path)
    mod = Module(root, path)
    origin: dict[str, str] = {}
    done: set[str] = set()
    stack: list[str] = []

    def merge(ast: N.ModuleAst, ap: str, is_root: bool) -> None:
        if ap in done:
            return
        if ap in stack:
            raise TlaSyntaxError(f"circular EXTENDS of module {ast.name}", (ast.file, 1, 1))
        stack.append(ap)
        for name, loc in ast.extends:
            if name in STANDARD_MODULES:
                continue
            sub = os.path.join(shown_dir, name + ".tla")
            if not os.path.exists(sub):
                if name in _STD_UNSUPPORTED:
                    raise UnsupportedConstruct(f"EXTENDS the standard module {name}", loc)
                raise UnsupportedConstruct(
                    f"EXTENDS {name}: not a supported standard module and no {name}.tla in "
                    f"{directory}",
                    loc,
                )
            merge(read(sub), os.path.abspath(sub), False)
        stack.pop()
        done.add(ap)
        mod.modules.append(ast.file)
        for name, loc in ast.constants:
            if name in mod.constants:
                raise TlaSyntaxError(f"the constant {name} is declared twice", loc)
            mod.constants.append(name)
        for name, loc in ast.variables:
            if name in mod.variables:
                raise TlaSyntaxError(f"the variable {name} is declared twice", loc)
            mod.variables.append(name)
        for d in ast.definitions:
            # LOCAL definitions of extended modules stay (their users need them), but a
            # later definition of the same name replaces them.
            prev = mod.definitions.get(d.name)
            if prev is not None and not prev.local:
                raise TlaSyntaxError(
                    f"{d.name} is defined in both {origin[d.name]} and {ast.file}", d.loc
                )
            if d.name in mod.constants or d.name in mod.variables:
                raise TlaSyntaxError(f"{d.name} is already declared as a constant/variable", d.loc)
            origin[d.name] = ast.file
            mod.definitions[d.name] = d
        mod.assumes.extend(ast.assumes)

    merge(root, os.path.abspath(path), True)
    return mod
