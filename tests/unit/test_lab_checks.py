"""The verdicts every lab exercise is checked with (kafkalab.labs.checks)."""

import pytest

from kafkalab.labs.checks import (
    UNANSWERED,
    NotYet,
    answered,
    compare,
    predicted,
    run_student_code,
    verdict,
)


def test_a_placeholder_is_not_yet_and_says_what_to_do() -> None:
    v = compare(..., 3, what="the high watermark", why="the slowest ISR member's LEO")
    assert not v
    assert str(v).startswith("not yet: replace the ...")
    assert "solution" in str(v)


def test_a_wrong_answer_is_not_yet_with_the_hint_and_without_the_value() -> None:
    v = compare(2, 3, what="the high watermark", why="min LEO is 3", hint="take the minimum")
    assert not v
    assert str(v) == "not yet: the high watermark is not 2: take the minimum"
    assert "3" not in str(v)


def test_a_right_answer_says_why() -> None:
    v = compare(3, 3, what="the high watermark", why="min LEO over the ISR")
    assert v and str(v) == "right: the high watermark is 3: min LEO over the ISR"
    assert "right" in v._repr_html_()


def test_require_raises_not_yet_for_a_wrong_answer_and_returns_a_right_one() -> None:
    with pytest.raises(NotYet, match="not yet: no"):
        verdict(False, "yes", "no").require()
    right = verdict(True, "yes", "no")
    assert right.require() is right
    # IPython shows the reason alone, not a traceback.
    assert NotYet("not yet: no")._render_traceback_() == ["not yet: no"]


def test_answered_sees_the_placeholder_anywhere() -> None:
    assert answered(1, "a", None, 0)
    assert not answered(1, ...)


def test_student_code_that_is_a_placeholder_crashes_or_returns_nothing_is_not_yet() -> None:
    def placeholder(): ...

    def raises():
        raise NotImplementedError

    def crashes():
        return 1 // 0

    for function in (placeholder, raises):
        result, v = run_student_code(function)
        assert result is None and not v and "replace the ..." in str(v)
    result, v = run_student_code(crashes)
    assert result is None and "ZeroDivisionError" in str(v)
    assert run_student_code(lambda x: x + 1, 1) == (2, None)


def test_a_prediction_compares_and_never_fails() -> None:
    assert "no prediction written" in str(predicted(..., 3, what="the HW", why="w"))
    assert predicted(3, 3, what="the HW", why="w").held
    missed = predicted(2, 3, what="the HW", why="w")
    assert missed.made and not missed.held
    assert str(missed) == "you predicted the HW would be 2; it was 3: w"


def test_a_dict_answer_with_a_placeholder_value_is_unanswered() -> None:
    assert not answered({"acks": "all", "min.insync.replicas": ...})
    assert answered({"acks": "all", "min.insync.replicas": 2})
    assert compare({"a": ...}, {"a": 1}, what="x", why="y") is UNANSWERED
