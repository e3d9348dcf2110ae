"""Typed errors of the Spark source and sink; each message says what to do."""

from __future__ import annotations


class KafkaSourceOptionError(ValueError):
    """A source or sink option is missing, malformed or not allowed, or names a
    partition that does not exist. Raised while the query is analysed or planned,
    before any Spark job runs; the message names the option and what to set instead."""


class KafkaDataLossError(RuntimeError):
    """Offsets the query must read are gone (aged out by retention, truncated, or
    the topic deleted) and `failOnDataLoss` is true (the default)."""


class KafkaWriteError(RuntimeError):
    """The producer could not deliver records; the message carries Kafka's error.
    Raised in the Spark task, so the task (and then the job) fails."""
