"""Checks for lab 07 (Spark over the cluster): how a read becomes Spark tasks, which
offset options read a range, what a micro-batch read, and a query for lost and
duplicated records.

Each check works its answer out from what the notebook built (the offsets the
read covered, the read itself, the query's checkpoint, the history checker).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kafkalab.cluster.history import History, check
from kafkalab.labs.checks import UNANSWERED, Verdict, answered, compare, run_student_code, verdict
from kafkalab.spark.offsets import OffsetRange, plan_ranges

__all__ = [
    "batch_offsets",
    "last_stable_offset",
    "lost_and_duplicated",
    "offsets_for_range",
    "read_tasks",
]


def read_tasks(answer: Any, by_partition: Any, min_partitions: int, df: Any = None) -> Verdict:
    """How many Spark tasks a batch read gets: ``(without minPartitions, with it)``.

    The rule (Spark's KafkaOffsetRangeCalculator): one task per Kafka partition
    whose offset range is not empty. With ``minPartitions`` larger than the number
    of ranges, each range is split into ``max(1, round(size / total * minPartitions))``
    tasks, so big partitions get more. ``by_partition`` is the table of the read
    (columns ``partition``, ``first offset``, ``last offset``); ``df`` the DataFrame
    read with ``minPartitions``, whose plan must agree.
    """
    if not answered(answer) or (isinstance(answer, tuple) and not answered(*answer)):
        return UNANSWERED
    ranges = [
        OffsetRange(
            "t", int(row["partition"]), int(row["first offset"]), int(row["last offset"]) + 1
        )
        for _, row in by_partition.iterrows()
    ]
    plain = len(plan_ranges(ranges))
    split = plan_ranges(ranges, min_partitions)
    if df is not None and df.rdd.getNumPartitions() != len(split):
        return Verdict(
            False, "the read's plan changed since the table was made: run the cells above again"
        )
    if not isinstance(answer, tuple) or len(answer) != 2:
        return Verdict(
            False, "answer with two numbers: (tasks without minPartitions, tasks with it)"
        )
    pieces = {r.partition: 0 for r in split}
    for r in split:
        pieces[r.partition] += 1
    why = (
        f"{plain} non-empty partitions give {plain} tasks; with minPartitions={min_partitions} "
        f"the ranges split into {dict(sorted(pieces.items()))} tasks per partition"
    )
    if answer[0] != plain:
        return Verdict(
            False,
            f"not {answer[0]} tasks without minPartitions: by default a read gets one task "
            "per Kafka partition that has records in the range (its offsets [start, end))",
        )
    return compare(
        answer[1],
        len(split),
        what=f"the number of tasks with minPartitions={min_partitions}",
        why=why,
        hint=(
            f"minPartitions={min_partitions} is more than the {plain} ranges, so each range "
            f"splits into max(1, round(records / total records * {min_partitions})) tasks; "
            "work it out per partition from the table's record counts and add them up"
        ),
    )


def offsets_for_range(
    options: Any,
    read: Callable[[dict[str, str]], list[tuple[int, int]]],
    partition: int,
    first: int,
    last: int,
) -> Verdict:
    """Source options that read exactly offsets ``first..last`` (both included) of one
    partition, and nothing else.

    The rule: ``assign`` names the partitions (``subscribe`` reads every partition of
    the topic, and specific offsets must then be given for every one of them);
    ``startingOffsets`` is the first offset read; ``endingOffsets`` is exclusive, the
    offset after the last one read. ``read`` runs the read with the options and
    returns its ``(partition, offset)`` pairs.
    """
    if not answered(options):
        return UNANSWERED
    if not isinstance(options, dict):
        return Verdict(False, "answer with a dict of option name -> value (a JSON string)")
    options = {k: v if isinstance(v, str) else json.dumps(v) for k, v in options.items()}
    got, failed = run_student_code(read, options)
    if failed is not None:
        return failed
    got = sorted(set(got))
    wanted = [(partition, o) for o in range(first, last + 1)]
    if got == wanted:
        return Verdict(
            True,
            f"the read returned offsets {first}..{last} of partition {partition}, "
            f"{len(wanted)} records: assign picks the partition, startingOffsets is the "
            "first offset read and endingOffsets the one after the last",
        )
    others = sorted({p for p, _ in got} - {partition})
    if others:
        return Verdict(
            False,
            f"your read also returned partitions {others}: name only partition {partition} "
            "with the assign option (subscribe reads every partition of the topic)",
        )
    if not got:
        return Verdict(False, "your read returned nothing: check startingOffsets < endingOffsets")
    low, high = got[0][1], got[-1][1]
    if low != first:
        return Verdict(
            False,
            f"your read starts at offset {low}: startingOffsets is the first offset read",
        )
    return Verdict(
        False,
        f"your read ends at offset {high}: endingOffsets is exclusive, the offset after "
        "the last one read",
    )


def last_stable_offset(
    answer: Any,
    latest: Callable[[str], int],
    read: Callable[[str], Any],
) -> Verdict:
    """Where a ``read_committed`` batch read ends, and how many records it returns:
    ``(lso, records)``.

    The rule: the last stable offset (LSO) is the first offset of the oldest
    transaction still open, or the high watermark when none is open; a
    ``read_committed`` read ends there (exclusive) and returns only the records of
    committed transactions below it: aborted records are skipped, and the commit and
    abort markers are control records no consumer hands out. ``latest(isolation)``
    asks the partition leader (ListOffsets) for its latest offset under that
    isolation; ``read(isolation)`` runs the Spark read.
    """
    if not answered(answer) or (isinstance(answer, tuple) and not answered(*answer)):
        return UNANSWERED
    if not isinstance(answer, tuple) or len(answer) != 2:
        return Verdict(False, "answer with two numbers: (the LSO, records read_committed returns)")
    lso, hw = latest("read_committed"), latest("read_uncommitted")
    records = len(read("read_committed"))
    if answer[0] != lso:
        hint = (
            "the LSO is not the high watermark while a transaction is open"
            if answer[0] == hw and lso != hw
            else "the LSO is the first offset of the oldest open transaction (the HW if none is open)"
        )
        return Verdict(False, f"the LSO is not {answer[0]}: {hint}")
    return compare(
        answer[1],
        records,
        what="the number of records a read_committed read returns",
        why=(
            f"the read ends at the LSO {lso} (the HW is {hw}) and returns only committed "
            "records below it: no aborted record, no marker"
        ),
        hint=(
            "count the committed transactions' records below the LSO: aborted records are "
            "skipped, and markers (control records) are never returned"
        ),
    )


def checkpoint_offsets(checkpoint: Path, batch: int) -> dict[int, int]:
    """The end offsets of a micro-batch, from the query's offset log:
    ``checkpoint/offsets/<batch>`` holds a version line, the batch's metadata, then
    one line per source with its offsets ``{"topic": {"partition": offset}}``."""
    lines = (Path(checkpoint) / "offsets" / str(batch)).read_text().splitlines()
    doc = json.loads(lines[2])
    if isinstance(doc, str):  # a source offset stored as a JSON string
        doc = json.loads(doc)
    return {int(p): int(o) for partitions in doc.values() for p, o in partitions.items()}


def batch_offsets(answer: Any, checkpoint: Path, batch: int, progress: list[dict]) -> Verdict:
    """The offsets micro-batch ``batch`` read: ``{partition: (from, until)}``.

    The rule: batch N reads, per partition, from where batch N-1 ended (its line in
    ``offsets/N-1``, included) up to its own end offset (``offsets/N``, excluded).
    Both are in the checkpoint before the batch runs, which is why a restart can
    run a batch again over exactly the same records. ``progress`` is the query's
    ``recentProgress``, whose ``numInputRows`` for the batch must agree.
    """
    if not answered(answer):
        return UNANSWERED
    start = checkpoint_offsets(checkpoint, batch - 1)
    end = checkpoint_offsets(checkpoint, batch)
    expected = {p: (start.get(p, 0), end[p]) for p in sorted(end)}
    rows = sum(until - begin for begin, until in expected.values())
    reported = [p["numInputRows"] for p in progress if p.get("batchId") == batch]
    note = f"; the query's progress reports {reported[0]} rows for it" if reported else ""
    if isinstance(answer, dict):
        answer = {int(p): tuple(r) for p, r in answer.items()}
    return compare(
        answer,
        expected,
        what=f"what batch {batch} read",
        why=f"from offsets/{batch - 1} (included) to offsets/{batch} (excluded): {rows} records{note}",
        hint=(
            f"per partition, batch {batch} starts where batch {batch - 1} ended (the offsets "
            f"in offsets/{batch - 1}, included) and ends at the offsets in offsets/{batch} "
            "(excluded); answer {partition: (from, until)}"
        ),
    )


def _rows(frame: Any) -> int:
    """Rows of a pandas or a Spark DataFrame."""
    return len(frame) if hasattr(frame, "__len__") else frame.count()


def _doctored(rows: Any) -> Any:
    """The output as a query with a faulty sink could have written it: three
    records missing, one batch's row written twice (a replay), and one value
    appended again at a new offset (a producer retry without idempotence)."""
    import pandas as pd

    rows = rows.sort_values(["partition", "offset"]).reset_index(drop=True)
    dropped = rows.drop(index=[0, len(rows) // 2, len(rows) - 1])
    replayed = rows.iloc[[1]]
    retried = rows.iloc[[2]].assign(
        offset=int(rows[rows.partition == rows.partition[2]].offset.max()) + 1
    )
    return pd.concat([dropped, replayed, retried], ignore_index=True)


def _checker_counts(
    history: History, rows: Any, partitions: list[int], topic: str
) -> tuple[int, int]:
    """(lost, duplicated) by the history checker, with ``rows`` as the final logs."""
    judged = History(ops=list(history.ops))
    for p in partitions:
        part = rows[rows.partition == p].sort_values("offset")
        judged.final_log(
            topic, p, list(zip(part.offset.tolist(), part.value.map(bytes).tolist(), strict=True))
        )
    result = check(judged)
    return len(result.lost), len(result.duplicated)


def lost_and_duplicated(
    function: Callable[[Any, Any], Any],
    output: Any,
    acked: Any,
    history: History,
    topic: str,
) -> Verdict:
    """A query for what the history checker calls lost and duplicated.

    ``function(output, acked)`` returns ``(lost, duplicated)``: the acknowledged
    records missing from the output (one row each), and the records the output
    holds more than once (one row per duplicated record, whatever its offsets). A
    record is its value in its partition: a duplicate may sit at the same offset (a
    batch written twice) or at another (a producer's retry). The check runs it on
    the real output and on a doctored copy, and compares the row counts with the
    checker's. ``output`` and ``acked`` are pandas or Spark DataFrames with columns
    ``partition``, ``offset``, ``value``.
    """
    spark = getattr(output, "sparkSession", None)
    real = output.toPandas() if spark is not None else output
    partitions = sorted({int(p) for p in real.partition})
    bad = _doctored(real)
    cases = [("the query's output", output, real), ("a doctored output", None, bad)]
    for name, frame, rows in cases:
        if frame is None:
            frame = spark.createDataFrame(bad, schema=output.schema) if spark is not None else bad
        result, failed = run_student_code(function, frame, acked)
        if failed is not None:
            return failed
        if not isinstance(result, tuple) or len(result) != 2:
            return Verdict(False, "return two DataFrames: (lost, duplicated)")
        lost, duplicated = (_rows(f) for f in result)
        want_lost, want_dup = _checker_counts(history, rows, partitions, topic)
        if lost != want_lost:
            return Verdict(
                False,
                f"on {name} your query finds {lost} lost records, the history checker "
                f"{want_lost}: a lost record is an acknowledged one (partition, value) that "
                "the output does not hold at all",
            )
        if duplicated != want_dup:
            return Verdict(
                False,
                f"on {name} your query finds {duplicated} duplicated records, the history "
                f"checker {want_dup}: a duplicate is a (partition, value) the output holds "
                "more than once, at the same offset or at another; count each such record once",
            )
    want_lost, want_dup = _checker_counts(history, bad, partitions, topic)
    return verdict(
        True,
        "your query agrees with the history checker on the query's output and on a "
        f"doctored copy ({want_lost} lost, {want_dup} duplicated): lost is an anti-join of "
        "the acknowledged records with the output on (partition, value), duplicated a group "
        "by (partition, value) with count > 1",
        "",
    )
