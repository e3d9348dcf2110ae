"""Lab 07's checks, fed right answers, wrong ones and the placeholder, with small live
objects built as the notebooks build them (without Spark: the planning, the offset
log and the history checker are plain Python; a read is a function of the options)."""

from __future__ import annotations

import json

import pandas as pd

from kafkalab.cluster.history import History
from kafkalab.labs.checks import spark as checks
from kafkalab.spark.offsets import parse_partition_list, parse_partition_offsets


def assert_not_yet(v, *words: str) -> None:
    assert not v and str(v).startswith("not yet:"), v
    for word in words:
        assert word in str(v), v


# -- read_tasks --------------------------------------------------------------------------

# Six partitions as in 01_batch: two large enough to split with minPartitions=8.
SIZES = {0: 20_000, 1: 50_000, 2: 30_000, 3: 30_000, 4: 40_000, 5: 30_000}
BY_PARTITION = pd.DataFrame(
    {
        "partition": list(SIZES),
        "first offset": [0] * 6,
        "last offset": [n - 1 for n in SIZES.values()],
    }
)


def test_read_tasks_right() -> None:
    # total 200,000; round(n / 200,000 * 8): 1, 2, 1, 1, 2, 1 -> 8 tasks
    v = checks.read_tasks((6, 8), BY_PARTITION, 8)
    assert v and "6 tasks" in str(v), v


def test_read_tasks_wrong_and_placeholder() -> None:
    assert_not_yet(checks.read_tasks((8, 8), BY_PARTITION, 8), "one task per Kafka partition")
    assert_not_yet(checks.read_tasks((6, 6), BY_PARTITION, 8), "round(", "not 6")
    assert_not_yet(checks.read_tasks(..., BY_PARTITION, 8), "replace the ...")
    assert_not_yet(checks.read_tasks((..., ...), BY_PARTITION, 8), "replace the ...")
    assert_not_yet(checks.read_tasks(6, BY_PARTITION, 8), "two numbers")


def test_read_tasks_follows_the_sizes() -> None:
    even = BY_PARTITION.assign(**{"last offset": [33_332] * 6})
    assert checks.read_tasks((6, 6), even, 8)
    assert not checks.read_tasks((6, 8), even, 8)


# -- offsets_for_range -------------------------------------------------------------------

HIGH = {p: 1000 for p in range(6)}  # every partition of "orders" holds offsets 0..999


def fake_read(options: dict[str, str]) -> list[tuple[int, int]]:
    """The (partition, offset) pairs a batch read of `orders` returns for the options."""
    if "assign" in options:
        tps = [p for _, p in parse_partition_list(options["assign"])]
    else:
        tps = list(HIGH)

    def resolve(name: str, default: int | None) -> dict[int, int]:
        text = options.get(name)
        if text is None or text in ("earliest", "latest"):
            which = default if text is None else (0 if text == "earliest" else None)
            return {p: HIGH[p] if which is None else which for p in tps}
        given = {p: o for (_, p), o in parse_partition_offsets(text, name).items()}
        if set(given) != set(tps):
            raise ValueError(f"Option '{name}' must give an offset for every partition")
        return {p: 0 if o == -2 else HIGH[p] if o == -1 else o for p, o in given.items()}

    start, end = resolve("startingOffsets", 0), resolve("endingOffsets", None)
    return [(p, o) for p in tps for o in range(start[p], end[p])]


def opts(start: int, end: int, partitions=(2,)) -> dict:
    return {
        "assign": json.dumps({"orders": list(partitions)}),
        "startingOffsets": json.dumps({"orders": {str(p): start for p in partitions}}),
        "endingOffsets": json.dumps({"orders": {str(p): end for p in partitions}}),
    }


def test_offsets_for_range_right() -> None:
    assert checks.offsets_for_range(opts(100, 200), fake_read, 2, 100, 199)
    # dicts instead of JSON strings are accepted
    as_dicts = {k: json.loads(v) for k, v in opts(100, 200).items()}
    assert checks.offsets_for_range(as_dicts, fake_read, 2, 100, 199)


def test_offsets_for_range_wrong_and_placeholder() -> None:
    assert_not_yet(checks.offsets_for_range(opts(100, 199), fake_read, 2, 100, 199), "exclusive")
    assert_not_yet(checks.offsets_for_range(opts(101, 200), fake_read, 2, 100, 199), "first")
    assert_not_yet(
        checks.offsets_for_range(opts(100, 200, (1, 2)), fake_read, 2, 100, 199), "assign"
    )
    subscribe = {
        "subscribe": "orders",
        **{k: v for k, v in opts(100, 200).items() if k != "assign"},
    }
    assert_not_yet(checks.offsets_for_range(subscribe, fake_read, 2, 100, 199), "raised")
    assert_not_yet(checks.offsets_for_range(opts(200, 200), fake_read, 2, 100, 199), "nothing")
    assert_not_yet(checks.offsets_for_range(..., fake_read, 2, 100, 199), "replace the ...")


# -- last_stable_offset ------------------------------------------------------------------

# payments as in 01_batch: committed 0-2 (marker 3), aborted 4-5 (marker 6), open 7.
PAYMENTS = {
    "read_uncommitted": ["paid-1", "paid-2", "paid-3", "oops-1", "oops-2", "pending-1"],
    "read_committed": ["paid-1", "paid-2", "paid-3"],
}


def latest(isolation: str) -> int:
    return {"read_uncommitted": 8, "read_committed": 7}[isolation]


def test_last_stable_offset() -> None:
    v = checks.last_stable_offset((7, 3), latest, PAYMENTS.get)
    assert v and "LSO 7" in str(v), v
    assert_not_yet(checks.last_stable_offset((8, 3), latest, PAYMENTS.get), "open")
    assert_not_yet(checks.last_stable_offset((6, 3), latest, PAYMENTS.get), "oldest open")
    assert_not_yet(checks.last_stable_offset((7, 5), latest, PAYMENTS.get), "aborted")
    assert_not_yet(checks.last_stable_offset((7, ...), latest, PAYMENTS.get), "replace the ...")
    assert_not_yet(checks.last_stable_offset(7, latest, PAYMENTS.get), "two numbers")
    # once the open transaction commits, the LSO is the HW
    committed = {**PAYMENTS, "read_committed": [*PAYMENTS["read_committed"], "pending-1"]}
    assert checks.last_stable_offset((9, 4), lambda i: 9, committed.get)


# -- batch_offsets -----------------------------------------------------------------------


def write_offsets(checkpoint, batch: int, offsets: dict[int, int]) -> None:
    folder = checkpoint / "offsets"
    folder.mkdir(parents=True, exist_ok=True)
    source = json.dumps({"clicks": {str(p): o for p, o in offsets.items()}})
    (folder / str(batch)).write_text(f'v1\n{{"batchWatermarkMs":0}}\n{source}')


def test_batch_offsets(tmp_path) -> None:
    write_offsets(tmp_path, 3, {0: 100, 1: 120, 2: 90})
    write_offsets(tmp_path, 4, {0: 180, 1: 200, 2: 150})
    progress = [{"batchId": 4, "numInputRows": 220}]
    right = {0: (100, 180), 1: (120, 200), 2: (90, 150)}
    v = checks.batch_offsets(right, tmp_path, 4, progress)
    assert v and "220 records" in str(v) and "220 rows" in str(v), v
    # lists from JSON-minded students are fine too
    assert checks.batch_offsets({p: list(r) for p, r in right.items()}, tmp_path, 4, progress)
    inclusive = {0: (101, 180), 1: (121, 200), 2: (91, 150)}
    assert_not_yet(checks.batch_offsets(inclusive, tmp_path, 4, progress), "included")
    own_only = {0: (0, 180), 1: (0, 200), 2: (0, 150)}
    assert_not_yet(checks.batch_offsets(own_only, tmp_path, 4, progress), "offsets/3")
    assert_not_yet(checks.batch_offsets(..., tmp_path, 4, progress), "replace the ...")


# -- lost_and_duplicated -----------------------------------------------------------------


def clicks_history() -> tuple[History, pd.DataFrame]:
    """Two partitions, ten acknowledged records each, and an output that holds them."""
    history = History()
    rows = []
    for p in (0, 1):
        for o in range(10):
            value = f"p{p}-{o}".encode()
            history.send("clicks", p, value)
            history.ack("clicks", p, value, o)
            rows.append({"partition": p, "offset": o, "value": value})
    return history, pd.DataFrame(rows)


def right_query(output, acked):
    lost = acked.merge(output[["partition", "value"]], how="left", indicator=True)
    lost = lost[lost._merge == "left_only"]
    counts = output.groupby(["partition", "value"]).size()
    return lost, counts[counts > 1]


def by_offset_query(output, acked):
    lost, _ = right_query(output, acked)
    counts = output.groupby(["partition", "offset"]).size()
    return lost, counts[counts > 1]


def every_row_query(output, acked):
    lost, _ = right_query(output, acked)
    return lost, output[output.duplicated(["partition", "value"], keep=False)]


def by_offset_lost_query(output, acked):
    lost = acked[~acked.offset.isin(output.offset)]
    return lost, right_query(output, acked)[1]


def test_lost_and_duplicated() -> None:
    history, output = clicks_history()
    acked = output.copy()
    v = checks.lost_and_duplicated(right_query, output, acked, history, "clicks")
    assert v and "3 lost, 2 duplicated" in str(v), v
    assert_not_yet(
        checks.lost_and_duplicated(by_offset_query, output, acked, history, "clicks"),
        "doctored",
        "at another",
    )
    assert_not_yet(
        checks.lost_and_duplicated(every_row_query, output, acked, history, "clicks"),
        "count each such record once",
    )
    assert_not_yet(
        checks.lost_and_duplicated(by_offset_lost_query, output, acked, history, "clicks"),
        "lost",
    )
    assert_not_yet(
        checks.lost_and_duplicated(lambda o, a: (o,), output, acked, history, "clicks"),
        "two DataFrames",
    )

    def placeholder(output, acked): ...

    assert_not_yet(
        checks.lost_and_duplicated(placeholder, output, acked, history, "clicks"),
        "replace the ...",
    )
