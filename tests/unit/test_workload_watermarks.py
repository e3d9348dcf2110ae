"""read_final_log asks for the watermarks again while a leadership moves, and
only then: other errors, and a move that outlasts the timeout, are raised."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from kafkalab.cluster.workload import _watermarks


class Answers:
    """A consumer whose get_watermark_offsets answers from a list, errors raised."""

    def __init__(self, *answers) -> None:
        self.answers, self.asked = list(answers), 0

    def get_watermark_offsets(self, tp, timeout):
        self.asked += 1
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, int):
            raise KafkaException(KafkaError(answer))
        return answer


def test_a_moving_leadership_is_waited_out():
    consumer = Answers(
        KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE, (0, 20)
    )
    assert _watermarks(consumer, "t", 0, timeout_s=5) == (0, 20)
    assert consumer.asked == 3


def test_other_errors_and_a_move_past_the_timeout_are_raised():
    with pytest.raises(KafkaException):
        _watermarks(Answers(KafkaError.UNKNOWN_TOPIC_OR_PART), "t", 0, timeout_s=5)
    forever = Answers(KafkaError.NOT_LEADER_FOR_PARTITION)
    with pytest.raises(KafkaException):
        _watermarks(forever, "t", 0, timeout_s=0.3)
    assert forever.asked > 1
