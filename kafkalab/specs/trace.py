"""Counterexample traces (ITF, from Apalache or the built-in checker), loaded as
plain Python:

    trace = load_trace("violation.itf.json")      # or an ITF dict

Tables and pictures of a trace are in kafkalab.viz.traces; the names of its
steps in kafkalab.specs.trace_actions.

Values become plain Python: records and functions -> dict, sequences -> list,
sets -> sorted list.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from kafkalab.specs.tla import read_itf
from kafkalab.specs.tla.itf import itf_from_json
from kafkalab.specs.tla.values import Fn


def plain(value):
    """A TLA+ value as plain Python."""
    if isinstance(value, Fn):
        return {k: plain(v) for k, v in value.d.items()}
    if isinstance(value, tuple):
        return [plain(v) for v in value]
    if isinstance(value, frozenset):
        return sorted((plain(v) for v in value), key=repr)
    return value


@dataclass
class Trace:
    variables: list[str]
    states: list[dict]  # plain Python, one dict per state
    actions: list[str | None] = field(default_factory=list)
    meta: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.states)


def load_trace(source: str | Path | dict) -> Trace:
    itf = itf_from_json(source) if isinstance(source, dict) else read_itf(source)
    actions = [m.get("action") for m in itf.get("state_meta", [])]
    return Trace(
        list(itf["vars"]),
        [{k: plain(v) for k, v in s.items()} for s in itf["states"]],
        actions or [None] * len(itf["states"]),
        dict(itf.get("meta", {})),
    )
