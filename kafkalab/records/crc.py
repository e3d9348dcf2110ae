"""CRC-32C (Castagnoli), the checksum of RecordBatch v2.

Kafka's class: org.apache.kafka.common.utils.Crc32C. We use the `crc32c`
package, which is written in C and uses the CPU's CRC32 instruction where
there is one: checksumming is on the produce hot path.
"""

from crc32c import crc32c as _crc32c


def crc32c(data: bytes | bytearray | memoryview, value: int = 0) -> int:
    """CRC-32C of `data`, continuing from `value` (0 to start a new one)."""
    return _crc32c(data, value)
