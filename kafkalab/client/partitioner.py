"""Choosing a partition, as the Java producer's default does.

Kafka's classes: BuiltInPartitioner and Utils.murmur2. A record with a key goes
to `toPositive(murmur2(key)) % partitions`, so the same key lands on the same
partition whatever client wrote it (Java, librdkafka's `murmur2_random`,
kafka-python, this one). A record without a key goes to a "sticky" partition,
kept until the batch for it is sent, then another is picked (KIP-480): fewer,
fuller batches than round robin.
"""

from __future__ import annotations

import random

_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's 32-bit murmur2 (seed 0x9747b28c), as a signed int32."""
    length = len(data)
    h = (0x9747B28C ^ length) & _MASK
    whole = length - length % 4
    for i in range(0, whole, 4):
        k = data[i] | data[i + 1] << 8 | data[i + 2] << 16 | data[i + 3] << 24
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = (h * _M) & _MASK
        h ^= k
    rest = length % 4
    if rest == 3:
        h ^= data[whole + 2] << 16
    if rest >= 2:
        h ^= data[whole + 1] << 8
    if rest >= 1:
        h ^= data[whole]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(value: int) -> int:
    return value & 0x7FFFFFFF


def partition_for_key(key: bytes, num_partitions: int) -> int:
    return to_positive(murmur2(key)) % num_partitions


class StickyPartitioner:
    """Per topic, the partition unkeyed records go to until its batch is sent."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.Random()
        self._sticky: dict[str, int] = {}

    def partition(self, topic: str, num_partitions: int) -> int:
        current = self._sticky.get(topic)
        if current is None or current >= num_partitions:
            current = self._rng.randrange(num_partitions)
            self._sticky[topic] = current
        return current

    def on_new_batch(self, topic: str, num_partitions: int, previous: int) -> None:
        """The sticky partition's batch is full or sent: move to another one."""
        if self._sticky.get(topic) == previous and num_partitions > 1:
            choices = [p for p in range(num_partitions) if p != previous]
            self._sticky[topic] = self._rng.choice(choices)
