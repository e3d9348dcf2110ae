"""kafkalab.controller: cluster metadata as a log of records, elections, broker liveness."""
