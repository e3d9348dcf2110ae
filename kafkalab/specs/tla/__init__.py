"""A model checker for a subset of TLA+, in pure Python: parse the project's ``.tla`` specs
and check safety invariants by breadth-first search (like TLC), writing counterexamples
in Apalache's ITF format.

Public API: ``check`` -> ``CheckResult``; ``load_module`` -> ``Module`` (``evaluate``,
``initial_states``, ``successors``); ``write_itf`` / ``read_itf``; errors ``TlaError``,
``TlaSyntaxError``, ``UnsupportedConstruct``, ``TlaEvalError``.  Values: see ``values``.
"""

from .checker import CheckResult, check, solve_constants
from .errors import TlaError, TlaEvalError, TlaSyntaxError, UnsupportedConstruct
from .itf import ItfError, read_itf, value_from_itf, value_to_itf, write_itf
from .module import Module, load_module
from .values import Fn, fmt, from_python, make_fn

__all__ = [
    "CheckResult",
    "Fn",
    "ItfError",
    "Module",
    "TlaError",
    "TlaEvalError",
    "TlaSyntaxError",
    "UnsupportedConstruct",
    "check",
    "fmt",
    "from_python",
    "load_module",
    "make_fn",
    "read_itf",
    "solve_constants",
    "value_from_itf",
    "value_to_itf",
    "write_itf",
]
