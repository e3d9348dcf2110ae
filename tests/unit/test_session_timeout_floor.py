"""KAFKALAB_MIN_SESSION_TIMEOUT_MS: Binder's floor under every cluster's session timeout."""

import pytest

from kafkalab.cluster.local_cluster import (
    MIN_SESSION_TIMEOUT_ENV,
    LocalCluster,
    effective_session_timeout_ms,
)


def test_without_the_variable_a_cluster_keeps_what_it_asks_for(monkeypatch, tmp_path) -> None:
    monkeypatch.delenv(MIN_SESSION_TIMEOUT_ENV, raising=False)
    assert effective_session_timeout_ms(500) == 500
    assert LocalCluster(base_dir=tmp_path, session_timeout_ms=500).session_timeout_ms == 500


def test_the_floor_raises_short_sessions_and_leaves_longer_ones(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv(MIN_SESSION_TIMEOUT_ENV, "3000")
    assert effective_session_timeout_ms(500) == 3000
    assert effective_session_timeout_ms(9000) == 9000
    assert LocalCluster(base_dir=tmp_path, session_timeout_ms=500).session_timeout_ms == 3000


def test_a_floor_that_is_no_number_says_so(monkeypatch) -> None:
    monkeypatch.setenv(MIN_SESSION_TIMEOUT_ENV, "3s")
    with pytest.raises(ValueError, match="whole number of ms"):
        effective_session_timeout_ms(500)
