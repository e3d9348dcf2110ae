"""Checks for Lab 02 (indexes): where a lookup starts scanning, how many entries
an index gets, where a timestamp lookup starts, and what a rebuilt index holds.

Each check asks kafkalab's real objects (OffsetIndex.lookup, TimeIndex.lookup,
a log built or reopened in a scratch directory) for the answer and compares it
with the student's.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from kafkalab.labs.checks import UNANSWERED, Verdict, answered, compare
from kafkalab.storage import LogConfig, UnifiedLog
from kafkalab.storage.log_segment import LogSegment

__all__ = [
    "check_index_entries",
    "check_rebuilt_entries",
    "check_scan_start",
    "check_time_lookup_start",
]


def check_scan_start(answer: object, log: UnifiedLog, offset: int) -> Verdict:
    """(segment base offset, byte position) where a read of `offset` starts scanning.

    Two steps, both "the largest at or below the target": the segment with the
    largest base offset <= offset, then in that segment's offset index the entry
    with the largest offset <= offset (OffsetIndex.lookup); its position is where
    the scan of batch headers starts. No such entry: position 0.
    """
    if not answered(answer):
        return UNANSWERED
    segment = [s for s in log.segments if s.base_offset <= offset][-1]
    entry = segment.offset_index.lookup(offset)
    if not (isinstance(answer, (tuple, list)) and len(answer) == 2):
        return Verdict(False, "answer a pair: (segment base offset, byte position)")
    base = compare(
        answer[0],
        segment.base_offset,
        what=f"the segment holding offset {offset}",
        why="it has the largest base offset <= the target",
        hint=f"the segment is the one with the largest base offset <= {offset}",
    )
    if not base:
        return base
    return compare(
        answer[1],
        entry.position,
        what=f"the position to start scanning for offset {offset}",
        why=(
            f"the index entry with the largest offset <= {offset} is offset {entry.offset} "
            f"at position {entry.position}: its batch is the last indexed one that can "
            "hold the target, and the scan goes forward from there"
        ),
        hint=(
            f"in that segment's index take the entry with the largest offset <= {offset} "
            "(not the nearest one above: the scan only goes forward); with none, start at 0"
        ),
    )


def check_index_entries(answer: object, batches: Sequence[bytes], interval: int) -> Verdict:
    """How many offset index entries one segment of `batches` gets at `interval`.

    The check appends them to a scratch log. The rule (Kafka's LogSegment.append):
    before appending a batch, if MORE than index.interval.bytes were appended
    since the last entry (or since the segment began), add an entry for this
    batch (its last offset, its position) and restart the count. So the first
    batch never gets an entry, and with batches of b bytes an entry comes every
    interval // b + 1 batches.
    """
    if not answered(answer):
        return UNANSWERED
    with tempfile.TemporaryDirectory(prefix="kafkalab-check-") as scratch:
        trial = UnifiedLog(Path(scratch) / "trial-0", LogConfig(index_interval_bytes=interval))
        for batch in batches:
            trial.append_as_leader(batch)
        expected = trial.active_segment.offset_index.entries
        trial.close()
    return compare(
        answer,
        expected,
        what=f"the number of index entries at index.interval.bytes={interval}",
        why=(
            f"an entry is added before a batch once more than {interval} bytes were "
            "appended since the last entry, never for the first batch"
        ),
        hint=(
            "an entry is added before a batch only when MORE than index.interval.bytes "
            "were appended since the last entry (or the segment's start): work out every "
            "how many batches that happens, then how many times in the segment"
        ),
    )


def check_time_lookup_start(answer: object, segment: LogSegment, timestamp: int) -> Verdict:
    """The byte position a lookup of `timestamp` starts scanning from.

    Kafka's LogSegment.findOffsetByTimestamp: the time index entry with the
    largest timestamp <= target (TimeIndex.lookup) gives an offset; the offset
    index entry with the largest offset <= that offset (OffsetIndex.lookup)
    gives the position. No time index entry that early: the segment's start.
    """
    if not answered(answer):
        return UNANSWERED
    time_entry = segment.time_index.lookup(timestamp)
    entry = segment.offset_index.lookup(time_entry.offset)
    return compare(
        answer,
        entry.position,
        what=f"the position a lookup of timestamp {timestamp} starts from",
        why=(
            f"the time index entry with the largest timestamp <= the target names offset "
            f"{time_entry.offset}, and the offset index maps it to position {entry.position}"
        ),
        hint=(
            "first the time index: the entry with the largest timestamp <= the target; "
            "then its offset through the offset index (largest offset <= it) to a position"
        ),
    )


def check_rebuilt_entries(answer: object, directory: Path, config: LogConfig) -> Verdict:
    """How many entries the offset index has once the log in `directory` reopens.

    The check reopens a copy of the directory as after a clean shutdown (every
    file is trusted but the missing ones). When a segment's index file is
    missing (or fails its sanity check), the loader rebuilds it (LogSegment.recover):
    it reads the .log batch by batch, checks each CRC, and adds entries by the
    same index.interval.bytes rule as appends did.
    """
    if not answered(answer):
        return UNANSWERED
    with tempfile.TemporaryDirectory(prefix="kafkalab-check-") as scratch:
        copy = Path(scratch) / Path(directory).name
        shutil.copytree(directory, copy)
        reopened = UnifiedLog(copy, config, clean_shutdown=True)
        expected = sum(s.offset_index.entries for s in reopened.segments)
        reopened.close()
    return compare(
        answer,
        expected,
        what="the number of entries in the rebuilt offset index",
        why=(
            "the index is derived data: the loader re-reads the .log and adds an entry by "
            f"the same index.interval.bytes={config.index_interval_bytes} rule as the appends"
        ),
        hint=(
            "the rebuild re-reads the same batches from the .log and applies the same "
            "index.interval.bytes rule as the appends did"
        ),
    )
