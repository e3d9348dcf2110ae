"""kafkalab.spark.batch_columns: fetched RecordBatch bytes -> the source's Arrow columns.

Batches come from kafkalab's own encoder (kafkalab.records.build_batch), every
codec, null keys and values, headers, both timestamp types, transactions and
their markers; the compiled decoder must give exactly what a slow reference
gives: kafkalab's record decoder (decode_batch) and the consumer's
aborted-transactions filter, one Python object per record, into the same schema.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pa = pytest.importorskip("pyarrow", reason="pyarrow is in the labs extra")
pytest.importorskip("pyspark", reason="pyspark is in the labs extra (the source's schema)")

from kafkalab.client.aborted_transactions import AbortedTransactions  # noqa: E402
from kafkalab.records import (  # noqa: E402
    CompressionType,
    ControlRecordType,
    CorruptRecordError,
    Header,
    SimpleRecord,
    TimestampType,
    build_batch,
    iter_batches,
)
from kafkalab.records.control_record import build_end_txn_marker_batch  # noqa: E402
from kafkalab.spark.batch_columns import COMPILED, BatchColumns  # noqa: E402
from kafkalab.spark.schema import arrow_schema, read_schema  # noqa: E402


def reference(data, start, until, *, headers, read_committed, aborted=()):
    """One Python object per record: what the columns must hold."""
    schema = arrow_schema(read_schema(headers))
    filt = AbortedTransactions(aborted)
    rows = []
    for batch in iter_batches(data):
        h = batch.header
        keep = filt.keep(batch) if read_committed else not h.is_control_batch
        if not keep:
            continue
        for r in batch.records:
            if start <= r.offset < until:
                row = {
                    "key": r.key,
                    "value": r.value,
                    "topic": "t",
                    "partition": 3,
                    "offset": r.offset,
                    "timestamp": r.timestamp * 1000,
                    "timestampType": int(h.timestamp_type),
                }
                if headers:
                    row["headers"] = [{"key": x.key, "value": x.value} for x in r.headers] or None
                rows.append(row)
    if not rows:
        return None
    arrays = [pa.array([row[f.name] for row in rows], f.type) for f in schema]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def decode(data, start, until, *, headers, read_committed, aborted=()):
    columns = BatchColumns(
        "t", 3, arrow_schema(read_schema(headers)), read_committed=read_committed
    )
    return columns.decode(data, start, until, aborted)


blobs = st.one_of(st.none(), st.binary(max_size=40))
header_lists = st.lists(
    st.builds(Header, st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=8))),
    max_size=3,
)
records = st.lists(
    st.builds(
        SimpleRecord,
        value=blobs,
        key=blobs,
        headers=header_lists.map(tuple),
        timestamp=st.integers(0, 2**42),
    ),
    min_size=1,
    max_size=8,
)


@st.composite
def partitions(draw):
    """Back-to-back batches of one partition (gaps between them, as compaction
    leaves) and the aborted transactions a read_committed Fetch would name."""
    data, offset, txn_batches = b"", draw(st.integers(0, 5)), []
    for _ in range(draw(st.integers(1, 6))):
        if draw(st.integers(0, 4)) == 0:
            pid = draw(st.sampled_from([7, 8]))
            marker = draw(st.sampled_from([ControlRecordType.ABORT, ControlRecordType.COMMIT]))
            data += build_end_txn_marker_batch(pid, 0, marker, 1, base_offset=offset)
            offset += 1
        else:
            recs = draw(records)
            pid = draw(st.sampled_from([-1, 7, 8]))
            data += build_batch(
                recs,
                base_offset=offset,
                compression=draw(st.sampled_from(list(CompressionType))),
                timestamp_type=draw(st.sampled_from(list(TimestampType))),
                producer_id=pid,
                producer_epoch=0 if pid >= 0 else -1,
                is_transactional=pid >= 0,
            )
            if pid >= 0:
                txn_batches.append((pid, offset))
            offset += len(recs)
        offset += draw(st.integers(0, 2))
    aborted = draw(st.lists(st.sampled_from(txn_batches), unique=True)) if txn_batches else []
    return data, offset, aborted


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(partitions(), st.data(), st.booleans(), st.booleans())
def test_columns_equal_the_reference_decoder(partition, data, headers, read_committed):
    raw, end, aborted = partition
    start = data.draw(st.integers(0, end + 1))
    until = data.draw(st.integers(start, end + 2))
    got, next_offset = decode(
        raw, start, until, headers=headers, read_committed=read_committed, aborted=aborted
    )
    want = reference(
        raw, start, until, headers=headers, read_committed=read_committed, aborted=aborted
    )
    if want is None:
        assert got is None
    else:
        assert got is not None
        got.validate(full=True)
        assert got.schema == want.schema
        assert got.equals(want), (got.to_pylist(), want.to_pylist())
    assert next_offset == max(start, max(b.next_offset for b in iter_batches(raw)))


def test_a_fetch_ending_inside_a_batch_decodes_the_whole_batches_only():
    first = build_batch([SimpleRecord(b"a"), SimpleRecord(b"b")], base_offset=0)
    second = build_batch([SimpleRecord(b"c")], base_offset=2)
    got, next_offset = decode(first + second[:-5], 0, 10, headers=False, read_committed=False)
    assert got.column("value").to_pylist() == [b"a", b"b"]
    assert next_offset == 2  # the partial batch is fetched again


def test_control_batches_and_aborted_transactions_are_dropped_under_read_committed():
    """Producer 7 aborts offsets 0-1; producer 8 commits 2; then a plain batch.
    read_uncommitted sees every data record (never a marker)."""
    data = (
        build_batch(
            [SimpleRecord(b"aborted-1"), SimpleRecord(b"aborted-2")],
            producer_id=7,
            producer_epoch=0,
            is_transactional=True,
        )
        + build_batch(
            [SimpleRecord(b"committed")],
            base_offset=2,
            producer_id=8,
            producer_epoch=0,
            is_transactional=True,
        )
        + build_end_txn_marker_batch(7, 0, ControlRecordType.ABORT, 1, base_offset=3)
        + build_end_txn_marker_batch(8, 0, ControlRecordType.COMMIT, 1, base_offset=4)
        + build_batch([SimpleRecord(b"plain")], base_offset=5)
    )
    committed, next_offset = decode(
        data, 0, 10, headers=False, read_committed=True, aborted=[(7, 0)]
    )
    assert committed.column("value").to_pylist() == [b"committed", b"plain"]
    assert committed.column("offset").to_pylist() == [2, 5]
    assert next_offset == 6
    everything, _ = decode(data, 0, 10, headers=False, read_committed=False)
    assert everything.column("value").to_pylist() == [
        b"aborted-1",
        b"aborted-2",
        b"committed",
        b"plain",
    ]
    # Only markers in range: no columns, but the position moves past them.
    none, next_offset = decode(data, 3, 5, headers=False, read_committed=True)
    assert none is None and next_offset == 6


def test_log_append_time_gives_every_record_the_batchs_max_timestamp():
    data = bytearray(
        build_batch(
            [SimpleRecord(b"a", timestamp=5), SimpleRecord(b"b", timestamp=9)],
            timestamp_type=TimestampType.LOG_APPEND_TIME,
        )
    )
    got, _ = decode(bytes(data), 0, 2, headers=False, read_committed=False)
    assert got.column("timestampType").to_pylist() == [1, 1]
    assert [t.value for t in got.column("timestamp")] == [9000, 9000]


def test_a_corrupt_batch_is_refused_not_misread():
    data = bytearray(build_batch([SimpleRecord(b"value", key=b"k")]))
    data[-3] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        decode(bytes(data), 0, 1, headers=False, read_committed=False)


def test_the_decoder_is_compiled():
    """numba is in the labs extra: without it the source reads through librdkafka."""
    assert COMPILED


def test_records_that_break_the_format_under_a_good_crc_are_refused():
    """A writer's bug, not a disk's: the CRC matches, the records do not parse."""
    import struct

    from kafkalab.records.record_batch import CRC_OFFSET, compute_crc

    data = bytearray(build_batch([SimpleRecord(b"value", key=b"k")]))
    data[-1] = 10  # the header count (zigzag 5): five headers the record does not hold
    struct.pack_into(">I", data, CRC_OFFSET, compute_crc(data, 0, len(data)))
    with pytest.raises(CorruptRecordError, match="batch at offset 0 of t-3"):
        decode(bytes(data), 0, 1, headers=False, read_committed=False)
