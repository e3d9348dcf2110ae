"""The README's figures stay traceable: every raw-results file the README names is
in the repository, and every entry of benchmarks/figures.py names a script that
exists, under a name no other entry uses."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def load_figures():
    spec = importlib.util.spec_from_file_location("figures", ROOT / "benchmarks" / "figures.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_every_figure_names_a_script_that_exists_once():
    figures = load_figures().FIGURES
    assert len({f.name for f in figures}) == len(figures)
    missing = [f.name for f in figures if not (ROOT / "benchmarks" / f.args[0]).is_file()]
    assert not missing, f"figures whose script is missing: {missing}"


def test_every_results_file_the_readme_names_is_committed():
    readme = (ROOT / "README.md").read_text()
    named = set(re.findall(r"benchmarks/results/([\w./*+-]+?\.(?:json|csv|txt))", readme))
    assert named, "the README names no raw results"
    missing = sorted(
        n for n in named if "*" not in n and not (ROOT / "benchmarks/results" / n).exists()
    )
    assert not missing, f"the README names raw results that are not in the repository: {missing}"
