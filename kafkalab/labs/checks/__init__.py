"""Checks for the labs' exercises: an answer in, a verdict that says why out.

An exercise in a notebook is three cells, tagged in their metadata:

- ``exercise``: the student's cell. It starts with the placeholder ``...``
  (Python's Ellipsis) where the answer goes: ``hw = ...``, or a function whose
  body is ``...``.
- ``check``: calls one function of a module here with the answer and the live
  objects, and shows its :class:`Verdict`: ``right: ...`` or ``not yet: ...``
  with the reason. A placeholder left in place is "not yet" too, and says so.
- ``solution``: a worked answer, its source collapsed (JupyterLab's
  ``jupyter.source_hidden``), one click away. It ends with
  ``check(...).require()``, which raises :class:`NotYet` if the worked answer
  were wrong, so running every notebook top to bottom (nbval, in CI) proves
  each solution against its check.

"Predict, then run" cells are lighter: the student writes a prediction before
an experiment and :func:`predicted` compares it with what happened. A
prediction is never wrong enough to stop a notebook.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "UNANSWERED",
    "NotYet",
    "Verdict",
    "answered",
    "compare",
    "predicted",
    "run_student_code",
    "verdict",
]

_UNANSWERED = (
    "replace the ... in the exercise cell with your answer and run it, then this check "
    "again (the collapsed cell below this one holds a worked solution)"
)


class NotYet(AssertionError):
    """A solution cell's answer did not pass its check (raised by Verdict.require)."""

    def _render_traceback_(self) -> list[str]:
        # IPython shows this instead of a traceback: the reason is the whole story.
        return [str(self)]


@dataclass(frozen=True)
class Verdict:
    """The outcome of one check: right or not, and a sentence saying why."""

    right: bool
    why: str

    def __bool__(self) -> bool:
        return self.right

    def __str__(self) -> str:
        return ("right: " if self.right else "not yet: ") + self.why

    __repr__ = __str__

    def _repr_html_(self) -> str:
        colour, mark = ("#1b7f3b", "✔") if self.right else ("#b3261e", "✘")
        return (
            f'<div style="border-left:4px solid {colour};padding:4px 10px;'
            f'color:{colour}"><b>{mark} {"right" if self.right else "not yet"}:</b> '
            f"{html.escape(self.why)}</div>"
        )

    def require(self) -> Verdict:
        """Raise NotYet unless right; return self so a cell still shows the verdict."""
        if not self.right:
            raise NotYet(str(self))
        return self


#: The verdict of an answer still left as the exercise's placeholder ``...``.
UNANSWERED = Verdict(False, _UNANSWERED)


def answered(*answers: Any) -> bool:
    """False while any answer is still the exercise's placeholder ``...``, also
    as a value of a dict answer (``{"acks": ..., ...}``)."""
    for answer in answers:
        values = answer.values() if isinstance(answer, Mapping) else (answer,)
        if any(value is ... for value in values):
            return False
    return True


def verdict(right: bool, why_right: str, why_not: str) -> Verdict:
    """The verdict of a condition, with the sentence for each outcome."""
    return Verdict(True, why_right) if right else Verdict(False, why_not)


def compare(answer: Any, expected: Any, *, what: str, why: str, hint: str = "") -> Verdict:
    """An answer against the value worked out from the live objects.

    ``what`` names the quantity ("the high watermark"); ``why`` is the reason
    the expected value is what it is, shown with a right answer so a lucky
    guess teaches too. A wrong answer gets ``hint`` (a nudge towards the rule,
    without the value; ``why`` when there is none): the solution cell is the
    place that gives the answer away.
    """
    if not answered(answer):
        return UNANSWERED
    if answer == expected:
        return Verdict(True, f"{what} is {expected!r}: {why}")
    return Verdict(False, f"{what} is not {answer!r}: {hint or why}")


def run_student_code(function: Callable[..., Any], *args: Any) -> tuple[Any, Verdict | None]:
    """Call the student's function; a placeholder or a crash becomes a verdict.

    Returns ``(result, None)`` when the call returned, else ``(None, verdict)``
    with what went wrong, so a check never ends in the student's traceback.
    """
    try:
        result = function(*args)
    except NotImplementedError:
        return None, UNANSWERED
    except Exception as exc:  # the student's code, any mistake at all
        return None, Verdict(False, f"your code raised {type(exc).__name__}: {exc}")
    if result is None or result is ...:
        return None, Verdict(False, _UNANSWERED + "; your function returned nothing")
    return result, None


@dataclass(frozen=True)
class Prediction:
    """A prediction set beside what happened (never stops a notebook)."""

    prediction: Any
    observed: Any
    what: str
    why: str

    @property
    def made(self) -> bool:
        return answered(self.prediction)

    @property
    def held(self) -> bool:
        return self.made and self.prediction == self.observed

    def __str__(self) -> str:
        if not self.made:
            return (
                f"no prediction written; {self.what} was {self.observed!r}: {self.why} "
                "(next time, write your guess in the cell before the experiment)"
            )
        if self.held:
            return f"as you predicted, {self.what} was {self.observed!r}: {self.why}"
        return (
            f"you predicted {self.what} would be {self.prediction!r}; it was "
            f"{self.observed!r}: {self.why}"
        )

    __repr__ = __str__

    def _repr_html_(self) -> str:
        colour = "#1b7f3b" if self.held else ("#8a6d00" if self.made else "#555")
        return (
            f'<div style="border-left:4px solid {colour};padding:4px 10px">'
            f"<b>prediction:</b> {html.escape(str(self))}</div>"
        )


def predicted(prediction: Any, observed: Any, *, what: str, why: str) -> Prediction:
    """Compare a prediction written before an experiment with what it showed."""
    return Prediction(prediction, observed, what, why)
