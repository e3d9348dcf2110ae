"""A broker's clock, stepped and skewed on purpose (kafkalab's clock faults, after
Jepsen's clock nemesis; not a Kafka feature).

A process reads wall time through `ProcessClock.wall_ms()`: the real time, plus an
offset, plus a drift that grows at `rate - 1` ms per real ms since it was set.

    step   the clock jumps by `delta_ms` (an NTP step, a VM resumed)
    skew   the clock runs at `rate` times real speed from now on (a bad crystal)

Wall time is for timestamps, as in Kafka: a record's LogAppendTime, a segment's
roll and retention times, the time index. Timers are not: they run on
`monotonic_ms()` (Kafka's BrokerHeartbeatManager and its other timers read
System.nanoTime), so a broker whose clock steps an hour back keeps its fetch
sessions, its ISR lag and its session with the controller, and the controller's
session timers do not fence anyone when its own clock moves.

The state lives in `<log dir>/clock.json` (beside link-faults.json:
`{"offset_ms": -3600000, "rate": 1.0, "since_ms": <real ms when the rate was set>}`),
written by `LocalCluster.clock_step`/`clock_skew` or `kafkalab cluster clock`, and
re-read when its modification time changes (looked at no more than every
REFRESH_S of monotonic time).
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

CLOCK_FILE = "clock.json"
REFRESH_S = 0.05
log = logging.getLogger(__name__)


def monotonic_ms() -> int:
    """The clock for timers: never steps, never skews."""
    return int(time.monotonic() * 1000)


def _real_ms() -> float:
    return time.time() * 1000


def read_clock(log_dir: Path) -> dict:
    """{"offset_ms", "rate", "since_ms"}; the real clock's when there is no file."""
    try:
        faults = json.loads((Path(log_dir) / CLOCK_FILE).read_text())
    except FileNotFoundError:
        faults = {}
    return {
        "offset_ms": float(faults.get("offset_ms", 0)),
        "rate": float(faults.get("rate", 1.0)),
        "since_ms": float(faults.get("since_ms", 0)),
    }


def _wall_ms(state: dict, real_ms: float) -> float:
    drift = (real_ms - state["since_ms"]) * (state["rate"] - 1) if state["rate"] != 1 else 0
    return real_ms + state["offset_ms"] + drift


def _write(log_dir: Path, state: dict) -> None:
    tmp = Path(log_dir) / (CLOCK_FILE + ".tmp")
    tmp.write_text(json.dumps(state))
    os.replace(tmp, Path(log_dir) / CLOCK_FILE)


def step_clock(log_dir: Path, delta_ms: float) -> None:
    """Step the clock by `delta_ms` (negative: back)."""
    state = read_clock(log_dir)
    state["offset_ms"] += delta_ms
    _write(log_dir, state)


def skew_clock(log_dir: Path, rate: float) -> None:
    """Run the clock at `rate` times real speed from now on (1.0: at real speed);
    the drift gathered so far is kept as an offset, so the clock does not jump."""
    if rate <= 0:
        raise ValueError(f"a clock runs forward: rate must be positive, not {rate}")
    state = read_clock(log_dir)
    now = _real_ms()
    state["offset_ms"] = _wall_ms(state, now) - now
    state["rate"], state["since_ms"] = float(rate), now
    _write(log_dir, state)


def reset_clock(log_dir: Path) -> None:
    """The real clock again."""
    try:
        (Path(log_dir) / CLOCK_FILE).unlink()
    except FileNotFoundError:
        pass


class ProcessClock:
    """A process's wall clock, as `<log dir>/clock.json` says; `wall_ms()` is what
    its logs stamp records with."""

    def __init__(self, log_dir: Path) -> None:
        self.path = Path(log_dir) / CLOCK_FILE
        self.state = {"offset_ms": 0.0, "rate": 1.0, "since_ms": 0.0}
        self._mtime: int | None = None
        self._checked = float("-inf")

    def refresh(self) -> None:
        now = time.monotonic()
        if now - self._checked < REFRESH_S:
            return
        self._checked = now
        try:
            mtime = self.path.stat().st_mtime_ns
        except FileNotFoundError:
            mtime = None
        if mtime == self._mtime:
            return
        self._mtime = mtime
        self.state = read_clock(self.path.parent)
        log.info(
            "clock faults: offset %+d ms, rate %s", self.state["offset_ms"], self.state["rate"]
        )

    def wall_ms(self) -> int:
        self.refresh()
        return int(_wall_ms(self.state, _real_ms()))


__all__ = [
    "CLOCK_FILE",
    "ProcessClock",
    "monotonic_ms",
    "read_clock",
    "reset_clock",
    "skew_clock",
    "step_clock",
]
