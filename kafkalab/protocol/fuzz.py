"""Hostile frames: valid requests of every API and version, and seeded mutations of them.

What a protocol fuzzer feeds a broker (benchmarks/fuzz_protocol.py does, against
a live broker process). Pure: frames are bytes computed from a seed and a frame
number, so any frame of a run can be rebuilt alone to reproduce what it found.

    templates = sample_templates()             # one valid request per API and version
    fuzzer = HostileFrames(seed=7, templates=templates)
    hostile = fuzzer.frame(12345)              # the 12345th frame of run 7
    hostile.kind, hostile.data, hostile.chunks # what it is, its bytes, how many writes

A template is a whole request frame (size prefix included) and a map of its
slots: where each length (string, bytes), array count, fixed-width integer and
tagged-field section starts, found by walking the frame with its schema. The
mutations, each a way a real peer (buggy or malicious) goes wrong:

    bit_flip, byte_set      random bits or bytes anywhere after the size prefix
    truncate                the frame cut short, its size prefix telling the truth
    size_huge / negative    the size prefix beyond socket.request.max.bytes, or < 0
    size_short              the size prefix larger than what is sent, then silence
    size_small              the size prefix smaller: the rest reads as the next frame
    length_lie, count_lie   a string/bytes length or an array count set to a huge,
                            negative, or off-by-one value
    int_extreme             an integer field (partition, max_bytes, timeout, ...) set
                            to 0, -1, its minimum or maximum
    tagged                  unknown tagged fields (KIP-482) in a flexible version,
                            some with lying sizes or counts
    batch_field             a Produce's RecordBatch header field (codec bits, producer
                            id, epoch, sequence, counts, timestamps) set to an extreme,
                            with the CRC re-computed so the batch passes the CRC check
    batch_records           bytes inside a Produce's records (lengths, varints, deltas)
                            changed, with the CRC re-computed: only the broker's
                            LogValidator stands between them and the log
    wrong_api_key           the header names an unknown or another API
    wrong_version           the header names an unsupported or another version
    garbage                 random bytes behind a correct size prefix
    trailing                a valid request with bytes after its end
    valid                   the template itself, unmutated (the broker must answer)

Any mutation may also be sent in many small writes (`chunks`), and several frames
may go back to back in one write (`pipeline`). Templates also come from real
clients: `template_for(frame)` maps any request frame a schema decodes completely
(benchmarks/fuzz_protocol.py records librdkafka's through a proxy). Frame n of a
seed is the same bytes for the same list of templates.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kafkalab.kinds import Kind
from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.protocol.header import RequestHeader, encode_request, request_header_version
from kafkalab.protocol.messages import APIS, Api
from kafkalab.protocol.schema import Field, Struct, Versions
from kafkalab.protocol.types import (
    I32,
    INT8,
    STRING,
    ArrayOf,
    ProtocolError,
    Reader,
    read_length,
    read_tagged_fields,
)
from kafkalab.records.memory_records import build_batch
from kafkalab.records.record_batch import (
    ATTRIBUTES_OFFSET,
    BASE_OFFSET_OFFSET,
    BASE_SEQUENCE_OFFSET,
    BASE_TIMESTAMP_OFFSET,
    CRC_OFFSET,
    LAST_OFFSET_DELTA_OFFSET,
    LENGTH_OFFSET,
    MAX_TIMESTAMP_OFFSET,
    PARTITION_LEADER_EPOCH_OFFSET,
    PRODUCER_EPOCH_OFFSET,
    PRODUCER_ID_OFFSET,
    RECORD_BATCH_OVERHEAD,
    RECORDS_COUNT_OFFSET,
    compute_crc,
)
from kafkalab.records.varint import write_unsigned_varint

#: Topic names the samples use: requests read and write TARGET_TOPIC, CreateTopics
#: creates CREATED_TOPIC (validate_only where the version has it), DeleteTopics
#: deletes DOOMED_TOPIC. A fuzz run keeps its well-behaved clients on another topic.
TARGET_TOPIC = "fuzz-target"
CREATED_TOPIC = "fuzz-created"
DOOMED_TOPIC = "fuzz-doomed"
CLIENT_ID = "kafkalab-fuzz"

_SIZE = struct.Struct(">i")

# Values the samples give fields by name (Kafka's field names, snake_case): what a
# real client would send, so that an unmutated sample reaches deep into its handler.
_BY_NAME: dict[str, Any] = {
    "replica_id": -1,
    "acks": 1,
    "timeout_ms": 1000,
    "max_wait_ms": 20,
    "min_bytes": 1,
    "max_bytes": 1 << 20,
    "partition_max_bytes": 1 << 20,
    "fetch_offset": 0,
    "log_start_offset": -1,
    "timestamp": -1,
    "max_num_offsets": 1,
    "session_epoch": -1,
    "current_leader_epoch": -1,
    "leader_epoch": 0,
    "transactional_id": None,
    "transaction_timeout_ms": 60_000,
    "num_partitions": 1,
    "replication_factor": 1,
    "validate_only": True,
    "allow_auto_topic_creation": False,
    "client_software_name": CLIENT_ID,
    "client_software_version": "1.0",
    "group_id": "fuzz-group",
    "member_id": "",
    "generation_id": -1,
    "generation_id_or_member_epoch": -1,
    "session_timeout_ms": 10_000,
    "rebalance_timeout_ms": 10_000,
    "protocol_type": "consumer",
    "key_type": 0,
    "key": "fuzz-group",
    "producer_id": -1,
    "producer_epoch": -1,
}
_TOPIC_FIELDS = ("name", "topic", "topic_name")


def _sample_value(f: Field, api_key: int, version: int, flexible: bool) -> Any:
    if isinstance(f.type, list):
        return [_sample_struct(f.type, api_key, version, flexible)]
    if isinstance(f.type, Struct):
        return _sample_struct(f.type.fields, api_key, version, flexible)
    if f.name in _BY_NAME:
        value = _BY_NAME[f.name]
        if value is None and version not in f._nullable:
            return "fuzz-txn"  # a transactional id where it may not be null
        return value
    if f.name.endswith("transactional_id"):
        return "fuzz-txn"
    if f.name in _TOPIC_FIELDS:
        return {ApiKeys.CREATE_TOPICS: CREATED_TOPIC}.get(api_key, TARGET_TOPIC)
    if f.name in ("partition", "partition_index"):
        return 0
    if f.name == "topic_names":
        return [DOOMED_TOPIC]
    if f.name == "records":
        return build_batch([b"fuzz-value"])
    if isinstance(f.type, ArrayOf):
        return [] if f.type.item is STRING else [0]
    return f.default_value()


def _sample_struct(fields: list[Field], api_key: int, version: int, flexible: bool) -> dict:
    return {f.name: _sample_value(f, api_key, version, flexible) for f in fields}


def sample_body(api: Api, version: int) -> dict:
    """A valid request body of `api` at `version`, with the values a client would send."""
    flexible = api.request.is_flexible(version)
    return _sample_struct(api.request.fields, api.key, version, flexible)


class SlotKind(Kind):
    """What a slot of a frame holds."""

    LENGTH = "length"  # of a string, bytes or records
    COUNT = "count"  # of an array
    INT = "int"  # a fixed-width integer
    TAGGED = "tagged"  # a tagged-field section (flexible versions)


@dataclass(frozen=True)
class Slot:
    """A place in a frame a mutation aims at: `pos` counts from the frame's first
    byte (the size prefix); `width` is 2/4/8 for fixed integers and classic
    lengths, 0 for an unsigned varint (compact lengths and counts)."""

    pos: int
    kind: SlotKind
    width: int


@dataclass(frozen=True)
class Template:
    """A valid request frame (size prefix included) and the slots found in it."""

    api_key: int
    version: int
    data: bytes
    slots: tuple[Slot, ...]
    source: str = "schema"  # "schema", or the name of the client it was captured from

    @property
    def flexible(self) -> bool:
        return any(s.kind == SlotKind.TAGGED for s in self.slots)


def _walk(r: Reader, fields: list[Field], version: int, flexible: bool, out: list[Slot]) -> None:
    """Read a struct as read_struct does, noting where each slot starts (+4: the
    size prefix is not in `r`)."""
    for f in fields:
        if version not in Versions.parse(f.versions) or f.tag is not None:
            continue  # a tagged field is in the tagged section, read below
        nullable = version in Versions.parse(f.nullable)
        width = 0 if flexible else 4
        if isinstance(f.type, Struct):
            if nullable and INT8.read(r, flexible, False) < 0:
                continue
            _walk(r, f.type.fields, version, flexible, out)
        elif isinstance(f.type, list):
            out.append(Slot(r.pos + 4, SlotKind.COUNT, width))
            n = read_length(r, flexible, I32)
            for _ in range(n or 0):
                _walk(r, f.type, version, flexible, out)
        elif isinstance(f.type, ArrayOf):
            out.append(Slot(r.pos + 4, SlotKind.COUNT, width))
            n = read_length(r, flexible, I32)
            for _ in range(n or 0):
                _walk_value(r, f.type.item, flexible, False, out)
        else:
            _walk_value(r, f.type, flexible, nullable, out)
    if flexible:
        out.append(Slot(r.pos + 4, SlotKind.TAGGED, 0))
        read_tagged_fields(r)


def _walk_value(r: Reader, t: Any, flexible: bool, nullable: bool, out: list[Slot]) -> None:
    if t.name in ("string", "bytes", "records"):
        width = 0 if flexible else (2 if t.name == "string" else 4)
        out.append(Slot(r.pos + 4, SlotKind.LENGTH, width))
    elif hasattr(t, "struct") and t.name != "bool":
        out.append(Slot(r.pos + 4, SlotKind.INT, t.struct.size))
    t.read(r, flexible, nullable)


def template_for(
    frame: bytes, apis: Mapping[int, Api] = APIS, source: str = "schema"
) -> Template | None:
    """The template of a valid request frame (size prefix included), or None when
    it is not a request of an API and version in `apis` that decodes completely."""
    try:
        r = Reader(memoryview(frame)[4:])
        api_key, version = struct.unpack_from(">hh", frame, 4)
        api = apis.get(api_key)
        if api is None or not api.supports(version):
            return None
        slots = [
            Slot(4, SlotKind.INT, 2),  # api key
            Slot(6, SlotKind.INT, 2),  # api version
            Slot(8, SlotKind.INT, 4),  # correlation id
            Slot(12, SlotKind.LENGTH, 2),  # client id
        ]
        r.pos = 8
        STRING.read(r, False, True)
        if request_header_version(api, version) >= 2:
            slots.append(Slot(r.pos + 4, SlotKind.TAGGED, 0))
            read_tagged_fields(r)
        _walk(r, api.request.fields, version, api.request.is_flexible(version), slots)
        if r.remaining():
            return None
    except (ProtocolError, struct.error):
        return None
    return Template(api_key, version, bytes(frame), tuple(slots), source)


def sample_templates(apis: Mapping[int, Api] = APIS) -> list[Template]:
    """One template per API and version in `apis`, from sample_body."""
    out = []
    for api in sorted(apis.values(), key=lambda a: a.key):
        for version in range(api.min_version, api.max_version + 1):
            header = RequestHeader(api.key, version, 1, CLIENT_ID)
            frame = encode_request(header, sample_body(api, version), apis)
            template = template_for(frame, apis)
            if template is None:
                raise AssertionError(f"the sample {api.name} v{version} does not walk")
            out.append(template)
    return out


@dataclass(frozen=True)
class Hostile:
    """One hostile frame to send: its bytes (size prefixes included), in how many
    writes, and whether to hang up after it instead of waiting for an answer."""

    number: int
    kind: Mutation
    api_key: int  # the template's (what the frame was before mutation)
    version: int
    data: bytes
    chunks: int = 1
    hang_up: bool = False  # the frame promises more bytes than it sends


class Mutation(Kind):
    """What a hostile frame is (the module docstring says each); the value is the
    name reports and the benchmark's JSON use."""

    VALID = "valid"
    BIT_FLIP = "bit_flip"
    BYTE_SET = "byte_set"
    TRUNCATE = "truncate"
    SIZE_HUGE = "size_huge"
    SIZE_NEGATIVE = "size_negative"
    SIZE_SHORT = "size_short"
    SIZE_SMALL = "size_small"
    LENGTH_LIE = "length_lie"
    COUNT_LIE = "count_lie"
    INT_EXTREME = "int_extreme"
    TAGGED = "tagged"
    WRONG_API_KEY = "wrong_api_key"
    WRONG_VERSION = "wrong_version"
    GARBAGE = "garbage"
    TRAILING = "trailing"
    PIPELINE = "pipeline"
    BATCH_FIELD = "batch_field"
    BATCH_RECORDS = "batch_records"


# Relative weights; the order is part of a seed's frames (the draw picks by index).
KINDS: dict[Mutation, int] = {
    Mutation.VALID: 4,
    Mutation.BIT_FLIP: 14,
    Mutation.BYTE_SET: 6,
    Mutation.TRUNCATE: 8,
    Mutation.SIZE_HUGE: 2,
    Mutation.SIZE_NEGATIVE: 2,
    Mutation.SIZE_SHORT: 3,
    Mutation.SIZE_SMALL: 3,
    Mutation.LENGTH_LIE: 14,
    Mutation.COUNT_LIE: 12,
    Mutation.INT_EXTREME: 12,
    Mutation.TAGGED: 6,
    Mutation.WRONG_API_KEY: 4,
    Mutation.WRONG_VERSION: 5,
    Mutation.GARBAGE: 2,
    Mutation.TRAILING: 3,
    Mutation.PIPELINE: 3,
    Mutation.BATCH_FIELD: 8,
    Mutation.BATCH_RECORDS: 8,
}

# The mutations a "pipeline" frame strings together, and the slot each lie aims at.
_PIPELINED = (Mutation.VALID, Mutation.BIT_FLIP, Mutation.LENGTH_LIE, Mutation.INT_EXTREME)
_SLOT_LIES = {
    Mutation.LENGTH_LIE: SlotKind.LENGTH,
    Mutation.COUNT_LIE: SlotKind.COUNT,
    Mutation.INT_EXTREME: SlotKind.INT,
}

# RecordBatch v2 header fields (position in the batch, width) a "batch_field" mutation
# sets to an extreme value, re-computing the CRC so the batch gets past the CRC check.
_BATCH_FIELDS = (
    (BASE_OFFSET_OFFSET, 8),
    (LENGTH_OFFSET, 4),
    (PARTITION_LEADER_EPOCH_OFFSET, 4),
    (ATTRIBUTES_OFFSET, 2),
    (LAST_OFFSET_DELTA_OFFSET, 4),
    (BASE_TIMESTAMP_OFFSET, 8),
    (MAX_TIMESTAMP_OFFSET, 8),
    (PRODUCER_ID_OFFSET, 8),
    (PRODUCER_EPOCH_OFFSET, 2),
    (BASE_SEQUENCE_OFFSET, 4),
    (RECORDS_COUNT_OFFSET, 4),
)

_INT_EXTREMES = {
    1: (0, -1, 1, 2, -128, 127),
    2: (0, -1, 1, -(2**15), 2**15 - 1, 2**14),
    4: (0, -1, 1, -2, -(2**31), 2**31 - 1, 2**30, 2**24, 65536),
    8: (0, -1, 1, -2, -(2**63), 2**63 - 1, 2**62, 2**40),
}


#: What a mutation gives: the bytes to send, and whether to hang up after them.
_Sent = tuple[bytes, bool]


def _frame(body: bytes | bytearray) -> bytes:
    return _SIZE.pack(len(body)) + bytes(body)


class HostileFrames:
    """Frame number n of run `seed` is always the same bytes (per-frame random state)."""

    def __init__(
        self,
        seed: int,
        templates: Iterable[Template],
        kinds: Mapping[str, int] = KINDS,  # names (Mutation values) -> weights
        split_probability: float = 0.05,
    ) -> None:
        self.seed = seed
        self.templates = list(templates)
        if not self.templates:
            raise ValueError("no templates to mutate")
        self.kinds = [Mutation.parse(k, "mutation") for k in kinds]
        self.weights = [kinds[k] for k in kinds]
        self.split_probability = split_probability
        self.known_keys = sorted({t.api_key for t in self.templates})
        self.flexible = [t for t in self.templates if t.flexible]
        self.with_records = [t for t in self.templates if _batch_start(t) is not None]

    def frame(self, number: int) -> Hostile:
        rng = random.Random(f"{self.seed}:{number}")
        template = self.templates[rng.randrange(len(self.templates))]
        kind = rng.choices(self.kinds, self.weights)[0]
        data, hang_up = self._mutate(rng, kind, template, number)
        chunks = 1
        if not hang_up and rng.random() < self.split_probability:
            chunks = rng.randint(2, min(64, max(2, len(data))))
        return Hostile(number, kind, template.api_key, template.version, data, chunks, hang_up)

    # -- mutations ---------------------------------------------------------------------------

    def _with_correlation_id(self, template: Template, number: int) -> bytearray:
        out = bytearray(template.data)
        struct.pack_into(">i", out, 8, number & 0x7FFFFFFF)
        return out

    def _mutate(
        self, rng: random.Random, kind: Mutation, t: Template, number: int
    ) -> tuple[bytes, bool]:
        """The frame of mutation `kind` of template `t`, and whether to hang up after it."""
        frame = self._with_correlation_id(t, number)
        return self._MUTATIONS[kind](self, rng, t, frame, number)

    # Each mutation: (rng, template, its frame with the correlation id set, frame
    # number) -> (bytes to send, hang up after them). The order of rng draws in each
    # is part of a seed's frames.

    def _valid(self, rng: random.Random, t: Template, frame: bytearray, number: int) -> _Sent:
        return bytes(frame), False

    def _bit_flip(self, rng: random.Random, t: Template, frame: bytearray, number: int) -> _Sent:
        body = frame[4:]
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(len(body))
            body[i] ^= 1 << rng.randrange(8)
        return _frame(body), False

    def _byte_set(self, rng: random.Random, t: Template, frame: bytearray, number: int) -> _Sent:
        body = frame[4:]
        for _ in range(rng.randint(1, 4)):
            body[rng.randrange(len(body))] = rng.choice((0x00, 0xFF, 0x7F, 0x80, 0x01))
        return _frame(body), False

    def _truncate(self, rng: random.Random, t: Template, frame: bytearray, number: int) -> _Sent:
        body = frame[4:]
        return _frame(body[: rng.randrange(len(body))]), False

    def _size_huge(self, rng: random.Random, t: Template, frame: bytearray, number: int) -> _Sent:
        body = frame[4:]
        size = rng.choice((2**31 - 1, 2**30, 100 * 1024 * 1024 + 1, rng.randrange(2**31)))
        return _SIZE.pack(size) + bytes(body[: rng.randrange(len(body) + 1)]), True

    def _size_negative(
        self, rng: random.Random, t: Template, frame: bytearray, number: int
    ) -> _Sent:
        size = rng.choice((-1, -(2**31), -rng.randrange(1, 2**31)))
        return _SIZE.pack(size) + bytes(frame[4:]), False

    def _size_short(self, rng: random.Random, t: Template, frame: bytearray, number: int) -> _Sent:
        body = frame[4:]
        cut = rng.randrange(len(body))
        return _SIZE.pack(len(body)) + bytes(body[:cut]), True

    def _size_small(self, rng: random.Random, t: Template, frame: bytearray, number: int) -> _Sent:
        body = frame[4:]
        return _SIZE.pack(rng.randrange(len(body))) + bytes(body), False

    def _slot_lie(
        self, rng: random.Random, t: Template, frame: bytearray, number: int, want: SlotKind
    ) -> _Sent:
        slots = [s for s in t.slots if s.kind == want and s.pos != 8]  # not correlation id
        if not slots:
            return self._mutate(rng, Mutation.BIT_FLIP, t, number)
        return _frame(self._rewrite_slot(rng, frame, rng.choice(slots))[4:]), False

    def _length_lie(self, rng: random.Random, t: Template, frame: bytearray, number: int) -> _Sent:
        return self._slot_lie(rng, t, frame, number, SlotKind.LENGTH)

    def _count_lie(self, rng: random.Random, t: Template, frame: bytearray, number: int) -> _Sent:
        return self._slot_lie(rng, t, frame, number, SlotKind.COUNT)

    def _int_extreme(self, rng: random.Random, t: Template, frame: bytearray, number: int) -> _Sent:
        return self._slot_lie(rng, t, frame, number, SlotKind.INT)

    def _tagged_fields(
        self, rng: random.Random, t: Template, frame: bytearray, number: int
    ) -> _Sent:
        if not t.flexible and self.flexible:
            t = rng.choice(self.flexible)
            frame = self._with_correlation_id(t, number)
        slots = [s for s in t.slots if s.kind == SlotKind.TAGGED]
        if not slots:
            return self._mutate(rng, Mutation.TRAILING, t, number)
        return _frame(self._tagged(rng, frame, rng.choice(slots))[4:]), False

    def _batch_field_extreme(
        self, rng: random.Random, t: Template, frame: bytearray, number: int
    ) -> _Sent:
        return self._in_a_batch(rng, t, number, self._batch_field)

    def _in_a_batch(
        self,
        rng: random.Random,
        t: Template,
        number: int,
        damage: Callable[[random.Random, bytearray, Template], bytearray],
    ) -> _Sent:
        """`damage` applied to a template that carries a RecordBatch (an int_extreme
        frame when there is none)."""
        if not self.with_records:
            return self._mutate(rng, Mutation.INT_EXTREME, t, number)
        t = rng.choice(self.with_records)
        frame = self._with_correlation_id(t, number)
        return _frame(damage(rng, frame, t)[4:]), False

    def _wrong_api_key(
        self, rng: random.Random, t: Template, frame: bytearray, number: int
    ) -> _Sent:
        body = frame[4:]
        key = rng.choice(
            (rng.choice(self.known_keys), rng.randrange(-(2**15), 2**15), 17, 99, 1000, -1)
        )
        struct.pack_into(">h", body, 0, key)
        return _frame(body), False

    def _wrong_version(
        self, rng: random.Random, t: Template, frame: bytearray, number: int
    ) -> _Sent:
        body = frame[4:]
        version = rng.choice((t.version + 1, t.version - 1, -1, 2**15 - 1, rng.randrange(64)))
        struct.pack_into(">h", body, 2, max(-(2**15), min(2**15 - 1, version)))
        return _frame(body), False

    def _garbage(self, rng: random.Random, t: Template, frame: bytearray, number: int) -> _Sent:
        return _frame(rng.randbytes(rng.randrange(0, 200))), False

    def _trailing(self, rng: random.Random, t: Template, frame: bytearray, number: int) -> _Sent:
        return _frame(frame[4:] + rng.randbytes(rng.randint(1, 64))), False

    def _pipeline(self, rng: random.Random, t: Template, frame: bytearray, number: int) -> _Sent:
        parts = [
            self._mutate(rng, rng.choice(_PIPELINED), t, number)[0]
            for _ in range(rng.randint(2, 5))
        ]
        return b"".join(parts), False

    def _batch_records_damaged(
        self, rng: random.Random, t: Template, frame: bytearray, number: int
    ) -> _Sent:
        return self._in_a_batch(rng, t, number, self._batch_records)

    _MUTATIONS: dict[Mutation, Callable[..., _Sent]] = {
        Mutation.VALID: _valid,
        Mutation.BIT_FLIP: _bit_flip,
        Mutation.BYTE_SET: _byte_set,
        Mutation.TRUNCATE: _truncate,
        Mutation.SIZE_HUGE: _size_huge,
        Mutation.SIZE_NEGATIVE: _size_negative,
        Mutation.SIZE_SHORT: _size_short,
        Mutation.SIZE_SMALL: _size_small,
        Mutation.LENGTH_LIE: _length_lie,
        Mutation.COUNT_LIE: _count_lie,
        Mutation.INT_EXTREME: _int_extreme,
        Mutation.TAGGED: _tagged_fields,
        Mutation.WRONG_API_KEY: _wrong_api_key,
        Mutation.WRONG_VERSION: _wrong_version,
        Mutation.GARBAGE: _garbage,
        Mutation.TRAILING: _trailing,
        Mutation.PIPELINE: _pipeline,
        Mutation.BATCH_FIELD: _batch_field_extreme,
        Mutation.BATCH_RECORDS: _batch_records_damaged,
    }

    def _rewrite_slot(self, rng: random.Random, frame: bytearray, slot: Slot) -> bytearray:
        if slot.kind == SlotKind.INT:
            value = rng.choice(_INT_EXTREMES[slot.width])
            struct.pack_into(
                {1: ">b", 2: ">h", 4: ">i", 8: ">q"}[slot.width], frame, slot.pos, value
            )
            return frame
        # A length or a count: read the real one to lie around it.
        if slot.width == 0:
            old_end = _varint_end(frame, slot.pos)
            real = _read_uvarint(frame, slot.pos) - 1
        else:
            old_end = slot.pos + slot.width
            fmt = ">h" if slot.width == 2 else ">i"
            real = struct.unpack_from(fmt, frame, slot.pos)[0]
        remaining = len(frame) - old_end
        limit = 2**15 - 1 if slot.width == 2 else 2**31 - 1
        value = rng.choice(
            (
                limit,
                limit // 2 + 1,
                remaining + 1,
                remaining + rng.randint(2, 1000),
                real + 1,
                real - 1,
                -1,
                -2,
                -limit - 1,
                0,
                rng.randrange(limit),
            )
        )
        if slot.width == 0:
            raw = bytearray()
            # Compact: length + 1 as an unsigned varint; 0 is null; also varints that
            # overflow 32 bits or run five bytes long.
            if value < -1:
                encoded = rng.choice((b"\xff\xff\xff\xff\x0f", b"\xff\xff\xff\xff\xff\x01"))
                raw += encoded
            else:
                write_unsigned_varint(raw, value + 1)
            return frame[: slot.pos] + raw + frame[old_end:]
        value = max(-limit - 1, min(limit, value))
        struct.pack_into(">h" if slot.width == 2 else ">i", frame, slot.pos, value)
        return frame

    def _batch_field(self, rng: random.Random, frame: bytearray, t: Template) -> bytearray:
        start = _batch_start(t)
        assert start is not None
        at, width = rng.choice(_BATCH_FIELDS)
        fmt = {2: ">h", 4: ">i", 8: ">q"}[width]
        if at == ATTRIBUTES_OFFSET:  # codec, timestamp type, transactional, control bits
            value = rng.choice((1, 2, 3, 4, 5, 7, 0x08, 0x10, 0x20, 0x30, 0x40, -1))
        else:
            value = rng.choice(_INT_EXTREMES[width])
        struct.pack_into(fmt, frame, start + at, value)
        size = struct.unpack_from(">i", t.data, start + LENGTH_OFFSET)[0] + 12
        crc = compute_crc(frame, start, min(size, len(frame) - start))
        struct.pack_into(">I", frame, start + CRC_OFFSET, crc)
        return frame

    def _batch_records(self, rng: random.Random, frame: bytearray, t: Template) -> bytearray:
        start = _batch_start(t)
        assert start is not None
        size = struct.unpack_from(">i", t.data, start + LENGTH_OFFSET)[0] + 12
        first = start + RECORD_BATCH_OVERHEAD
        end = min(start + size, len(frame))
        if end <= first:
            return self._batch_field(rng, frame, t)
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(first, end)
            frame[at] = rng.choice(
                (0x00, 0x01, 0x7F, 0x80, 0xFF, frame[at] ^ 0x01, frame[at] ^ 0x40)
            )
        crc = compute_crc(frame, start, end - start)
        struct.pack_into(">I", frame, start + CRC_OFFSET, crc)
        return frame

    def _tagged(self, rng: random.Random, frame: bytearray, slot: Slot) -> bytearray:
        old_end = _varint_end(frame, slot.pos)
        raw = bytearray()
        count = rng.randint(1, 4)
        lie = rng.random() < 0.3
        write_unsigned_varint(raw, count if not lie else rng.choice((count + 1, 2**31, 2**32 - 1)))
        tag = rng.choice((0, 1, 7, 2**31 - 1, rng.randrange(2**20)))
        for _ in range(count):
            value = rng.randbytes(rng.randint(0, 16))
            write_unsigned_varint(raw, tag)
            size = len(value)
            if lie and rng.random() < 0.5:
                size = rng.choice((size + 1, 2**31 - 1, 2**32 - 1))
            write_unsigned_varint(raw, size)
            raw += value
            tag += rng.randint(0, 3)  # sometimes repeated, sometimes ascending
        # The old section (normally a single 0) is replaced.
        return frame[: slot.pos] + raw + frame[old_end:]


def _batch_start(t: Template) -> int | None:
    """Where the RecordBatch of a Produce template starts (behind the length of its
    last field, `records`), if it holds one."""
    if t.api_key != ApiKeys.PRODUCE:
        return None
    slot = [s for s in t.slots if s.kind == SlotKind.LENGTH][-1]
    start = _varint_end(t.data, slot.pos) if slot.width == 0 else slot.pos + slot.width
    if len(t.data) - start < RECORD_BATCH_OVERHEAD or t.data[start + 16] != 2:
        return None
    return start


def _varint_end(buf: bytes | bytearray, pos: int) -> int:
    while buf[pos] & 0x80:
        pos += 1
    return pos + 1


def _read_uvarint(buf: bytes | bytearray, pos: int) -> int:
    value = shift = 0
    while True:
        byte = buf[pos]
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value
        pos += 1
        shift += 7


__all__ = [
    "CLIENT_ID",
    "CREATED_TOPIC",
    "DOOMED_TOPIC",
    "KINDS",
    "TARGET_TOPIC",
    "Hostile",
    "HostileFrames",
    "Mutation",
    "Slot",
    "SlotKind",
    "Template",
    "sample_body",
    "sample_templates",
    "template_for",
]
