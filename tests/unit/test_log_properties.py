"""Property tests: the log behaves like a list of records, through rolls, retention,
truncation, clean reopens and crashes with torn or corrupt unflushed tails."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kafkalab.records.memory_records import SimpleRecord, build_batch, iter_batches
from kafkalab.storage.log_config import LogConfig
from kafkalab.storage.unified_log import UnifiedLog

CONFIG = LogConfig(
    segment_bytes=600, index_interval_bytes=150, segment_index_bytes=8 * 16, retention_ms=-1
)


class Clock:
    now = 1_000_000

    def __call__(self) -> int:
        return self.now


def read_all(log: UnifiedLog) -> list[tuple[int, bytes]]:
    out: list[tuple[int, bytes]] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 333).read_bytes()  # small reads cross batch ends
        got = [(r.offset, r.value) for b in iter_batches(data) for r in b.records]
        assert got, f"no progress at offset {offset}"
        out += [(o, v) for o, v in got if o >= offset]
        offset = got[-1][0] + 1
    return out


class LogMachine(RuleBasedStateMachine):
    """Model: the list of (offset, value) the log should hold, its start and end."""

    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="kafkalab-prop-"))
        self.dir = self.tmp / "p-0"
        self.clock = Clock()
        self.log = UnifiedLog(self.dir, CONFIG, clock=self.clock)
        self.model: list[tuple[int, bytes]] = []
        self.next_value = 0

    def teardown(self) -> None:
        self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def _value(self, size: int) -> bytes:
        self.next_value += 1
        return (str(self.next_value).encode() + b"-") * size

    @rule(count=st.integers(1, 4), size=st.integers(1, 40))
    def append(self, count: int, size: int) -> None:
        values = [self._value(size) for _ in range(count)]
        info = self.log.append_as_leader(build_batch([SimpleRecord(v) for v in values]))
        self.model += [(info.first_offset + i, v) for i, v in enumerate(values)]
        self.clock.now += 10

    @rule()
    def roll(self) -> None:
        self.log.roll()

    @rule()
    def flush(self) -> None:
        self.log.flush()

    @rule(keep=st.integers(0, 2000))
    def retention_by_bytes(self, keep: int) -> None:
        self.log.update_high_watermark(self.log.log_end_offset)
        self.log.config = LogConfig(**{**_fields(CONFIG), "retention_bytes": keep})
        self.log.delete_old_segments()
        self.log.config = CONFIG
        self.model = [(o, v) for o, v in self.model if o >= self.log.log_start_offset]

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def truncate(self, data) -> None:
        offsets = [o for o, _ in self.model] + [self.log.log_end_offset]
        # Truncation points are batch boundaries (what a follower truncates to).
        boundaries = sorted({self.log.log_start_offset, *self._batch_starts(), offsets[-1]})
        target = data.draw(st.sampled_from(boundaries))
        self.log.truncate_to(target)
        self.model = [(o, v) for o, v in self.model if o < target]

    def _batch_starts(self) -> list[int]:
        starts = []
        for segment in self.log.segments:
            starts += [h.base_offset for _, h in segment.log.batch_headers(0)]
        return starts

    @rule()
    def clean_reopen(self) -> None:
        start, point = self.log.log_start_offset, self.log.recovery_point
        self.log.close()
        self.log = UnifiedLog(
            self.dir,
            CONFIG,
            log_start_offset=start,
            recovery_point=point,
            clean_shutdown=True,
            clock=self.clock,
        )

    @rule(damage=st.sampled_from(["tear", "flip", "garbage", "none"]), where=st.floats(0, 1))
    def crash(self, damage: str, where: float) -> None:
        """Crash: the files as they are (indexes untrimmed), then damage only bytes
        that were never flushed; reopening must keep every flushed record."""
        start, point = self.log.log_start_offset, self.log.recovery_point
        flushed = [(o, v) for o, v in self.model if o < point]
        snapshot = self.tmp / "crash"
        shutil.copytree(self.dir, snapshot)
        flushed_pos = self.log.offset_metadata(max(point, start))
        self.log.close()
        shutil.rmtree(self.dir)
        snapshot.rename(self.dir)
        active = self.dir / f"{flushed_pos.segment_base_offset:020d}.log"
        data = bytearray(active.read_bytes())
        unflushed = len(data) - flushed_pos.relative_position_in_segment
        if unflushed > 0 and damage != "none":
            cut = flushed_pos.relative_position_in_segment + int(where * (unflushed - 1))
            if damage == "tear":
                data = data[: cut + 1]
            elif damage == "flip":
                data[cut] ^= 0xFF
            else:
                data[cut:] = b"\x00\x07" * ((len(data) - cut) // 2)
            active.write_bytes(bytes(data))
            for later in self.dir.glob("*.log"):  # later segments hold unflushed data too
                if int(later.stem) > flushed_pos.segment_base_offset:
                    later.write_bytes(later.read_bytes()[: len(later.read_bytes()) // 2])
        self.log = UnifiedLog(
            self.dir, CONFIG, log_start_offset=start, recovery_point=point, clock=self.clock
        )
        survived = read_all(self.log)
        assert survived[: len(flushed)] == flushed, "a flushed record was lost"
        assert survived == self.model[: len(survived)], "recovery produced a record never written"
        self.model = survived

    @invariant()
    def log_matches_model(self) -> None:
        assert read_all(self.log) == self.model
        end = self.model[-1][0] + 1 if self.model else self.log.log_start_offset
        assert self.log.log_end_offset == end
        assert self.log.log_start_offset <= self.log.high_watermark <= self.log.log_end_offset
        assert self.log.recovery_point <= self.log.log_end_offset
        bases = [s.base_offset for s in self.log.segments]
        assert bases == sorted(set(bases))


def _fields(config: LogConfig) -> dict:
    return {f: getattr(config, f) for f in config.__dataclass_fields__}


TestLogMachine = LogMachine.TestCase
TestLogMachine.settings = settings(
    max_examples=60,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
