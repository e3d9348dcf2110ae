"""Checks for lab 03 part 5 (classifying the anomalies of settings known to lose):
which anomalies the Jepsen-grade checker (kafkalab.cluster.checker) names for each
bad setting, and which records a crashed auto-committing consumer lost.

Each check works its answer out from the run's history, with the checker itself."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkalab.labs.checks import UNANSWERED, Verdict, answered

__all__ = ["classified", "crash_lost"]

#: Why each setting shows what it shows (the right answer's explanation).
_WHY = {
    "lost-write": "acknowledged, below the highest offset some ok poll read, yet no ok poll read it",
    "inconsistent-offsets": "two values at one offset: the acknowledgement said one, a poll the other",
    "unseen": "acknowledged, and no ok poll had read it by the end",
}


def _names(answer: Any) -> set[str] | None:
    if isinstance(answer, str) or not hasattr(answer, "__iter__"):
        return None
    return {str(name) for name in answer}


def classified(answer: Any, runs: Mapping[str, Any]) -> Verdict:
    """``answer``: {run name: the set of anomaly names the checker finds in its
    history}; ``runs``: the notebook's runs by the same names
    (kafkalab.cluster.losing_settings.Run). Right when every set is exactly what
    the verdict names."""
    if not answered(answer):
        return UNANSWERED
    if not isinstance(answer, Mapping) or set(answer) != set(runs):
        return Verdict(False, f"answer a dict with one entry per run: {sorted(runs)}")
    for name, run in runs.items():
        mine = _names(answer[name])
        if mine is None:
            return Verdict(False, f"{name}: answer a set of anomaly names, e.g. {{'unseen'}}")
        found = set(run.verdict().anomalies)
        if mine != found:
            missing, extra = sorted(found - mine), sorted(mine - found)
            parts = []
            if missing:
                parts.append(
                    f"the checker also names {len(missing)} more "
                    "(what did the writes after the failure do to the offsets, and did a "
                    "poll read past what was lost?)"
                )
            if extra:
                parts.append(f"it does not name {extra}")
            return Verdict(False, f"{name}: " + "; ".join(parts))
    lines = [f"{name}: {', '.join(sorted(run.verdict().anomalies))}" for name, run in runs.items()]
    used = sorted({a for run in runs.values() for a in run.verdict().anomalies})
    reasons = "; ".join(f"{a}: {_WHY[a]}" for a in used if a in _WHY)
    return Verdict(True, " | ".join(lines) + f" ({reasons})")


def _value(v: Any) -> bytes:
    return v.encode() if isinstance(v, str) else bytes(v)


def crash_lost(answer: Any, run: Any) -> Verdict:
    """``answer``: the values the crashed consumer's last poll was handed that no ok
    poll ever read (a collection of bytes or str); ``run``: the auto-commit run.
    Worked out by the checker: its lost-write cases."""
    if not answered(answer):
        return UNANSWERED
    if answer is None or isinstance(answer, (str, bytes, int)):
        return Verdict(False, "answer a collection (a set or list) of record values")
    lost = {case["value"] for case in run.verdict().anomalies.get("lost-write", [])}
    mine = {_value(v) for v in answer}
    if mine == lost:
        readers = sorted(
            {case["max reader"][1] for case in run.verdict().anomalies.get("lost-write", [])}
        )
        return Verdict(
            True,
            f"{len(lost)} record(s): handed to c0's last poll, which never finished (info), "
            f"and committed by the client in the background; {', '.join(readers)} resumed "
            "from the committed offset, past them. lost-write: no ok poll read them, though "
            "one read further",
        )
    if mine - lost:
        return Verdict(
            False,
            f"{len(mine - lost)} of yours were read by an ok poll (or never polled at all): "
            "look for values in the info poll and in no ok poll",
        )
    return Verdict(
        False,
        f"{len(lost - mine)} more: every value of c0's info poll that no ok poll read "
        "(op.type, op.reads() of run.history.ops)",
    )
