"""kafkalab.spark.batch_encoder: the sink's Arrow batches -> RecordBatch v2 bytes.

What the compiled encoder writes is decoded by kafkalab's own record decoder
(kafkalab.records.iter_batches, which checks every CRC) and must give exactly
the rows handed over, each in the partition the reference partitioner
(kafkalab.client.partitioner, Java's murmur2) picks, in row order, with the
producer's id, epoch and gap-free sequences, every codec, and (uncompressed)
batches no larger than batch.size unless one record alone is.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pa = pytest.importorskip("pyarrow", reason="pyarrow is in the labs extra")

from kafkalab.client.partitioner import murmur2, partition_for_key, to_positive  # noqa: E402
from kafkalab.records import CompressionType, iter_batches  # noqa: E402
from kafkalab.spark.batch_encoder import BatchEncoder, _murmur2  # noqa: E402
from kafkalab.spark.errors import KafkaWriteError  # noqa: E402

HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
PARTITIONS = {"a": 1, "b": 3, "c": 7}

rows = st.lists(
    st.fixed_dictionaries(
        {
            "key": st.none() | st.binary(max_size=40),
            "value": st.none() | st.binary(max_size=300),
            "topic": st.sampled_from(sorted(PARTITIONS)),
            "partition": st.none() | st.integers(0, 6),
            "headers": st.none()
            | st.lists(
                st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=20)), max_size=3
            ),
        }
    ),
    min_size=1,
    max_size=60,
)


def arrow_batch(data, columns, string_values: bool):
    arrays, names = [], []
    if "key" in columns:
        arrays.append(pa.array([r["key"] for r in data], pa.binary()))
        names.append("key")
    if string_values:
        values = [None if r["value"] is None else r["value"].hex() for r in data]
        arrays.append(pa.array(values, pa.string()))
    else:
        arrays.append(pa.array([r["value"] for r in data], pa.binary()))
    names.append("value")
    if "topic" in columns:
        arrays.append(pa.array([r["topic"] for r in data], pa.string()))
        names.append("topic")
    if "partition" in columns:
        arrays.append(pa.array([r["partition"] for r in data], pa.int32()))
        names.append("partition")
    if "headers" in columns:
        hs = [
            None if r["headers"] is None else [{"key": k, "value": v} for k, v in r["headers"]]
            for r in data
        ]
        arrays.append(pa.array(hs, HEADERS))
        names.append("headers")
    return pa.RecordBatch.from_arrays(arrays, names=names)


def written(encoded):
    """(topic, partition) -> [(key, value, headers, timestamp)], and the batches' headers."""
    out, headers = {}, {}
    for b in encoded:
        [batch] = list(iter_batches(bytes(b.data)))  # CRC checked
        assert batch.header.records_count == b.count
        assert batch.header.base_sequence == b.base_sequence
        headers.setdefault((b.topic, b.partition), []).append((batch.header, len(b.data)))
        out.setdefault((b.topic, b.partition), []).extend(
            (r.key, r.value, tuple((h.key, h.value) for h in r.headers), r.timestamp)
            for r in batch.records
        )
    return out, headers


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows,
    st.sets(st.sampled_from(["key", "topic", "partition", "headers"])),
    st.booleans(),
    st.integers(80, 2000),
    st.integers(0, 1),
    st.sampled_from(CompressionType),
)
def test_encoded_batches_decode_to_the_rows_in_the_reference_partitions(
    data, columns, string_values, batch_size, sliced, codec
):
    data = data[sliced:] or data
    batch = arrow_batch(data, columns, string_values)
    if sliced:  # a slice of a larger batch: Arrow offsets that do not start at 0
        batch = arrow_batch([data[0], *data], columns, string_values).slice(1)
    topic = None if "topic" in columns else "b"
    encoder = BatchEncoder(
        producer_id=42, producer_epoch=3, batch_size=batch_size, rng=Last(), compression=codec
    )
    stamp = 1_700_000_000_123
    expected: dict = {}
    for r in data:
        t = r["topic"] if topic is None else topic
        explicit = r["partition"] if "partition" in columns else None
        key = r["key"] if "key" in columns else None
        if explicit is not None:
            p = explicit
        elif key is not None:
            p = partition_for_key(key, PARTITIONS[t])
        else:
            p = PARTITIONS[t] - 1  # the sticky partition Last() picks
        value = r["value"]
        if string_values and value is not None:
            value = value.hex().encode()
        hs = tuple(r["headers"] or ()) if "headers" in columns else ()
        expected.setdefault((t, p), []).append((key, value, hs, stamp))
    if any(p >= PARTITIONS[t] for t, p in expected):
        with pytest.raises(KafkaWriteError, match="names partition"):
            encoder.encode(batch, topic, PARTITIONS.__getitem__, stamp)
        return
    twice = [
        *encoder.encode(batch, topic, PARTITIONS.__getitem__, stamp),
        *encoder.encode(batch, topic, PARTITIONS.__getitem__, stamp),
    ]
    got, batch_headers = written(twice)
    assert got == {tp: records * 2 for tp, records in expected.items()}
    # Sequences: per partition from 0, each batch's base the previous one's end.
    for (t, p), hs in batch_headers.items():
        seq = 0
        for h, size in hs:
            assert (h.producer_id, h.producer_epoch, h.base_sequence) == (42, 3, seq)
            assert h.base_timestamp == h.max_timestamp == stamp
            assert h.compression_type == codec
            # batch.size bounds the records before compression
            assert codec != CompressionType.NONE or size <= batch_size or h.records_count == 1
            seq += h.records_count
        assert encoder.sequences[(t, p)] == seq


class Last:
    """An rng whose every pick is the last choice: null-key rows' partition known."""

    def randrange(self, n: int) -> int:
        return n - 1


def test_null_keys_stick_to_one_partition_per_topic_and_batch():
    batch = pa.RecordBatch.from_pydict(
        {"value": pa.array([b"%d" % i for i in range(500)]), "topic": ["x", "y"] * 250}
    )
    encoded = BatchEncoder().encode(batch, None, lambda _: 8)
    assert sorted(b.topic for b in encoded) == ["x", "y"]
    for b in encoded:
        [decoded] = list(iter_batches(bytes(b.data)))
        start = 0 if b.topic == "x" else 1
        assert [r.value for r in decoded.records] == [b"%d" % i for i in range(start, 500, 2)]


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=100))
def test_compiled_murmur2_is_javas(key):
    import numpy as np

    buf = np.frombuffer(key, np.uint8) if key else np.zeros(0, np.uint8)
    assert _murmur2(buf, 0, len(key)) == to_positive(murmur2(key))


def test_a_partition_the_topic_does_not_have_is_refused():
    batch = pa.RecordBatch.from_pydict(
        {"value": pa.array([b"v"]), "partition": pa.array([3], pa.int32())}
    )
    with pytest.raises(KafkaWriteError, match="partition 3 of t, which has partitions 0..2"):
        BatchEncoder().encode(batch, "t", lambda _: 3)


def test_a_null_topic_is_refused():
    batch = pa.RecordBatch.from_pydict(
        {"value": pa.array([b"v", b"w"]), "topic": pa.array(["t", None])}
    )
    with pytest.raises(KafkaWriteError, match="Null topic present in the data"):
        BatchEncoder().encode(batch, None, lambda _: 1)


def test_without_a_producer_id_batches_carry_no_sequence():
    batch = pa.RecordBatch.from_pydict({"value": pa.array([b"v"] * 5)})
    [b] = BatchEncoder(batch_size=10_000).encode(batch, "t", lambda _: 1)
    [decoded] = list(iter_batches(bytes(b.data)))
    assert (decoded.header.producer_id, decoded.header.base_sequence) == (-1, -1)
    assert [r.value for r in decoded.records] == [b"v"] * 5
