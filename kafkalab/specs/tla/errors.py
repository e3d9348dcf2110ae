"""Errors of the TLA+ checker.

Every error carries an optional source location ``(file, line, col)`` (1-based line and
column) and renders it as ``file:line:col: message``.  ``TlaError`` is the base class;
the subclasses say which stage failed: reading the text (``TlaSyntaxError``), meeting a
construct outside the supported subset (``UnsupportedConstruct``), or evaluating an
expression (``TlaEvalError``).  The checker may add, to an evaluation error, which state it
was evaluating (``context``).
"""

from __future__ import annotations

Loc = tuple[str, int, int]


def format_loc(loc: Loc | None) -> str:
    """``file:line:col`` of a location, or an empty string when there is none."""
    if loc is None:
        return ""
    return f"{loc[0]}:{loc[1]}:{loc[2]}"


class TlaError(Exception):
    """Any error of the TLA+ tools; ``loc`` is where in the source it arose (or None)."""

    def __init__(self, message: str, loc: Loc | None = None, context: str | None = None):
        self.message = message
        self.loc = loc
        self.context = context
        super().__init__(self._render())

    def _render(self) -> str:
        where = format_loc(self.loc)
        text = f"{where}: {self.message}" if where else self.message
        if self.context:
            text = f"{text}\n{self.context}"
        return text

    def with_context(self, context: str) -> TlaError:
        """Attach (once) a description of what was being evaluated; returns self."""
        if self.context is None:
            self.context = context
            self.args = (self._render(),)
        return self

    def __str__(self) -> str:
        return self._render()


class TlaSyntaxError(TlaError):
    """The text is not a TLA+ module this parser can read."""


class UnsupportedConstruct(TlaError):
    """The module uses a TLA+ construct outside the subset this checker implements."""


class TlaEvalError(TlaError):
    """Evaluating an expression failed (outside a domain, a type error, ...)."""
