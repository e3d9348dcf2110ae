"""The soak's CI slice: six faults of every kind on a live cluster under an
idempotent acks=all load with a consumer reading along; the verdict must be
valid (benchmarks/soak.py runs the full 100)."""

from __future__ import annotations

import pytest

from kafkalab.cluster.soak import FAULT_KINDS, percentile, run_soak, schedule

#: Seed 1's first six faults cover every kind (two leader kills among them).
SLICE_SEED, SLICE_FAULTS = 1, 6


def test_the_schedule_is_the_seeds_and_the_slice_has_every_kind():
    assert schedule(SLICE_FAULTS, SLICE_SEED) == schedule(SLICE_FAULTS, SLICE_SEED)
    assert set(schedule(SLICE_FAULTS, SLICE_SEED)) == set(FAULT_KINDS)
    assert schedule(50, 0, ["leader-kill"]) == ["leader-kill"] * 50
    with pytest.raises(ValueError, match="unknown fault kind"):
        schedule(1, 0, ["meteor"])


def test_percentile_is_the_nearest_rank():
    values = list(range(1, 101))
    assert (percentile(values, 50), percentile(values, 99), percentile(values, 100)) == (
        50,
        99,
        100,
    )
    assert percentile([7.0], 99) == 7.0 and percentile([], 50) is None


def test_a_slice_of_the_soak_loses_nothing(tmp_path):
    lines: list[str] = []
    report = run_soak(faults=SLICE_FAULTS, seed=SLICE_SEED, base_dir=tmp_path, log=lines.append)
    table = report.table() + "\n" + "\n".join(lines)
    assert report.error is None, table
    assert report.survived == SLICE_FAULTS, table
    assert set(report.by_kind) == set(FAULT_KINDS), table  # every kind was applied
    assert report.verdict is not None and report.verdict.valid, table
    assert report.acknowledged > 0 and report.failed_sends == 0, table
    # Every leader kill was followed by a record acknowledged by the successor.
    assert len(report.failovers_ms) == report.by_kind["leader-kill"], table
    # The consumer read every record, in order, and all three replicas hold the
    # same bytes below the high watermark.
    assert report.read_all and not report.read_gaps, table
    assert report.replicas_compared == 3 and report.batches_compared > 0, table
    assert report.byte_identical, table
    assert report.valid, table
