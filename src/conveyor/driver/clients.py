"""Build librdkafka clients (through confluent-kafka) and map their set-up errors."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import confluent_kafka
import confluent_kafka.admin
from confluent_kafka import KafkaException

from conveyor.driver.errors import configuration_error

__all__ = ["client_versions", "create_admin", "create_producer"]

LIBRDKAFKA_LOGGER = logging.getLogger("conveyor.librdkafka")


def client_versions() -> dict[str, str]:
    """The confluent-kafka and librdkafka versions in use."""
    return {
        "confluent-kafka": str(confluent_kafka.version()),
        "librdkafka": confluent_kafka.libversion()[0],
    }


def create_producer(
    config: Mapping[str, Any],
    *,
    on_error: Callable[[Any], None] | None = None,
    on_statistics: Callable[[str], None] | None = None,
) -> Any:
    """A librdkafka producer for ``config`` (librdkafka names), its logs routed to ``logging``.

    Raises:
        ConfigurationError: librdkafka refused a setting; the error names it.
    """
    settings = dict(config)
    settings.setdefault("logger", LIBRDKAFKA_LOGGER)
    if on_error is not None:
        settings["error_cb"] = on_error
    if on_statistics is not None:
        settings["stats_cb"] = on_statistics
    try:
        return confluent_kafka.Producer(settings)
    except (KafkaException, ValueError, TypeError) as exc:
        raise configuration_error(exc, "producer", config) from exc


def create_admin(config: Mapping[str, Any]) -> Any:
    """A librdkafka admin client for ``config``.

    Raises:
        ConfigurationError: librdkafka refused a setting; the error names it.
    """
    settings = dict(config)
    settings.setdefault("logger", LIBRDKAFKA_LOGGER)
    try:
        return confluent_kafka.admin.AdminClient(settings)
    except (KafkaException, ValueError, TypeError) as exc:
        raise configuration_error(exc, "admin client", config) from exc
