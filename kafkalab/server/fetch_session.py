"""Fetch sessions (KIP-227): a fetcher names its partitions once, then only what changed.

Kafka's classes: kafka.server.FetchSession, FetchSessionCache, FetchManager and
the FetchContext kinds (core/src/main/scala/kafka/server/FetchSession.scala).
A Fetch (v7+) carries `session_id` and `session_epoch`:

- epoch -1 (FINAL_EPOCH): **sessionless**, every partition asked and answered
  (librdkafka sends session 0, epoch -1); a session id given is closed;
- epoch 0 (INITIAL_EPOCH): **full**: every partition asked and answered, and the
  broker tries to keep a session of them; the answer names its id (0: no room in
  the cache, carry on sessionless). A session id given is closed first;
- epoch > 0: **incremental**, in session `session_id`: the request lists only
  partitions added or changed (fetch offset, log start offset, leader epoch,
  max bytes) and `forgotten_topics_data` the ones to drop; the others keep what
  the session has. The answer carries only partitions whose records, high
  watermark or log start offset changed since the last answer, or that have an
  error (Kafka's CachedPartition.maybeUpdateResponseData; the last stable offset
  is not compared, as in Kafka). Partitions answered move to the end of the
  session, so each gets its turn within max_bytes. An unknown id answers
  FETCH_SESSION_ID_NOT_FOUND, another epoch than the session's
  INVALID_FETCH_SESSION_EPOCH, both with no partitions; the fetcher then fetches
  in full again. FETCH_SESSION_TOPIC_ID_ERROR does not apply: kafkalab speaks
  Fetch up to v11, before topic ids (v13).

The cache holds `max.incremental.fetch.session.cache.slots` sessions (1000).
When it is full a new session may evict, as Kafka's `tryEvict` decides: the
session used least recently if unused for `min.incremental.fetch.session.eviction.ms`
(120 s); else the least valuable evictable one (ordered by privileged, size, id)
if the new one is worth at least as much. Followers' sessions are privileged;
a session is evictable by all once older than the eviction time, by a privileged
newcomer at once when it is not privileged itself.

Where kafkalab does less work than Kafka (the bytes on the wire are the same):
Kafka reads every partition of the session on every fetch and then drops the
unchanged ones from the answer. `IncrementalFetchContext.unchanged` lets the
Fetch handler skip the read of a partition whose fetch offset already is where
the fetcher may read to and whose high watermark and log start offset are those
of the last answer: its read would return no records and the answer would
leave it out. At 3,000 partitions a follower follows about 1,000 from each
leader, and an acks=all produce waits for a round of its fetch: reading all of
them made each round O(partitions) (issue 28).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import NamedTuple

from kafkalab.errors import Errors

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
DEFAULT_CACHE_SLOTS = 1000  # max.incremental.fetch.session.cache.slots
DEFAULT_EVICTION_MS = 120_000  # min.incremental.fetch.session.eviction.ms
_MAX_INT32 = (1 << 31) - 1


def next_epoch(epoch: int) -> int:
    """The epoch after `epoch` (Kafka: FetchMetadata.nextEpoch): it wraps to 1."""
    if epoch < 0:
        return FINAL_EPOCH  # the final epoch stays final
    return 1 if epoch == _MAX_INT32 else epoch + 1


class PartitionData(NamedTuple):
    """What a fetch request says of one partition (Kafka: FetchRequest.PartitionData).
    A tuple: a follower makes one for each partition it follows, each round."""

    fetch_offset: int
    log_start_offset: int  # the fetcher's (a follower's), -1 from a consumer
    max_bytes: int
    current_leader_epoch: int = -1


class CachedPartition:
    """A session's partition: the request's last parameters and what the last answer
    told of it (Kafka's CachedPartition). `high_watermark` -1 after an error, so the
    partition is answered again when the error goes away."""

    __slots__ = ("data", "high_watermark", "local_log_start_offset")

    def __init__(self, data: PartitionData, high_watermark: int = -1, log_start: int = -1):
        self.data = data
        self.high_watermark = high_watermark
        self.local_log_start_offset = log_start

    def must_respond(self, result: PartitionResult, update: bool) -> bool:
        """Whether the answer carries this partition (Kafka: maybeUpdateResponseData);
        with `update`, remember what this answer tells."""
        must = result.records_size > 0
        if self.high_watermark != result.high_watermark:
            must = True
            if update:
                self.high_watermark = result.high_watermark
        if self.local_log_start_offset != result.log_start_offset:
            must = True
            if update:
                self.local_log_start_offset = result.log_start_offset
        if result.error != Errors.NONE:
            must = True
            if update:
                self.high_watermark = -1
        return must


@dataclass(frozen=True)
class PartitionResult:
    """What the answer for one partition says, as far as a session cares."""

    error: Errors
    high_watermark: int
    log_start_offset: int
    records_size: int


class FetchSession:
    """One fetcher's partitions (Kafka's FetchSession), in the order the next answer
    serves them (a dict keeps insertion order; answered partitions move to its end)."""

    def __init__(
        self,
        session_id: int,
        privileged: bool,
        partitions: dict[TopicPartition, CachedPartition],
        now_ms: int,
    ) -> None:
        self.id = session_id
        self.privileged = privileged
        self.partitions = partitions
        self.creation_ms = now_ms
        self.last_used_ms = now_ms
        self.epoch = next_epoch(INITIAL_EPOCH)
        self.cached_size = -1  # what the cache last counted; -1 when not in it

    def update(
        self, fetch_data: dict[TopicPartition, PartitionData], to_forget: Iterable[TopicPartition]
    ) -> tuple[list[TopicPartition], list[TopicPartition], list[TopicPartition]]:
        """Apply an incremental request: (added, updated, removed)."""
        added, updated, removed = [], [], []
        for tp, data in fetch_data.items():
            cached = self.partitions.get(tp)
            if cached is None:
                self.partitions[tp] = CachedPartition(data)
                added.append(tp)
            else:
                cached.data = data
                updated.append(tp)
        for tp in to_forget:
            if self.partitions.pop(tp, None) is not None:
                removed.append(tp)
        return added, updated, removed

    def evictable_key(self) -> tuple[bool, int, int]:
        return (self.privileged, self.cached_size, self.id)


class FetchSessionCache:
    """The broker's sessions, at most `max_entries` (Kafka's FetchSessionCache)."""

    def __init__(
        self,
        max_entries: int = DEFAULT_CACHE_SLOTS,
        eviction_ms: int = DEFAULT_EVICTION_MS,
        rng: random.Random | None = None,
    ) -> None:
        self.max_entries = max_entries
        self.eviction_ms = eviction_ms
        self.sessions: dict[int, FetchSession] = {}
        self.evictions = 0
        self._rng = rng or random.Random()

    def __len__(self) -> int:
        return len(self.sessions)

    def get(self, session_id: int) -> FetchSession | None:
        return self.sessions.get(session_id)

    def total_partitions(self) -> int:
        return sum(len(s.partitions) for s in self.sessions.values())

    def _new_session_id(self) -> int:
        while True:
            session_id = self._rng.randint(1, _MAX_INT32 - 1)
            if session_id not in self.sessions:
                return session_id

    def maybe_create_session(
        self,
        now_ms: int,
        privileged: bool,
        partitions: Callable[[], dict[TopicPartition, CachedPartition]],
        size: int,
    ) -> int:
        """A new session's id, or INVALID_SESSION_ID when there is no room for it."""
        if len(self.sessions) >= self.max_entries and not self.try_evict(
            privileged, (privileged, size, 0), now_ms
        ):
            return INVALID_SESSION_ID
        session = FetchSession(self._new_session_id(), privileged, partitions(), now_ms)
        self.sessions[session.id] = session
        self.touch(session, now_ms)
        return session.id

    def _evictable(self, session: FetchSession, privileged: bool, now_ms: int) -> bool:
        old = now_ms - session.creation_ms > self.eviction_ms
        if privileged:
            return old or not session.privileged
        return old

    def try_evict(self, privileged: bool, key: tuple[bool, int, int], now_ms: int) -> bool:
        """Make room for a new session worth `key`: evict a stale session (unused for
        the eviction time), else the least valuable evictable one if it is worth
        no more than `key`. Kafka keeps sorted trees; a scan of at most
        `max_entries` sessions when the cache is full does here."""
        if not self.sessions:
            return False
        least_used = min(self.sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now_ms - least_used.last_used_ms > self.eviction_ms:
            self.remove(least_used.id)
            self.evictions += 1
            return True
        # evictable as of its last use, as Kafka files it in its trees at `touch`
        evictable = [
            s for s in self.sessions.values() if self._evictable(s, privileged, s.last_used_ms)
        ]
        if not evictable:
            return False
        cheapest = min(evictable, key=FetchSession.evictable_key)
        if key < cheapest.evictable_key():
            return False
        self.remove(cheapest.id)
        self.evictions += 1
        return True

    def remove(self, session_id: int) -> FetchSession | None:
        session = self.sessions.pop(session_id, None)
        if session is not None:
            session.cached_size = -1
        return session

    def touch(self, session: FetchSession, now_ms: int) -> None:
        """The session was used now (Kafka's touch also re-sorts its trees: here a
        session's evictability is judged from its creation time and `last_used_ms`)."""
        session.last_used_ms = now_ms
        session.cached_size = len(session.partitions)


class FetchContext:
    """What one Fetch reads and how its answer is made (Kafka's FetchContext)."""

    error = Errors.NONE

    def partitions(self) -> list[tuple[TopicPartition, PartitionData]]:
        """The partitions to read, in the order to read them."""
        raise NotImplementedError

    def unchanged(self, tp: TopicPartition, fetchable_end: int, hw: int, log_start: int) -> bool:
        """True when `tp` may be left unread: its answer would be left out. Only an
        incremental context says so."""
        return False

    def respond(
        self, results: list[tuple[TopicPartition, PartitionResult]]
    ) -> tuple[Errors, int, set[TopicPartition]]:
        """(top-level error, session id, which partitions the answer carries)."""
        raise NotImplementedError


class SessionErrorContext(FetchContext):
    """The request named a session it may not use: the error alone, no partitions."""

    def __init__(self, error: Errors) -> None:
        self.error = error

    def partitions(self) -> list[tuple[TopicPartition, PartitionData]]:
        return []

    def respond(self, results):
        return self.error, INVALID_SESSION_ID, set()


class SessionlessFetchContext(FetchContext):
    """Every partition asked, every one answered, no session (epoch -1, or Fetch < v7)."""

    def __init__(self, fetch_data: dict[TopicPartition, PartitionData]) -> None:
        self.fetch_data = fetch_data

    def partitions(self) -> list[tuple[TopicPartition, PartitionData]]:
        return list(self.fetch_data.items())

    def respond(self, results):
        return Errors.NONE, INVALID_SESSION_ID, {tp for tp, _ in results}


class FullFetchContext(SessionlessFetchContext):
    """Every partition asked and answered; the answer opens a session of them."""

    def __init__(
        self,
        cache: FetchSessionCache,
        fetch_data: dict[TopicPartition, PartitionData],
        is_follower: bool,
        now_ms: int,
    ) -> None:
        super().__init__(fetch_data)
        self.cache = cache
        self.is_follower = is_follower
        self.now_ms = now_ms

    def respond(self, results):
        def cached() -> dict[TopicPartition, CachedPartition]:
            return {
                tp: CachedPartition(self.fetch_data[tp], r.high_watermark, r.log_start_offset)
                for tp, r in results
            }

        session_id = self.cache.maybe_create_session(
            self.now_ms, self.is_follower, cached, len(results)
        )
        return Errors.NONE, session_id, {tp for tp, _ in results}


class IncrementalFetchContext(FetchContext):
    """A fetch in an existing session: reads the session's partitions, answers the
    changed ones."""

    def __init__(self, session: FetchSession) -> None:
        self.session = session
        self.expected_epoch = session.epoch  # already moved on for this request

    def partitions(self) -> list[tuple[TopicPartition, PartitionData]]:
        return [(tp, c.data) for tp, c in self.session.partitions.items()]

    def unchanged(self, tp: TopicPartition, fetchable_end: int, hw: int, log_start: int) -> bool:
        cached = self.session.partitions.get(tp)
        return (
            cached is not None
            and cached.data.fetch_offset == fetchable_end
            and cached.high_watermark == hw
            and cached.local_log_start_offset == log_start
        )

    def respond(self, results):
        session = self.session
        if session.epoch != self.expected_epoch:
            # another request of this session came meanwhile (a duplicate)
            return Errors.INVALID_FETCH_SESSION_EPOCH, session.id, set()
        carried = set()
        for tp, result in results:
            cached = session.partitions.get(tp)
            if cached is not None and cached.must_respond(result, update=True):
                carried.add(tp)
                session.partitions[tp] = session.partitions.pop(tp)  # to the end
        return Errors.NONE, session.id, carried


class FetchManager:
    """Makes each Fetch's context from its session id and epoch (Kafka's FetchManager)."""

    def __init__(self, cache: FetchSessionCache, clock: Callable[[], int]) -> None:
        self.cache = cache
        self.clock = clock

    def new_context(
        self,
        session_id: int,
        epoch: int,
        fetch_data: dict[TopicPartition, PartitionData],
        to_forget: list[TopicPartition],
        is_follower: bool,
    ) -> FetchContext:
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):  # a full request
            if session_id != INVALID_SESSION_ID:
                self.cache.remove(session_id)  # a full request closes the session it names
            if epoch == FINAL_EPOCH:
                return SessionlessFetchContext(fetch_data)
            return FullFetchContext(self.cache, fetch_data, is_follower, self.clock())
        session = self.cache.get(session_id)
        if session is None:
            return SessionErrorContext(Errors.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            return SessionErrorContext(Errors.INVALID_FETCH_SESSION_EPOCH)
        session.update(fetch_data, to_forget)
        if not session.partitions:
            self.cache.remove(session.id)  # nothing left: the session ends
            return SessionlessFetchContext(fetch_data)
        self.cache.touch(session, self.clock())
        session.epoch = next_epoch(session.epoch)
        return IncrementalFetchContext(session)
