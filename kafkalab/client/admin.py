"""The teaching Admin client: create, delete and list topics (Kafka: Admin / KafkaAdminClient)."""

from __future__ import annotations

from kafkalab.client.network_client import NetworkClient
from kafkalab.errors import Errors, KafkaError
from kafkalab.protocol.api_keys import ApiKeys


class Admin:
    def __init__(self, bootstrap_servers: str) -> None:
        self.client = NetworkClient(bootstrap_servers)

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int = 1,
        configs: dict[str, str] | None = None,
        validate_only: bool = False,
    ) -> None:
        """CreateTopics; raises KafkaError with the broker's code and message."""
        body = {
            "topics": [
                {
                    "name": name,
                    "num_partitions": partitions,
                    "replication_factor": replication_factor,
                    "assignments": [],
                    "configs": [{"name": k, "value": str(v)} for k, v in (configs or {}).items()],
                }
            ],
            "timeout_ms": 30_000,
            "validate_only": validate_only,
        }
        (result,) = self.client.any_connection().request(ApiKeys.CREATE_TOPICS, body)["topics"]
        if result["error_code"]:
            raise KafkaError(result["error_code"], result.get("error_message") or name)

    def delete_topic(self, name: str) -> None:
        response = self.client.any_connection().request(
            20, {"topic_names": [name], "timeout_ms": 30_000}
        )
        (result,) = response["responses"]
        if result["error_code"]:
            raise KafkaError(result["error_code"], name)

    def list_topics(self) -> dict[str, int]:
        """topic -> number of partitions."""
        response = self.client.refresh_metadata(None, allow_auto_topic_creation=False)
        return {
            t["name"]: len(t["partitions"])
            for t in response["topics"]
            if t["error_code"] == Errors.NONE
        }

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
