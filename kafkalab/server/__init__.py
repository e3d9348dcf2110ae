"""kafkalab.server: the broker and controller processes.

broker.py                    KafkaBroker (Kafka: BrokerServer), BrokerThread, BrokerProcess
socket_server.py             Acceptor / Processor / RequestChannel / handler tasks
kafka_apis.py                KafkaApis: dispatch by ApiKeys to apis/<family>.py
apis/                        one module per API family, thin adapters
metadata_cache.py            MetadataCache: KRaftMetadataCache or StandaloneMetadataCache
broker_lifecycle_manager.py  registration and heartbeats with the controller (own thread)
metadata_listener.py         BrokerMetadataListener: apply the metadata log
replica_fetcher.py           ReplicaFetcherManager: followers truncate, then fetch
alter_partition_manager.py   ISR changes to the controller
add_partitions_to_txn_manager.py  a leader asks a transaction coordinator (KIP-890 parts 1, 2)
features.py                  the features ApiVersions finalizes (transaction.version)
inter_broker_connection.py   a broker's connection to the controller or a leader
controller_server.py         the controller process (ControllerServer, ControllerApis)
kafka_raft_manager.py        KafkaRaftManager: a KRaft voter (kafkalab.raft) on the network
quorum_meta_log_listener.py  the controller on its KRaft quorum (controller.quorum.voters,
                             or a quorum of one): activate/renounce, writes through
                             Raft, NOT_CONTROLLER
controller_channel.py        a broker's connection to the active controller: KnownLeader, leader hints
config.py, producer_ids.py, link_faults.py, replica_state.py
"""
