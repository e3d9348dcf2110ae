"""One module per API family: thin adapters from a request body onto ReplicaManager,
the MetadataCache or a coordinator (see KafkaApis for the map)."""
