"""kafkalab: a small but complete Kafka, built to be read, run and checked.

Layers, bottom up, named after Kafka's own classes (see README, "Architecture"):
records -> protocol -> storage -> replication -> controller/coordinator -> server/client -> cluster.
"""

__version__ = "0.1.0"
