"""The producer (WaterDrop's role): produce_sync / produce_async / bursts, transactions,
middleware, variants; validation before librdkafka; a flushing close."""

from conveyor.driver.handles import BatchDeliveryHandle, DeliveryHandle, DeliveryReport
from conveyor.producer.producer import MESSAGE_TIMEOUT_MARGIN, Producer, Variant
from conveyor.producer.settings import KAFKA_DEFAULTS, Middleware
from conveyor.producer.transactions import Transactions

__all__ = [
    "KAFKA_DEFAULTS",
    "MESSAGE_TIMEOUT_MARGIN",
    "BatchDeliveryHandle",
    "DeliveryHandle",
    "DeliveryReport",
    "Middleware",
    "Producer",
    "Transactions",
    "Variant",
]
