"""The producer's settings: Conveyor's own (Python names) and librdkafka's (passed through).

Everything is checked when the producer is built; an error names the setting.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from conveyor.driver.oauth import oauth_callback
from conveyor.errors import ConfigurationError
from conveyor.producer.partitioners import PARTITIONERS
from conveyor.serialization import Serializer, json_dumps
from conveyor.validation import check_count, check_kafka_values, check_seconds

__all__ = ["KAFKA_DEFAULTS", "VARIANT_SETTINGS", "Middleware", "ProducerSettings"]

Middleware = Callable[[dict[str, Any]], "dict[str, Any] | None"]
"""Receives each message as a dict and returns it (changed or not); raising rejects it."""

KAFKA_DEFAULTS: Mapping[str, Any] = {
    # Keep data: every in-sync replica acknowledges, retries cannot duplicate or reorder.
    "acks": "all",
    "enable.idempotence": True,
    # Hand a lone message to the broker at once. librdkafka's default waits 5 ms, and even
    # 0.5 ms cost produce_sync a millisecond (its timers tick in whole milliseconds); under
    # load batches still fill while earlier requests are in flight (measured in bench/).
    "linger.ms": 0,
}
"""librdkafka settings Conveyor's producer sets unless the application sets them."""

VARIANT_SETTINGS = frozenset(
    {
        "acks",
        "request.required.acks",
        "request.timeout.ms",
        "message.timeout.ms",
        "delivery.timeout.ms",
        "compression.type",
        "compression.codec",
        "compression.level",
        "partitioner",
        "linger.ms",
        "enable.idempotence",
    }
)
"""The per-topic librdkafka settings a :meth:`Producer.variant` may change."""


@dataclass(frozen=True)
class ProducerSettings:
    """Validated producer settings (see :class:`conveyor.Producer` for each one's meaning);
    ``kafka`` is left out of the ``repr`` (it may hold secrets)."""

    kafka: dict[str, Any] = field(repr=False)
    id: str
    wait_timeout: float | None = None
    queue_full_timeout: float = 10.0
    reload_on_fatal_error: bool = True
    max_reloads: int = 10
    reload_backoff: float = 1.0
    serializer: Serializer = json_dumps
    middleware: tuple[Middleware, ...] = field(default_factory=tuple)

    @property
    def transactional(self) -> bool:
        return bool(self.kafka.get("transactional.id"))

    @property
    def max_message_bytes(self) -> int:
        return int(self.kafka.get("message.max.bytes", 1_000_000))

    @property
    def message_timeout(self) -> float:
        """Seconds after which librdkafka gives up on a message and reports it failed."""
        for name in ("message.timeout.ms", "delivery.timeout.ms"):
            if name in self.kafka:
                return float(self.kafka[name]) / 1000
        return 300.0

    @property
    def partitioner(self) -> str:
        return str(self.kafka.get("partitioner", "consistent_random"))


def build_settings(
    kafka: Mapping[str, Any] | None,
    *,
    id: str | None,
    wait_timeout: float | None,
    queue_full_timeout: float,
    reload_on_fatal_error: bool,
    max_reloads: int,
    reload_backoff: float,
    serializer: Serializer | None,
    middleware: Sequence[Middleware],
    oauth_token_provider: Any = None,
) -> ProducerSettings:
    """Check every setting and fill in the defaults.

    Raises:
        ConfigurationError: naming the first setting that is wrong.
    """
    if kafka is None:
        kafka = {}
    if not isinstance(kafka, Mapping):
        raise ConfigurationError(
            f"kafka must be a dict of librdkafka settings, got {type(kafka).__name__}", "kafka"
        )
    for key in kafka:
        if not isinstance(key, str):
            raise ConfigurationError(f"kafka setting names must be strings, got {key!r}", "kafka")
    check_kafka_values(kafka)
    if isinstance(middleware, str | bytes) or not isinstance(middleware, Sequence):
        raise ConfigurationError(
            f"middleware must be a list of callables, got {middleware!r}", "middleware"
        )
    merged = {**KAFKA_DEFAULTS, **kafka}
    if (
        str(merged.get("acks", merged.get("request.required.acks"))) in ("0", "1")
        and "enable.idempotence" not in kafka
    ):
        merged["enable.idempotence"] = False  # idempotence needs acks=all; the user chose fewer
    if not merged.get("bootstrap.servers"):
        raise ConfigurationError(
            'kafka["bootstrap.servers"] is required (for example "127.0.0.1:9092")',
            "bootstrap.servers",
        )
    check_seconds("wait_timeout", wait_timeout, allow_none=True)
    check_seconds("queue_full_timeout", queue_full_timeout)
    check_seconds("reload_backoff", reload_backoff)
    check_count("max_reloads", max_reloads, minimum=0)
    if not isinstance(reload_on_fatal_error, bool):
        raise ConfigurationError(
            f"reload_on_fatal_error must be True or False, got {reload_on_fatal_error!r}",
            "reload_on_fatal_error",
        )
    if serializer is not None and not callable(serializer):
        raise ConfigurationError(f"serializer must be callable, got {serializer!r}", "serializer")
    for index, item in enumerate(middleware):
        if not callable(item):
            raise ConfigurationError(
                f"middleware[{index}] must be callable, got {item!r}", "middleware"
            )
    partitioner = str(merged.get("partitioner", "consistent_random"))
    if partitioner not in PARTITIONERS:
        raise ConfigurationError(
            f'kafka["partitioner"] must be one of {", ".join(sorted(PARTITIONERS))}, got {partitioner!r}',
            "partitioner",
        )
    if oauth_token_provider is not None:  # checked as App(oauth_token_provider=) checks it
        merged["oauth_cb"] = oauth_callback(oauth_token_provider, kafka)
    producer_id = id or str(merged.get("client.id") or f"conveyor-producer-{uuid.uuid4().hex[:8]}")
    merged.setdefault("client.id", producer_id)
    return ProducerSettings(
        kafka=merged,
        id=producer_id,
        wait_timeout=wait_timeout,
        queue_full_timeout=queue_full_timeout,
        reload_on_fatal_error=reload_on_fatal_error,
        max_reloads=max_reloads,
        reload_backoff=reload_backoff,
        serializer=serializer or json_dumps,
        middleware=tuple(middleware),
    )
