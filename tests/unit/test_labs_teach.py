"""Every lab notebook teaches: goals, time and prerequisites up front; exercises
with a check and a hidden, self-checking solution; predictions before experiments
on a cluster. (nbval runs the notebooks; this reads their cells.)

The conventions are written out in kafkalab/labs/checks/__init__.py and labs/README.md.
"""

import json
import re
from pathlib import Path

import pytest

LABS = Path(__file__).resolve().parents[2] / "labs"
NOTEBOOKS = sorted(LABS.glob("*/*.ipynb"))


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text())["cells"]


def _source(cell: dict) -> str:
    source = cell["source"]
    return source if isinstance(source, str) else "".join(source)


def _tags(cell: dict) -> set[str]:
    return set(cell.get("metadata", {}).get("tags", []))


def _id(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


def test_there_are_lab_notebooks() -> None:
    assert len(NOTEBOOKS) >= 17


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_id)
def test_the_first_cell_states_goals_time_and_prerequisites(path: Path) -> None:
    first = _cells(path)[0]
    assert first["cell_type"] == "markdown"
    text = _source(first)
    assert "**Learning goals**" in text, "a list of what the student will be able to do"
    time = re.search(r"\*\*Time\*\*(.*)", text)
    assert time, "a line '**Time**: about N min at `full` scale, M min at `ci` (measured ...)'"
    assert re.search(r"\d+\s*(s|min).*`full`", time.group(1)), time.group(1)
    assert re.search(r"\d+\s*(s|min).*`ci`", time.group(1)), time.group(1)
    assert "**Before you start**" in text, "what to have done first"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_id)
def test_exercises_have_a_check_then_a_hidden_self_checking_solution(path: Path) -> None:
    code = [c for c in _cells(path) if c["cell_type"] == "code"]
    exercises = [i for i, c in enumerate(code) if "exercise" in _tags(c)]
    assert exercises, "every lab notebook has at least one exercise"
    for i in exercises:
        exercise, check, solution = code[i], code[i + 1], code[i + 2]
        where = _source(exercise)[:80]
        assert "..." in _source(exercise), f"the exercise starts with a placeholder: {where}"
        assert "check" in _tags(check), f"the cell after an exercise is its check: {where}"
        assert "checks" in _source(check) and ".require()" not in _source(check), where
        assert "solution" in _tags(solution), f"then the solution: {where}"
        assert solution["metadata"].get("jupyter", {}).get("source_hidden") is True, where
        assert ".require()" in _source(solution), f"the solution proves itself: {where}"
    for i, cell in enumerate(code):
        if _tags(cell) & {"check", "solution"}:
            assert i - 1 in exercises or i - 2 in exercises, _source(cell)[:80]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_id)
def test_experiments_on_a_cluster_are_predicted_first(path: Path) -> None:
    cells = _cells(path)
    if not any("LocalCluster(" in _source(c) for c in cells if c["cell_type"] == "code"):
        pytest.skip("no cluster in this notebook")
    predictions = [i for i, c in enumerate(cells) if "prediction" in _tags(c)]
    assert predictions, "a cell tagged 'prediction' before an experiment on the cluster"
    for i in predictions:
        assert "..." in _source(cells[i]), "a prediction starts as the placeholder ..."
        later = "".join(_source(c) for c in cells[i + 1 :])
        assert "predicted(" in later, "a later cell compares it with what happened"
