"""OpenTelemetry's messaging semantic conventions: the attribute names Conveyor's spans and
metrics use (written out here, so the extra needs only ``opentelemetry-api``), and how a key
and a failure become attribute values."""

from __future__ import annotations

from typing import Any

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
    "error_type",
    "key_text",
    "mark_failed",
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


def mark_failed(api: Any, span: Any, kind: str, error: object) -> None:
    """``error.type`` and an error status on ``span``."""
    span.set_attribute(ERROR_TYPE, kind)
    span.set_status(api.Status(api.StatusCode.ERROR, str(error)))


def key_text(key: Any) -> str | None:
    """A message key as the ``messaging.kafka.message.key`` attribute (UTF-8, invalid bytes replaced)."""
    if key is None:
        return None
    if type(key) is str:
        return key
    return bytes(key).decode("utf-8", "replace")


def error_type(error: Any) -> str:
    """``error.type`` of a failure: librdkafka's error name, else the exception's class."""
    name = getattr(error, "name", None)
    if isinstance(name, str) and name:  # Conveyor's KafkaError and DeliveryError
        return name
    if callable(name):
        try:
            return str(name())
        except Exception:
            pass
    code = getattr(error, "code", None)
    if isinstance(code, str):
        return code
    return type(error).__qualname__
