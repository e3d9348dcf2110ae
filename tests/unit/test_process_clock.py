"""kafkalab's clock faults (kafkalab.server.clock): a process's wall clock stepped
and skewed through a file it re-reads, and a LogManager whose duties run on a
timer clock, so a wall clock stepped back does not stall its checkpoints."""

from __future__ import annotations

import pytest

from kafkalab.server import clock as clock_module
from kafkalab.server.clock import (
    ProcessClock,
    read_clock,
    reset_clock,
    skew_clock,
    step_clock,
)
from kafkalab.storage.log_config import LogConfig
from kafkalab.storage.log_manager import LogManager

HOUR_MS = 3_600_000


@pytest.fixture
def real(monkeypatch):
    """The real wall time, driven by hand (ms), and every change seen at once."""
    now = {"ms": 1_700_000_000_000.0}
    monkeypatch.setattr(clock_module, "_real_ms", lambda: now["ms"])
    monkeypatch.setattr(clock_module, "REFRESH_S", 0)
    return now


def test_a_stepped_clock_jumps_and_a_reset_one_is_real_again(tmp_path, real):
    process = ProcessClock(tmp_path)
    assert process.wall_ms() == real["ms"]
    step_clock(tmp_path, -HOUR_MS)
    assert process.wall_ms() == real["ms"] - HOUR_MS
    real["ms"] += 1000
    assert process.wall_ms() == real["ms"] - HOUR_MS  # then runs at real speed
    step_clock(tmp_path, 500)
    assert read_clock(tmp_path)["offset_ms"] == -HOUR_MS + 500
    reset_clock(tmp_path)
    assert process.wall_ms() == real["ms"]
    reset_clock(tmp_path)  # nothing to reset: fine


def test_a_skewed_clock_runs_fast_from_where_it_was_without_a_jump(tmp_path, real):
    process = ProcessClock(tmp_path)
    step_clock(tmp_path, 1000)
    before = process.wall_ms()
    skew_clock(tmp_path, 2.0)
    assert process.wall_ms() == before  # no jump when the rate changes
    real["ms"] += 10_000
    assert process.wall_ms() == before + 20_000
    skew_clock(tmp_path, 1.0)  # real speed again, the drift kept
    real["ms"] += 10_000
    assert process.wall_ms() == before + 30_000
    with pytest.raises(ValueError, match="rate must be positive"):
        skew_clock(tmp_path, 0)


def test_a_process_clock_rereads_the_file_only_when_it_changed(tmp_path, real, monkeypatch):
    process = ProcessClock(tmp_path)
    process.wall_ms()
    reads = []
    original = clock_module.read_clock
    monkeypatch.setattr(clock_module, "read_clock", lambda d: reads.append(d) or original(d))
    process.wall_ms()
    process.wall_ms()
    assert reads == []  # no file, unchanged
    step_clock(tmp_path, 5)
    process.wall_ms()
    process.wall_ms()
    assert len(reads) == 2  # once by step_clock itself, once by the process


def test_log_manager_duties_run_on_the_timer_clock_when_the_wall_clock_steps_back(tmp_path):
    wall = {"ms": 10 * HOUR_MS}
    timer = {"ms": 0}
    manager = LogManager(
        [tmp_path],
        LogConfig(),
        checkpoint_interval_ms=1000,
        retention_check_interval_ms=10**12,
        cleaner_enable=False,
        clock=lambda: wall["ms"],
        timer_clock=lambda: timer["ms"],
    )
    try:
        assert "checkpoint" not in manager.tick()
        wall["ms"] -= HOUR_MS  # the wall clock steps an hour back
        timer["ms"] += 1000  # a second passes
        assert "checkpoint" in manager.tick()
    finally:
        manager.shutdown()


def test_without_a_timer_clock_log_manager_duties_follow_its_clock(tmp_path):
    now = {"ms": 0}
    manager = LogManager(
        [tmp_path],
        LogConfig(),
        checkpoint_interval_ms=1000,
        retention_check_interval_ms=10**12,
        cleaner_enable=False,
        clock=lambda: now["ms"],
    )
    try:
        now["ms"] += 1000
        assert "checkpoint" in manager.tick()
    finally:
        manager.shutdown()
