"""Idempotent producers in the log: retries deduplicated, gaps and zombies refused,
state rebuilt from snapshots and from the log after a restart or a crash."""

from __future__ import annotations

import shutil

import pytest

from kafkalab.records import SimpleRecord, build_batch
from kafkalab.storage import LogConfig, UnifiedLog
from kafkalab.storage.producer_state_manager import (
    InvalidProducerEpochError,
    OutOfOrderSequenceError,
)


def idem(seq: int, n: int = 2, pid: int = 7, epoch: int = 0) -> bytes:
    return build_batch(
        [SimpleRecord(b"r%d" % (seq + i)) for i in range(n)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
    )


def test_retries_of_the_last_five_batches_return_their_first_offsets(tmp_path):
    log = UnifiedLog(tmp_path / "p-0")
    firsts = [log.append_as_leader(idem(seq)).first_offset for seq in range(0, 14, 2)]
    assert firsts == list(range(0, 14, 2))
    end = log.log_end_offset
    for seq in range(4, 14, 2):  # the last five batches
        info = log.append_as_leader(idem(seq))
        assert info.duplicate and info.first_offset == seq
    assert log.log_end_offset == end  # nothing written again
    with pytest.raises(OutOfOrderSequenceError):  # older than the last five: not a known retry
        log.append_as_leader(idem(0))
    log.close()


def test_gaps_and_old_epochs_are_refused(tmp_path):
    log = UnifiedLog(tmp_path / "p-0")
    log.append_as_leader(idem(0))
    with pytest.raises(OutOfOrderSequenceError, match="next expected is 2") as err:
        log.append_as_leader(idem(5))
    assert err.value.code == 45
    log.append_as_leader(idem(0, epoch=1))  # a new instance: epoch 1 starts at 0
    with pytest.raises(InvalidProducerEpochError) as fenced:
        log.append_as_leader(idem(2, epoch=0))  # the zombie
    assert fenced.value.code == 47
    with pytest.raises(OutOfOrderSequenceError, match="must start at 0"):
        log.append_as_leader(idem(3, epoch=2))
    # Other producers and non-idempotent batches are not affected.
    assert log.append_as_leader(idem(0, pid=8)).first_offset == 4
    assert log.append_as_leader(build_batch([b"plain"])).first_offset == 6
    log.close()


def test_state_survives_a_clean_restart_and_a_crash(tmp_path):
    config = LogConfig(segment_bytes=300)
    log = UnifiedLog(tmp_path / "p-0", config)
    for seq in range(0, 20, 2):
        log.append_as_leader(idem(seq))
    assert list((tmp_path / "p-0").glob("*.snapshot"))  # taken at each roll
    # A crash: the files as they are, no snapshot at the end.
    crashed = tmp_path / "crash-0"
    shutil.copytree(tmp_path / "p-0", crashed)
    log.close()
    for directory in (tmp_path / "p-0", crashed):
        reopened = UnifiedLog(directory, config)
        assert reopened.append_as_leader(idem(18)).duplicate
        with pytest.raises(OutOfOrderSequenceError):
            reopened.append_as_leader(idem(30))
        assert reopened.append_as_leader(idem(20)).first_offset == 20
        reopened.close()


def test_truncation_forgets_the_batches_it_removes(tmp_path):
    log = UnifiedLog(tmp_path / "p-0")
    for seq in range(0, 10, 2):
        log.append_as_leader(idem(seq))
    log.truncate_to(6)  # batches with sequences 6 and 8 are gone
    assert log.append_as_leader(idem(6)).first_offset == 6  # not a duplicate any more
    log.close()


def test_idle_producers_expire_but_not_while_their_transaction_is_open(tmp_path):
    """producer.id.expiration.ms: a producer idle that long is forgotten (its next
    batch starts a new producer, whatever its sequence); one with a transaction
    still open is kept, since the LSO depends on it (Kafka: removeExpiredProducers)."""
    from kafkalab.storage import LogManager

    now = [1_000_000]
    manager = LogManager(
        tmp_path,
        producer_id_expiration_ms=60_000,
        producer_id_expiration_check_interval_ms=1000,
        clock=lambda: now[0],
    )
    log = manager.get_or_create_log("t", 0)

    def batch(pid: int, seq: int, transactional: bool = False) -> bytes:
        return build_batch(
            [SimpleRecord(b"r", timestamp=now[0])],
            producer_id=pid,
            producer_epoch=0,
            base_sequence=seq,
            is_transactional=transactional,
        )

    log.append_as_leader(batch(7, 0))
    log.append_as_leader(batch(8, 0, transactional=True))
    now[0] += 30_000
    log.append_as_leader(batch(9, 0))  # active 30 s later
    now[0] += 30_000
    assert manager.tick()["producer-expiration"] == {("t", 0): [7]}
    assert set(log.producer_state.producers) == {8, 9}
    log.append_as_leader(batch(7, 40))  # a new producer to the log: any sequence
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(batch(9, 40))  # still known: the gap is refused
    now[0] += 600_000
    assert manager.tick()["producer-expiration"] == {("t", 0): [7, 9]}  # 8 is in a txn
    manager.shutdown()
