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
    st.integers(BASE, BASE + 3200),
)
def test_time_index_keeps_only_growing_timestamps_and_agrees_with_a_scan(steps, targets, cut):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "00000000000000001000.timeindex"
        index = TimeIndex(path, BASE, max_index_size=12 * SLOTS)
        model, offset, ts = [], BASE, -3
        for d_offset, d_ts in steps:
            offset += d_offset
            ts += d_ts  # may go back: only a new maximum makes an entry; -1 never does
            index.maybe_append(ts, offset)
            if ts > (model[-1][0] if model else -1):
                model.append((ts, offset))
        expected = [TimestampOffset(*e) for e in model]
        assert [index.entry(n) for n in range(index.entries)] == expected
        assert index.last_entry == (expected[-1] if model else TimestampOffset(-1, BASE))
        for target in targets:
            below = [e for e in model if e[0] <= target]
            assert index.lookup(target) == TimestampOffset(*(below[-1] if below else (-1, BASE)))
        # Reopen an untrimmed file (as after a crash), then the trimmed one.
        index.flush()
        crashed = TimeIndex(path, BASE, max_index_size=12 * SLOTS)
        assert [crashed.entry(n) for n in range(crashed.entries)] == expected
        crashed.close()
        index.close()
        assert path.stat().st_size == 12 * len(model)
        reopened = TimeIndex(path, BASE, max_index_size=12 * SLOTS)
        assert [reopened.entry(n) for n in range(reopened.entries)] == expected
        reopened.sanity_check()
        reopened.truncate_to(cut)
        kept = [TimestampOffset(*e) for e in model if e[1] < cut]
        assert [reopened.entry(n) for n in range(reopened.entries)] == kept
        assert reopened.last_entry == (kept[-1] if kept else TimestampOffset(-1, BASE))
        reopened.close()
        again = TimeIndex(path, BASE, max_index_size=12 * SLOTS)
        assert [again.entry(n) for n in range(again.entries)] == kept
        again.close()


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


def test_sanity_check_catches_garbage_last_entries(tmp_path):
    path = tmp_path / "00000000000000000000.index"
    path.write_bytes(struct.pack(">iiii", 5, 100, 7, 200) + b"\xff" * 8)  # last entry garbage
    index = OffsetIndex(path, 0)
    assert index.entries == 3
    with pytest.raises(CorruptIndexError, match="below the base offset .*rebuilt"):
        index.sanity_check()
    index.close()
    path.write_bytes(struct.pack(">iiii", 5, 100, 3, 200))
    with pytest.raises(CorruptIndexError, match="not after its first"):
        OffsetIndex(path, 0, writable=False).sanity_check()

    tpath = tmp_path / "00000000000000000000.timeindex"
    tpath.write_bytes(struct.pack(">qiqi", 500, 5, -(2**40), 9))  # timestamp went back
    with pytest.raises(CorruptIndexError, match="timestamp .*rebuilt"):
        TimeIndex(tpath, 0, writable=False).sanity_check()
    tpath.write_bytes(struct.pack(">qiqi", 500, 5, 600, 9) + b"\x00" * 5)
    with pytest.raises(CorruptIndexError, match="multiple of the 12-byte"):
        TimeIndex(tpath, 0, writable=False).sanity_check()
    tpath.write_bytes(struct.pack(">qiqi", 500, 5, 600, 9))
    TimeIndex(tpath, 0, writable=False).sanity_check()


def test_time_index_refuses_offsets_going_back_and_merges_same_offset(tmp_path):
    index = TimeIndex(tmp_path / "00000000000000000010.timeindex", 10, max_index_size=12 * 8)
    index.maybe_append(-1, 10)  # NO_TIMESTAMP is never indexed
    assert index.entries == 0
    index.maybe_append(0, 10)  # timestamp 0 at the base offset is a real entry
    index.maybe_append(100, 15)
    with pytest.raises(InvalidOffsetError, match="must not go back"):
        index.maybe_append(200, 14)
    index.maybe_append(50, 20)  # timestamp did not grow: skipped
    assert index.entries == 2
    index.maybe_append(150, 15)  # same offset, larger timestamp: replaces, offsets stay strict
    assert [index.entry(n) for n in range(index.entries)] == [
        TimestampOffset(0, 10),
        TimestampOffset(150, 15),
    ]
    with pytest.raises(InvalidOffsetError, match="cannot be stored"):
        index.maybe_append(300, 10 + 2**31)
    index.close()
    fresh = TimeIndex(tmp_path / "00000000000000000020.timeindex", 20, max_index_size=12 * 8)
    with pytest.raises(InvalidOffsetError, match="cannot be stored"):
        fresh.maybe_append(300, 19)  # below the base offset
    fresh.close()


def test_reopen_tells_an_empty_preallocated_file_from_an_entry_at_the_base(tmp_path):
    path = tmp_path / "00000000000000000000.timeindex"
    TimeIndex(path, 0, max_index_size=12 * 8).flush()  # preallocated, never written, no trim
    assert path.stat().st_size == 96
    empty = TimeIndex(path, 0, max_index_size=12 * 8)
    assert empty.entries == 0 and empty.last_entry == TimestampOffset(-1, 0)
    empty.maybe_append(0, 0)  # an all-zero entry
    empty.close()
    assert path.stat().st_size == 12
    one = TimeIndex(path, 0)
    assert one.entries == 1 and one.last_entry == TimestampOffset(0, 0)
    one.truncate()  # leaves no one-slot file of zeros behind, even without close()
    one.flush()
    assert TimeIndex(path, 0, writable=False).entries == 0
    one.close()


def test_resize_rounds_to_entries_and_never_drops_entries(tmp_path):
    index = OffsetIndex(tmp_path / "00000000000000000000.index", 0, max_index_size=8 * 10)
    for n in range(1, 5):
        index.append(n * 10, n * 100)
    assert index.resize(8 * 20 + 3) is True
    assert index.max_entries == 20 and index.path.stat().st_size == 160
    assert index.resize(8 * 20) is False  # unchanged
    assert index.resize(5) is True  # never below the 4 entries
    assert index.max_entries == 4 and index.is_full()
    with pytest.raises(IndexFullError):
        index.append(50, 500)
    index.resize(8 * 6)
    index.append(50, 500)
    assert [index.entry(n).offset for n in range(index.entries)] == [10, 20, 30, 40, 50]
    assert index.lookup(35) == OffsetPosition(30, 300)
    index.trim_to_valid_size()
    assert index.path.stat().st_size == index.size_in_bytes() == 40
    index.close()


def test_lifecycle_close_delete_rename(tmp_path):
    path = tmp_path / "00000000000000000000.index"
    with OffsetIndex(path, 0, max_index_size=8 * 4) as index:
        index.append(3, 30)
    index.close()  # idempotent
    assert path.stat().st_size == 8
    index = OffsetIndex(path, 0)
    index.truncate_to(3)
    assert index.entries == 0 and index.last_offset == 0
    assert index.max_entries == 0  # the trimmed file's one slot was given back
    index.resize(8 * 4)  # as LogSegment does when the segment becomes active again
    index.append(4, 40)
    index.close()
    index.rename_to(tmp_path / "00000000000000000000.index.deleted")
    assert not path.exists() and index.path.name.endswith(".deleted")
    assert index.delete() is True
    assert index.delete() is False
    with pytest.raises(FileNotFoundError):
        OffsetIndex(path, 0, writable=False)


def _mapped_rss_kb(path: Path) -> int:
    """Resident kB of this process's mappings of `path` (Linux /proc/self/smaps)."""
    total, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        fields = line.split()
        if fields and "-" in fields[0] and len(fields) >= 5:
            inside = fields[-1] == str(path)
        elif inside and fields[0] == "Rss:":
            total += int(fields[1])
    return total


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="needs Linux /proc")
def test_an_idle_index_costs_a_few_pages_of_memory_not_its_preallocated_size(tmp_path):
    """A new index is preallocated to 10 MB (sparse) and memory-mapped; opening it
    must not fault its pages in. It read them (the entry count's binary search, with
    the kernel's readahead): 512 kB resident per index, a MB per idle partition."""
    indexes = [OffsetIndex(tmp_path / "0.index", 0), TimeIndex(tmp_path / "0.timeindex", 0)]
    for index in indexes:
        assert _mapped_rss_kb(index.path) <= 8
    indexes[0].append(5, 100)
    indexes[1].maybe_append(1000, 5)
    for index in indexes:
        index.close()
    # Reopening an untrimmed file (a crash) counts its entries by binary search:
    # single pages, not readahead windows.
    reopened = [OffsetIndex(tmp_path / "0.index", 0), TimeIndex(tmp_path / "0.timeindex", 0)]
    assert reopened[0].entries == 1 and reopened[1].entries == 1
    for index in reopened:
        assert _mapped_rss_kb(index.path) <= 32 * 4
        index.close()
