"""OpenTelemetry's messaging semantic conventions: the attribute names Conveyor's spans and
metrics use (written out here, so the extra needs only ``opentelemetry-api``)."""

from __future__ import annotations

__all__ = [
    "BATCH_COUNT",
    "CLIENT_ID",
    "CONSUMER_GROUP",
    "DESTINATION",
    "ERROR_TYPE",
    "KAFKA",
    "KEY",
    "OFFSET",
    "OPERATION_NAME",
    "OPERATION_TYPE",
    "PARTITION",
    "SYSTEM",
]

SYSTEM = "messaging.system"
DESTINATION = "messaging.destination.name"
PARTITION = "messaging.destination.partition.id"
CONSUMER_GROUP = "messaging.consumer.group.name"
OFFSET = "messaging.kafka.offset"
KEY = "messaging.kafka.message.key"
BATCH_COUNT = "messaging.batch.message_count"
OPERATION_TYPE = "messaging.operation.type"
OPERATION_NAME = "messaging.operation.name"
CLIENT_ID = "messaging.client.id"
ERROR_TYPE = "error.type"

KAFKA = "kafka"
