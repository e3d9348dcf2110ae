"""OffsetIndex and TimeIndex on real memory-mapped files, against brute-force models."""

from __future__ import annotations

import struct
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalab.storage.errors import CorruptIndexError, IndexFullError, InvalidOffsetError
from kafkalab.storage.offset_index import OffsetIndex, OffsetPosition
from kafkalab.storage.time_index import TimeIndex, TimestampOffset

FAST = settings(max_examples=100, deadline=None)
BASE = 1000
SLOTS = 64

# Strictly increasing (relative offset > 0, position > 0) pairs, as the log writes them.
increasing = st.lists(st.tuples(st.integers(1, 50), st.integers(1, 5000)), max_size=SLOTS - 1)


def entries_from(steps):
    offset, position, out = BASE, 0, []
    for d_offset, d_position in steps:
        offset += d_offset
        position += d_position
        out.append((offset, position))
    return out


def brute_lookup(entries, target):
    below = [e for e in entries if e[0] <= target]
    return below[-1] if below else (BASE, 0)


@FAST
@given(increasing, st.lists(st.integers(BASE - 10, BASE + 3000), max_size=20), st.data())
def test_offset_index_agrees_with_a_scan_through_reopen_and_truncation(steps, targets, data):
    entries = entries_from(steps)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "00000000000000001000.index"
        index = OffsetIndex(path, BASE, max_index_size=8 * SLOTS)
        for offset, position in entries:
            index.append(offset, position)
        for target in targets:
            assert index.lookup(target) == OffsetPosition(*brute_lookup(entries, target))
        # A crash leaves the preallocated file untrimmed; reopening finds the entries.
        index.flush()
        crashed = OffsetIndex(path, BASE, max_index_size=8 * SLOTS)
        assert [crashed.entry(n) for n in range(crashed.entries)] == [
            OffsetPosition(*e) for e in entries
        ]
        crashed.close()
        index.close()
        assert path.stat().st_size == 8 * len(entries)  # trimmed on close
        reopened = OffsetIndex(path, BASE, max_index_size=8 * SLOTS)
        assert reopened.entries == len(entries)
        cut = data.draw(st.integers(BASE, BASE + 3000))
        reopened.resize(8 * SLOTS)
        reopened.truncate_to(cut)
        kept = [e for e in entries if e[0] < cut]
        assert [reopened.entry(n) for n in range(reopened.entries)] == [
            OffsetPosition(*e) for e in kept
        ]
        assert reopened.last_offset == (kept[-1][0] if kept else BASE)
        reopened.close()


@FAST
@given(
    st.lists(st.tuples(st.integers(1, 50), st.integers(-5, 1000)), max_size=SLOTS - 2),
    st.lists(st.integers(-10, 60_000), max_size=20),
)
def test_time_index_keeps_only_growing_timestamps_and_agrees_with_a_scan(steps, targets):
    with tempfile.TemporaryDirectory() as tmp:
        index = TimeIndex(
            Path(tmp) / "00000000000000001000.timeindex", BASE, max_index_size=12 * SLOTS
        )
        model, offset, ts = [], BASE, 0
        for d_offset, d_ts in steps:
            offset += d_offset
            ts += d_ts  # may go back: only a new maximum makes an entry
            index.maybe_append(ts, offset)
            if not model or ts > model[-1][0]:
                model.append((ts, offset))
        assert [index.entry(n) for n in range(index.entries)] == [
            TimestampOffset(*e) for e in model
        ]
        for target in targets:
            below = [e for e in model if e[0] <= target]
            assert index.lookup(target) == TimestampOffset(*(below[-1] if below else (-1, BASE)))
        index.close()


def test_files_hold_kafka_byte_format(tmp_path):
    offsets = OffsetIndex(tmp_path / "00000000000000000100.index", 100)
    offsets.append(105, 4143)
    offsets.append(171, 8290)
    offsets.close()
    assert (tmp_path / "00000000000000000100.index").read_bytes() == struct.pack(
        ">iiii", 5, 4143, 71, 8290
    )
    times = TimeIndex(tmp_path / "00000000000000000100.timeindex", 100)
    times.maybe_append(1_700_000_000_000, 105)
    times.close()
    assert (tmp_path / "00000000000000000100.timeindex").read_bytes() == struct.pack(
        ">qi", 1_700_000_000_000, 5
    )


def test_new_index_is_preallocated_and_refuses_bad_appends(tmp_path):
    index = OffsetIndex(tmp_path / "00000000000000000000.index", 0, max_index_size=8 * 3 + 5)
    assert index.path.stat().st_size == 24 and index.max_entries == 3
    index.append(10, 100)
    with pytest.raises(InvalidOffsetError, match="increasing"):
        index.append(10, 200)
    with pytest.raises(InvalidOffsetError, match="cannot be stored"):
        index.append(2**31 + 5, 300)
    index.append(11, 200)
    index.append(12, 300)
    assert index.is_full()
    with pytest.raises(IndexFullError, match="roll"):
        index.append(13, 400)
    index.close()


def test_time_index_keeps_a_slot_for_the_final_entry(tmp_path):
    index = TimeIndex(tmp_path / "00000000000000000000.timeindex", 0, max_index_size=12 * 3)
    index.maybe_append(10, 1)
    index.maybe_append(20, 2)
    assert index.is_full()  # one slot left, kept for the roll
    with pytest.raises(IndexFullError):
        index.maybe_append(30, 3)
    index.maybe_append(30, 3, skip_full_check=True)
    assert index.last_entry == TimestampOffset(30, 3)
    index.close()


def test_sanity_check_catches_damaged_files(tmp_path):
    path = tmp_path / "00000000000000000000.index"
    path.write_bytes(struct.pack(">ii", 5, 100) + b"\x00\x01\x02")  # not whole entries
    with pytest.raises(CorruptIndexError, match="multiple"):
        OffsetIndex(path, 0).sanity_check()
    path.write_bytes(struct.pack(">iiii", 50, 100, 7, 200))  # last entry below the first
    with pytest.raises(CorruptIndexError, match="rebuilt"):
        OffsetIndex(path, 0).sanity_check()
    path.write_bytes(struct.pack(">iiii", 5, 100, 7, 200))
    OffsetIndex(path, 0).sanity_check()  # a good file passes


def test_fetch_upper_bound_offset(tmp_path):
    index = OffsetIndex(tmp_path / "00000000000000000000.index", 0)
    for offset, position in ((10, 1000), (20, 2000), (30, 3000)):
        index.append(offset, position)
    assert index.fetch_upper_bound_offset(OffsetPosition(5, 500), 1500) == OffsetPosition(20, 2000)
    assert index.fetch_upper_bound_offset(OffsetPosition(25, 2500), 1000) is None
    index.close()
