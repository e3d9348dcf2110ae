"""Offsets as Spark's Kafka source writes them, and how offset ranges become Spark tasks.

Pure: no Spark, no sockets. The JSON forms are the ones Spark's Kafka
integration guide documents, so a checkpoint or an option string reads the same:

    partition offsets   {"topicA": {"0": 23, "1": -1}, "topicB": {"0": -2}}
    partition list      {"topicA": [0, 1], "topicB": [2, 4]}         (the `assign` option)

In offset JSON, -2 means earliest and -1 latest (Kafka's ListOffsets sentinels).
A stream reader's offset is the same `{topic: {"partition": offset}}` dict.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

from kafkalab.spark.errors import KafkaSourceOptionError

EARLIEST = -2
LATEST = -1

TopicPartition = tuple[str, int]
PartitionOffsets = dict[TopicPartition, int]


def _per_topic_json(text: str, option: str, example: str, per_topic: type) -> dict:
    """An option's JSON object of topic -> `per_topic` (dict or list), or a
    KafkaSourceOptionError that shows `example`."""
    try:
        doc = json.loads(text)
    except (json.JSONDecodeError, TypeError) as e:
        raise KafkaSourceOptionError(
            f"Option '{option}' is not valid JSON ({e}). Expected e.g. {example}, got {text!r}"
        ) from None
    if not isinstance(doc, dict) or not all(isinstance(v, per_topic) for v in doc.values()):
        raise KafkaSourceOptionError(f"Option '{option}': expected e.g. {example}, got {text!r}")
    return doc


def parse_partition_offsets(text: str, option: str = "startingOffsets") -> PartitionOffsets:
    """`{"topicA": {"0": 23, "1": -1}}` -> {("topicA", 0): 23, ("topicA", 1): -1}."""
    example = '{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}'
    doc = _per_topic_json(text, option, example, dict)
    out: PartitionOffsets = {}
    for topic, partitions in doc.items():
        for partition, offset in partitions.items():
            try:
                p = int(partition)
            except ValueError:
                p = -1
            if p < 0 or isinstance(offset, bool) or not isinstance(offset, int):
                raise KafkaSourceOptionError(
                    f"Option '{option}': partition {partition!r} of topic {topic!r} must be a "
                    f"partition number mapped to an integer offset. Expected e.g. {example}, "
                    f"got {text!r}"
                )
            out[(topic, p)] = offset
    return out


def parse_partition_list(text: str, option: str = "assign") -> list[TopicPartition]:
    """`{"topicA": [0, 1]}` -> [("topicA", 0), ("topicA", 1)]."""
    example = '{"topicA":[0,1],"topicB":[2,4]}'
    doc = _per_topic_json(text, option, example, list)
    out: list[TopicPartition] = []
    for topic, partitions in doc.items():
        for p in partitions:
            if isinstance(p, bool) or not isinstance(p, int) or p < 0:
                raise KafkaSourceOptionError(
                    f"Option '{option}': topic {topic!r} lists {p!r}, not a partition number. "
                    f"Expected e.g. {example}"
                )
            out.append((topic, p))
    if not out:
        raise KafkaSourceOptionError(
            f"No topic partitions to assign: option '{option}' is {text!r}. Expected e.g. {example}"
        )
    return out


def offsets_to_json(offsets: PartitionOffsets) -> dict[str, dict[str, int]]:
    """The stream offset (and checkpoint) form: {topic: {"partition": offset}},
    topics and partitions in order so equal offsets serialise equally."""
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = int(offset)
    return out


def offsets_from_json(doc: dict) -> PartitionOffsets:
    """The inverse of offsets_to_json (Spark hands the checkpointed dict back)."""
    return {
        (topic, int(partition)): int(offset)
        for topic, partitions in doc.items()
        for partition, offset in partitions.items()
    }


@dataclass(frozen=True)
class OffsetRange:
    """Records [from_offset, until_offset) of one topic partition: one Spark task's input."""

    topic: str
    partition: int
    from_offset: int
    until_offset: int

    @property
    def size(self) -> int:
        return self.until_offset - self.from_offset


def plan_ranges(
    ranges: list[OffsetRange],
    min_partitions: int | None = None,
    max_records_per_partition: int | None = None,
) -> list[OffsetRange]:
    """Split offset ranges into Spark tasks, as Spark's KafkaOffsetRangeCalculator does.

    Empty ranges are dropped. By default one task per topic partition. With
    `minPartitions` larger than the number of ranges, each range gets a share of
    `minPartitions` proportional to its size (at least one), so the task count is
    approximately `minPartitions`. With `maxRecordsPerPartition`, no task holds
    more than that many records."""
    ranges = [r for r in ranges if r.size > 0]
    total = sum(r.size for r in ranges)
    out: list[OffsetRange] = []
    for r in ranges:
        parts = 1
        if min_partitions is not None and min_partitions > len(ranges):
            parts = max(1, round(r.size * min_partitions / total))
        if max_records_per_partition is not None:
            parts = max(parts, math.ceil(r.size / max_records_per_partition))
        parts = min(parts, r.size)
        for i in range(parts):
            start = r.from_offset + r.size * i // parts
            end = r.from_offset + r.size * (i + 1) // parts
            out.append(OffsetRange(r.topic, r.partition, start, end))
    return out


def rate_limit(
    start: PartitionOffsets, latest: PartitionOffsets, max_offsets: int
) -> PartitionOffsets:
    """End offsets for one micro-batch that reads at most `max_offsets` records in
    total, split across partitions in proportion to how far each is behind (as
    `maxOffsetsPerTrigger` does). A partition with any backlog moves by at least
    one offset while the budget lasts, so a small limit never stalls a partition."""
    backlog = {tp: max(0, latest[tp] - start.get(tp, latest[tp])) for tp in latest}
    total = sum(backlog.values())
    if total <= max_offsets:
        return dict(latest)
    end: PartitionOffsets = {}
    budget = max_offsets
    for tp in sorted(latest):
        begin = start.get(tp, latest[tp])
        share = max_offsets * backlog[tp] / total
        step = math.ceil(share) if 0 < share < 1 else math.floor(share)
        step = min(step, backlog[tp], budget)
        budget -= step
        end[tp] = begin + step
    return end
