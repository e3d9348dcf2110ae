"""kafkalab.server: the broker (config, asyncio socket server, KafkaApis, lifecycle)."""
