"""kafkalab.cluster: LocalCluster, a controller and N brokers as processes on loopback."""

from kafkalab.cluster.local_cluster import LocalCluster

__all__ = ["LocalCluster"]
