"""kafkalab.client: the teaching client, shaped like Kafka's Java client.

producer   KafkaProducer, RecordAccumulator, Sender (batching, linger, idempotence)
consumer   KafkaConsumer, Fetcher (assign/seek/poll, auto.offset.reset, pipelined fetches)
admin      Admin (create/delete/list topics)
partitioner murmur2 for keys, sticky partitions for unkeyed records
network_client  connections, ApiVersions negotiation, metadata
"""

from kafkalab.client.admin import Admin
from kafkalab.client.consumer import ConsumerRecord, KafkaConsumer, TopicPartition
from kafkalab.client.producer import KafkaProducer, RecordMetadata

__all__ = [
    "Admin",
    "ConsumerRecord",
    "KafkaConsumer",
    "KafkaProducer",
    "RecordMetadata",
    "TopicPartition",
]
