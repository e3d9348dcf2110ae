"""Property tests of log compaction against a model of "the latest value per key".

The model keeps every record ever appended. After a cleaning pass that ended
at offset E (what cleaner-offset-checkpoint says), the log must read back:

- below E, for each key, its latest record below E, except a tombstone (null
  value) whose delete horizon has passed at a later pass (KIP-534: the first
  pass that covers a tombstone stamps its batch with now + delete.retention.ms;
  a later pass at or after that time removes it);
- from E on, every record appended, as it was.

Offsets, keys, values, timestamps and headers are the original ones, and
offsets strictly increase. A crash is injected at each file operation of a
pass (create, write, fsync, rename, delete, utime): reopening the files as the
crash left them must give a log between the old one and the cleaned one (a
subsequence of the old, holding everything the cleaned one holds), and
retrying the pass must give exactly the model.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from kafkalab.records.memory_records import SimpleRecord, build_batch, iter_batches
from kafkalab.records.record import Header
from kafkalab.records.record_batch import CompressionType
from kafkalab.storage.checkpoint_file import OffsetCheckpointFile
from kafkalab.storage.log_cleaner import CLEANER_OFFSET_CHECKPOINT, clean
from kafkalab.storage.log_config import LogConfig
from kafkalab.storage.unified_log import UnifiedLog

KEYS = [b"a", b"b", b"c", b"d", b"e", b"f"]
CRASH_OPS = ("open", "pwrite", "fsync", "replace", "rename", "unlink", "ftruncate", "utime")


class Clock:
    now = 1_000_000

    def __call__(self) -> int:
        return self.now


class SimulatedCrash(Exception):
    pass


class CrashAt:
    """Patch the os functions the log uses so that the `at`-th call (counting from
    0) first copies the log dir as it is, then raises SimulatedCrash. Calls after
    the crash go through (their effects land on files the test throws away)."""

    def __init__(self, at: int, logs_dir: Path, snapshot: Path) -> None:
        self.at, self.logs_dir, self.snapshot = at, logs_dir, snapshot
        self.calls = 0
        self.crashed = False
        self._saved: dict[str, object] = {}

    def __enter__(self) -> CrashAt:
        for name in CRASH_OPS:
            original = getattr(os, name)
            self._saved[name] = original
            setattr(os, name, self._wrap(original))
        return self

    def __exit__(self, *exc) -> None:
        for name, original in self._saved.items():
            setattr(os, name, original)

    def _wrap(self, original):
        def op(*args, **kwargs):
            if not self.crashed and self.calls == self.at:
                self.crashed = True
                self.__exit__()  # copy the files with the real functions
                shutil.copytree(self.logs_dir, self.snapshot)
                raise SimulatedCrash(f"crash at file operation {self.at}")
            self.calls += 1
            return original(*args, **kwargs)

        return op


def read_all(log: UnifiedLog) -> list[tuple]:
    """(offset, key, value, timestamp, headers) of every record, in small reads."""
    out: list[tuple] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        info = log.read(offset, 300)
        data = info.read_bytes()
        batches = list(iter_batches(data))
        if not batches:
            break  # nothing left before the LEO
        for b in batches:
            out += [(r.offset, r.key, r.value, r.timestamp, r.headers) for r in b.records]
        offset = batches[-1].next_offset
    return [r for r in out if r[0] >= log.log_start_offset]


def abandon(log: UnifiedLog) -> None:
    """Drop a log whose process 'crashed': close what can be closed."""
    for segment in log._segments:
        for f in (segment.offset_index, segment.time_index, segment.log):
            try:
                f.close()
            except Exception:  # noqa: BLE001 - its files may be renamed or gone
                pass


class CleanerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="kafkalab-clean-"))
        self.logs = self.tmp / "logs"
        self.dir = self.logs / "t-0"
        self.clock = Clock()
        self.appended: list[tuple] = []
        self.passes: list[tuple[int, int]] = []  # (end offset, now) of each completed pass
        self.next_value = 0

    @initialize(
        retention=st.sampled_from([1, 100, 5000]),
        segment_bytes=st.sampled_from([400, 800, 1600]),
    )
    def open_log(self, retention: int, segment_bytes: int) -> None:
        self.config = LogConfig(
            cleanup_policy="compact",
            segment_bytes=segment_bytes,
            index_interval_bytes=100,
            segment_index_bytes=8 * 64,
            delete_retention_ms=retention,
        )
        self.log = UnifiedLog(self.dir, self.config, clock=self.clock)
        # A follower replicating the leader's (cleaned) log, cleaning its own copy.
        self.follower = UnifiedLog(self.logs / "t-1", self.config, clock=self.clock)

    def teardown(self) -> None:
        if hasattr(self, "log"):
            abandon(self.log)
            abandon(self.follower)
        shutil.rmtree(self.tmp, ignore_errors=True)

    # -- the model ----------------------------------------------------------------------

    def _horizon_passed(self, offset: int) -> bool:
        covering = [now for end, now in self.passes if end > offset]
        if not covering:
            return False
        horizon = covering[0] + self.config.delete_retention_ms
        return any(now >= horizon for now in covering[1:])

    def expected(self) -> list[tuple]:
        end = max((e for e, _ in self.passes), default=0)
        latest: dict[bytes, tuple] = {}
        for record in self.appended:
            if record[0] < end:
                latest[record[1]] = record
        keep = {r[0] for r in latest.values() if r[2] is not None or not self._horizon_passed(r[0])}
        return [r for r in self.appended if r[0] >= end or r[0] in keep]

    # -- rules --------------------------------------------------------------------------

    @rule(
        batches=st.lists(
            st.tuples(
                st.lists(st.sampled_from(KEYS), min_size=1, max_size=4),
                st.lists(st.booleans(), min_size=4, max_size=4),
                st.sampled_from([CompressionType.NONE, CompressionType.GZIP]),
                st.booleans(),
            ),
            min_size=1,
            max_size=6,
        )
    )
    def append(self, batches) -> None:
        for keys, tombstones, codec, headers in batches:
            self._append(keys, tombstones, codec, headers)

    def _append(self, keys, tombstones, codec, headers) -> None:
        records = []
        for i, key in enumerate(keys):
            self.next_value += 1
            value = None if tombstones[i] else b"v%d-" % self.next_value * 5
            hdrs = (Header("h", b"%d" % self.next_value),) if headers else ()
            records.append(SimpleRecord(value, key=key, headers=hdrs, timestamp=self.clock.now + i))
        info = self.log.append_as_leader(build_batch(records, compression=codec))
        self.log.update_high_watermark(self.log.log_end_offset)
        for i, r in enumerate(records):
            self.appended.append((info.first_offset + i, r.key, r.value, r.timestamp, r.headers))
        self.clock.now += 7

    @rule(follower=st.booleans())
    def roll(self, follower: bool) -> None:
        (self.follower if follower else self.log).roll()

    @rule(ms=st.sampled_from([1, 50, 1000, 10_000]))
    def tick(self, ms: int) -> None:
        self.clock.now += ms

    def _clean(self) -> None:
        result = clean(self.log, self.clock.now)
        if result is not None:
            self.passes.append((result.end_offset, self.clock.now))

    @rule()
    def clean_now(self) -> None:
        self._clean()

    @rule()
    def clean_follower(self) -> None:
        clean(self.follower, self.clock.now)

    @rule(max_bytes=st.sampled_from([1, 200, 5000]), catch_up=st.booleans())
    def replicate(self, max_bytes: int, catch_up: bool) -> None:
        """Fetches at the follower's LEO (one, or until it is caught up), whole
        batches appended with their offsets, as the replica fetcher does."""
        while (leo := self.follower.log_end_offset) < self.log.high_watermark:
            data = self.log.read(leo, max_bytes, self.log.high_watermark).read_bytes()
            batches = list(iter_batches(data))
            assert batches, "a fetch below the high watermark returns a whole batch"
            end = sum(b.size_in_bytes for b in batches)
            assert batches[0].base_offset >= leo, "fetches start at a batch boundary or later"
            self.follower.append_as_follower(data[:end])
            self.follower.update_high_watermark(self.follower.log_end_offset)
            if not catch_up:
                break

    @rule(data=st.data())
    def reopen(self, data) -> None:
        clean_shutdown = data.draw(st.booleans(), label="clean_shutdown")
        hw = self.log.high_watermark
        if clean_shutdown:
            self.log.close()
        else:
            abandon(self.log)
        self.log = UnifiedLog(
            self.dir,
            self.config,
            high_watermark=hw,
            clean_shutdown=clean_shutdown,
            clock=self.clock,
        )

    @precondition(lambda self: self.appended)
    @rule(at=st.integers(0, 120))
    def crash_while_cleaning(self, at: int) -> None:
        before = read_all(self.log)
        hw = self.log.high_watermark
        snapshot = self.tmp / "crash"
        crash = CrashAt(at, self.logs, snapshot)
        try:
            with crash:
                result = clean(self.log, self.clock.now)
        except SimulatedCrash:
            result = None
        if not crash.crashed:  # the pass had fewer file operations than `at`
            if result is not None:
                self.passes.append((result.end_offset, self.clock.now))
            return
        abandon(self.log)
        shutil.rmtree(self.logs)
        snapshot.rename(self.logs)
        self.log = UnifiedLog(self.dir, self.config, high_watermark=hw, clock=self.clock)
        after_crash = read_all(self.log)
        assert not [p for p in self.dir.iterdir() if p.suffix in (".cleaned", ".swap")]
        it = iter(before)
        assert all(r in it for r in after_crash), "recovery produced records the log did not hold"
        # Retry the pass (at the same time, as the broker would next): exactly the model.
        # (A crash after the checkpoint's rename leaves nothing to retry.)
        self._clean()
        checkpoint = OffsetCheckpointFile(self.logs / CLEANER_OFFSET_CHECKPOINT).read()
        end = checkpoint.get(("t", 0))
        if end is not None and end > max((e for e, _ in self.passes), default=0):
            self.passes.append((end, self.clock.now))
        completed = {r[0] for r in self.expected()}
        assert completed <= {r[0] for r in after_crash}, "the crash lost a record cleaning keeps"

    # -- invariants ---------------------------------------------------------------------

    @invariant()
    def log_matches_model(self) -> None:
        if not hasattr(self, "log"):
            return
        got = read_all(self.log)
        offsets = [r[0] for r in got]
        assert offsets == sorted(set(offsets)), "offsets must strictly increase"
        assert got == self.expected()
        end = max((e for e, _ in self.passes), default=None)
        checkpoint = OffsetCheckpointFile(self.logs / CLEANER_OFFSET_CHECKPOINT).read()
        assert checkpoint.get(("t", 0)) == end
        leo = self.appended[-1][0] + 1 if self.appended else 0
        assert self.log.log_end_offset == leo

    @invariant()
    def follower_holds_what_it_fetched(self) -> None:
        if not hasattr(self, "follower"):
            return
        got = read_all(self.follower)
        offsets = [r[0] for r in got]
        assert offsets == sorted(set(offsets)), "follower offsets must strictly increase"
        by_offset = {r[0]: r for r in self.appended}
        assert all(by_offset[r[0]] == r for r in got), "the follower holds a record never written"
        if self.follower.log_end_offset == self.log.log_end_offset:
            latest: dict[bytes, tuple] = {}
            for record in self.appended:
                latest[record[1]] = record
            live = [r for r in latest.values() if r[2] is not None]
            assert set(live) <= set(got), "a caught-up follower lost a key's latest value"


TestCleanerMachine = CleanerMachine.TestCase
TestCleanerMachine.settings = settings(
    max_examples=100,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
