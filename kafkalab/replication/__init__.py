"""kafkalab.replication: partitions, the ReplicaManager and delayed operations (purgatory)."""
