"""FetchSessionHandler: the fetcher's side of a fetch session (KIP-227).

Kafka's class: org.apache.kafka.clients.FetchSessionHandler (the consumer's
Fetcher and the follower's ReplicaFetcherThread both use one per broker). The
broker's side is `fetch_session.py`.

- The first fetch is full: every partition, session 0, epoch 0 (asking for a
  session). The answer names the session (0: the broker had no room; the next
  fetch is full again).
- Later fetches are incremental, in that session with the next epoch: they list
  only partitions added or whose request changed (fetch offset, log start
  offset, leader epoch, max bytes) and forget the ones no longer fetched.
- An error answer (FETCH_SESSION_ID_NOT_FOUND: a new session; any other, e.g.
  INVALID_FETCH_SESSION_EPOCH: close the session and open a new one), an
  incremental answer naming a partition not in the session, or no answer at all
  (`handle_error`: the broker may have moved the epoch on) make the next fetch full.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from kafkalab.errors import Errors
from kafkalab.server.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    PartitionData,
    TopicPartition,
    next_epoch,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FetchRequestData:
    """What the next Fetch sends: its session, the partitions it lists and forgets."""

    session_id: int
    epoch: int
    to_send: dict[TopicPartition, PartitionData]
    to_forget: list[TopicPartition]

    @property
    def full(self) -> bool:
        return self.epoch in (INITIAL_EPOCH, FINAL_EPOCH)


class FetchSessionHandler:
    """One fetcher's session with one broker."""

    def __init__(self, node: int) -> None:
        self.node = node
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        # the partitions the broker's session holds, with what it last heard of each
        self.session_partitions: dict[TopicPartition, PartitionData] = {}

    def build(self, wanted: dict[TopicPartition, PartitionData]) -> FetchRequestData:
        """The next fetch of `wanted` (every partition to fetch now, its request)."""
        if self.epoch == INITIAL_EPOCH:
            self.session_partitions = dict(wanted)
            return FetchRequestData(self.session_id, self.epoch, dict(wanted), [])
        session = self.session_partitions
        to_send = {tp: d for tp, d in wanted.items() if session.get(tp) != d}
        to_forget = [tp for tp in session if tp not in wanted]
        self.session_partitions = dict(wanted)
        return FetchRequestData(self.session_id, self.epoch, to_send, to_forget)

    def handle_response(self, request: FetchRequestData, response: dict) -> bool:
        """Learn from the answer to `request`; False when it is not to be used (a
        session error, or an incremental answer the session cannot hold)."""
        error = Errors(response.get("error_code", 0))
        if error != Errors.NONE:
            log.info("fetch session %d with broker %d: %s", self.session_id, self.node, error.name)
            if error == Errors.FETCH_SESSION_ID_NOT_FOUND:
                self.session_id = INVALID_SESSION_ID
            self.epoch = INITIAL_EPOCH  # close the session (if any) and open a new one
            return False
        if request.full:
            self.session_id = response.get("session_id", INVALID_SESSION_ID)
            self.epoch = INITIAL_EPOCH if self.session_id == INVALID_SESSION_ID else 1
            return True
        answered = {
            (t["topic"], p["partition_index"])
            for t in response["responses"]
            for p in t["partitions"]
        }
        stray = answered - self.session_partitions.keys()
        if stray:
            log.warning(
                "fetch session %d with broker %d answered partitions not in it: %s",
                self.session_id, self.node, sorted(stray)[:5],
            )  # fmt: skip
            self.epoch = INITIAL_EPOCH
            return False
        self.epoch = next_epoch(self.epoch)
        return True

    def handle_error(self) -> None:
        """No answer came (a lost connection, a cancelled request): the broker may have
        moved the session on, so close it and start a new one (Kafka:
        FetchMetadata.nextCloseExisting)."""
        self.epoch = INITIAL_EPOCH
