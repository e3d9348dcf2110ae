"""The protocol fuzz's CI slice: benchmarks/fuzz_protocol.py's own campaign, 20,000
hostile frames against a live broker process while librdkafka produces and consumes
on another topic (the benchmark sends 1,000,000; see the README's Fuzz figures).

Whatever it finds becomes a test in tests/unit/test_protocol_fuzz_findings.py."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytest.importorskip("confluent_kafka", reason="the well-behaved clients are librdkafka's")

FRAMES = 20_000
SEED = 2026
#: A generous bound on the broker's peak RSS (VmHWM): it idles at about 40 MB; a
#: hostile length it allocated (a 2 GB string, 2**31 partitions) would blow through it.
PEAK_RSS_BOUND_MB = 300


def load_benchmark():
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "fuzz_protocol.py"
    spec = importlib.util.spec_from_file_location("fuzz_protocol", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    fuzz = load_benchmark()
    return fuzz.run_fuzz(FRAMES, SEED, log_dir=str(tmp_path_factory.mktemp("fuzz")))


def test_every_frame_was_sent_and_every_advertised_api_was_fuzzed(report):
    assert report.frames == FRAMES
    assert set(report.api_keys_sent) >= set(report.advertised_api_keys)
    assert len(report.advertised_api_keys) >= 9
    assert report.captured_templates > 0  # librdkafka's own requests are in the corpus
    # The campaign exercised both outcomes: refusals and answers.
    assert report.closed_by_broker > FRAMES // 4
    assert report.answered > FRAMES // 10


def test_the_broker_logged_no_unhandled_exception_and_every_answer_decodes(report):
    assert report.broker_exceptions == []
    assert report.undecodable_responses == []
    assert report.valid_refused == []


def test_the_well_behaved_clients_saw_no_error(report):
    assert report.well_behaved_errors == []
    assert report.well_behaved_acked > 0
    assert report.well_behaved_consumed == report.well_behaved_acked


def test_the_broker_survived_stopped_cleanly_and_let_every_connection_go(report):
    assert report.broker_alive_after
    assert report.broker_exit_code == 0
    assert report.sockets_end <= report.sockets_start


def test_the_broker_never_allocated_a_hostile_length(report):
    assert 0 < report.rss_peak_kb < PEAK_RSS_BOUND_MB * 1024
