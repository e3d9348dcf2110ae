"""Checks for Lab 01 (segments): a batch's header read by hand, which segment
file holds an offset, how many segments a log needs, what retention deletes,
and what survives a crash.

Each check works the answer out with kafkalab's real storage code (the batch
header parser, the log's segments, a log built or reopened in a scratch
directory) and compares it with the student's.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from kafkalab.labs.checks import UNANSWERED, Verdict, answered, compare
from kafkalab.records.record_batch import read_header
from kafkalab.storage import LogConfig, UnifiedLog

__all__ = [
    "check_batch_fields",
    "check_log_start_after_retention",
    "check_recovered_log_end",
    "check_segment_count",
    "check_segment_file",
]


def check_batch_fields(batch_length: object, records_count: object, batch: bytes) -> Verdict:
    """batchLength and recordsCount read from the hex dump of `batch`.

    RecordBatch v2 starts with baseOffset (int64, bytes 0-7) and batchLength
    (int32, bytes 8-11): the number of bytes that FOLLOW the length field, so the
    whole batch is batchLength + 12 bytes. recordsCount is the int32 at bytes
    57-60, the last field of the 61-byte header. All integers are big-endian.
    """
    header = read_header(batch)
    length = compare(
        batch_length,
        header.batch_length,
        what="batchLength",
        why=f"the int32 at bytes 8-11; it counts what follows it: {len(batch)} - 12 bytes",
        hint=(
            "batchLength is the big-endian int32 at bytes 8-11 (after the 8-byte "
            "baseOffset); it counts the bytes after itself, not the whole batch"
        ),
    )
    if not length:
        return length
    count = compare(
        records_count,
        header.records_count,
        what="recordsCount",
        why="the int32 at bytes 57-60, the last field of the 61-byte header",
        hint=(
            "recordsCount is the big-endian int32 at bytes 57-60, just before the first "
            "record (the header is 61 bytes long)"
        ),
    )
    if not count:
        return count
    return Verdict(True, f"{length.why}; {count.why}")


def check_segment_file(answer: object, log: UnifiedLog, offset: int) -> Verdict:
    """The name of the .log file that holds `offset`.

    A segment is named by its base offset (its first offset), zero-padded to 20
    digits; it holds every offset from its base up to the next segment's base.
    So the file is the one with the largest base offset <= the offset.
    """
    if not answered(answer):
        return UNANSWERED
    holding = [s for s in log.segments if s.base_offset <= offset][-1]
    expected = holding.log.path.name
    name = Path(str(answer)).name if isinstance(answer, (str, Path)) else answer
    return compare(
        name,
        expected,
        what=f"the file holding offset {offset}",
        why=(
            f"the segment with the largest base offset <= {offset} is {holding.base_offset}, "
            "and a segment's files are named by their base offset, 20 digits"
        ),
        hint=(
            f"look for the segment with the largest base offset <= {offset} (file names "
            "are base offsets, 20 digits, with .log)"
        ),
    )


def _count_segments(batches: Sequence[bytes], segment_bytes: int) -> int:
    with tempfile.TemporaryDirectory(prefix="kafkalab-check-") as scratch:
        trial = UnifiedLog(Path(scratch) / "trial-0", LogConfig(segment_bytes=segment_bytes))
        for batch in batches:
            trial.append_as_leader(batch)
        count = len(trial.segments)
        trial.close()
    return count


def check_segment_count(answer: object, batches: Sequence[bytes], segment_bytes: int) -> Verdict:
    """How many segments `batches`, appended in order, need at `segment_bytes`.

    The check appends them to a scratch log. The rule (Kafka's shouldRoll): a
    batch goes to a new segment when it would take the active one past
    segment.bytes, so a segment holds as many whole batches as fit.
    """
    if not answered(answer):
        return UNANSWERED
    sizes = sorted({len(b) for b in batches})
    return compare(
        answer,
        _count_segments(batches, segment_bytes),
        what=f"the number of segments at segment.bytes={segment_bytes}",
        why=(
            f"a segment takes whole batches ({'/'.join(map(str, sizes))} bytes each) while "
            f"they fit in {segment_bytes} bytes; the rest start new segments"
        ),
        hint=(
            "a batch never straddles two segments: count how many whole batches fit in "
            "segment.bytes, then how many segments the batches need (the last one may "
            "be partly full)"
        ),
    )


def _scratch_copy(directory: Path, scratch: str) -> Path:
    copy = Path(scratch) / directory.name
    shutil.copytree(directory, copy)
    return copy


def check_log_start_after_retention(answer: object, log: UnifiedLog) -> Verdict:
    """The log start offset after retention runs on `log` with its config.

    The check runs the real delete_old_segments on a copy of the log. The rule
    for retention.bytes: delete whole segments, oldest first, while what is
    left stays >= retention.bytes (a segment goes only if the log minus it is
    still at least retention.bytes), each wholly below the high watermark. The
    log start offset moves to the base offset of the first segment left.
    """
    if not answered(answer):
        return UNANSWERED
    with tempfile.TemporaryDirectory(prefix="kafkalab-check-") as scratch:
        copy = UnifiedLog(
            _scratch_copy(log.dir, scratch),
            log.config,
            log_start_offset=log.log_start_offset,
            recovery_point=log.log_end_offset,
            high_watermark=log.high_watermark,
            clean_shutdown=True,
        )
        deleted = copy.delete_old_segments()
        expected = copy.log_start_offset
        copy.close()
    return compare(
        answer,
        expected,
        what="the log start offset after retention",
        why=(
            f"{len(deleted)} whole segments go, oldest first, as long as the log stays at "
            f"least retention.bytes={log.config.retention_bytes}; the log now starts at "
            "the base offset of the first segment left"
        ),
        hint=(
            "delete whole segments from the oldest while the log minus the segment is "
            "still >= retention.bytes; the answer is the base offset of the first segment "
            "that stays"
        ),
    )


def check_recovered_log_end(
    answer: object, crashed: Path, config: LogConfig, recovery_point: int
) -> Verdict:
    """The log end offset after recovery opens the crashed directory.

    The check recovers a copy of it. The rule (Kafka's LogLoader.recoverLog):
    segments below the recovery point are trusted; from the segment holding the
    recovery point on, every batch is read and its CRC checked, and the log is
    cut before the first batch that is torn or fails its CRC. Every whole, valid
    batch before it survives, flushed or not.
    """
    if not answered(answer):
        return UNANSWERED
    quiet = logging.getLogger("kafkalab.storage.unified_log")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # the scratch copy's "cut N bytes" warning would hint
    try:
        with tempfile.TemporaryDirectory(prefix="kafkalab-check-") as scratch:
            copy = _scratch_copy(Path(crashed), scratch)
            with UnifiedLog(copy, config, recovery_point=recovery_point) as recovered:
                expected = recovered.log_end_offset
    finally:
        quiet.setLevel(level)
    return compare(
        answer,
        expected,
        what="the log end offset after recovery",
        why=(
            "recovery keeps every whole batch whose CRC holds, up to the first bad one, "
            f"and cuts the file there; offsets below the recovery point {recovery_point} "
            "were never in doubt"
        ),
        hint=(
            "recovery does not stop at the recovery point: it keeps each whole batch "
            "after it whose CRC holds and cuts at the first torn or scribbled one; count "
            "the batches before that one"
        ),
    )
