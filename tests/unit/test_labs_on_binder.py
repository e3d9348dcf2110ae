"""benchmarks/labs_on_binder.py picks the notebooks --only names and names its
results file after them, so a partial run never overwrites a full one."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def load_labs_on_binder():
    spec = importlib.util.spec_from_file_location(
        "labs_on_binder", ROOT / "benchmarks" / "labs_on_binder.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


NOTEBOOKS = sorted((ROOT / "labs").glob("*/*.ipynb"))


def names(paths: list[Path]) -> list[str]:
    return [str(path.relative_to(ROOT / "labs")) for path in paths]


def test_without_only_every_notebook_runs() -> None:
    assert load_labs_on_binder().selected(NOTEBOOKS, []) == NOTEBOOKS


def test_one_only_picks_the_notebooks_whose_path_contains_it() -> None:
    picked = names(load_labs_on_binder().selected(NOTEBOOKS, ["05_transactions/05"]))
    assert picked == ["05_transactions/05_transaction_versions.ipynb"]


def test_several_only_pick_the_notebooks_matching_any_of_them_in_order() -> None:
    module = load_labs_on_binder()
    picked = names(module.selected(NOTEBOOKS, ["09_kraft/", "03_replication/04"]))
    assert picked[0] == "03_replication/04_operating_through_a_failure.ipynb"
    assert picked[1:] == names(module.selected(NOTEBOOKS, ["09_kraft/"]))
    assert len(picked) > 1
    assert module.selected(NOTEBOOKS, ["no such lab", "nor this"]) == []


def test_the_results_file_names_every_pattern() -> None:
    name = load_labs_on_binder().results_name
    assert name("ci", 1, "abc1234", []) == "labs-ci-1cpu-abc1234.json"
    assert (
        name("ci", 1, "abc1234", ["03_replication"]) == "labs-ci-1cpu-abc1234-03_replication.json"
    )
    assert (
        name("ci", 1, "abc1234", ["03_replication/04", "09_kraft/"])
        == "labs-ci-1cpu-abc1234-03_replication-04+09_kraft.json"
    )


def test_a_process_is_the_notebooks_only_if_it_carries_that_notebooks_token() -> None:
    # A broker of another job on the machine runs the same command as a lab's:
    # only the token the notebook's kernel passed down tells a leftover apart.
    module = load_labs_on_binder()
    environment = {k: v for k, v in os.environ.items() if k != module.RUN_MARKER}
    processes = {
        token: subprocess.Popen(
            ["sleep", "30"],
            env=environment if token is None else {**environment, module.RUN_MARKER: token},
        )
        for token in (None, "1-1", "1-2")
    }
    try:
        assert module.started_under(processes["1-1"].pid, "1-1")
        assert not module.started_under(processes["1-2"].pid, "1-1")
        assert not module.started_under(processes[None].pid, "1-1")
    finally:
        for process in processes.values():
            process.kill()
            process.wait()
    assert not module.started_under(processes["1-1"].pid, "1-1")  # gone: not left running
