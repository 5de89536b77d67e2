"""Conveyor: a Kafka processing framework for Python.

The public API grows part by part (see DESIGN.md): the producer
(:class:`Producer`), the monitor (:class:`Monitor`), the development broker
(:mod:`conveyor.broker`) and the exception hierarchy (:mod:`conveyor.errors`).
"""

from conveyor.driver.handles import BatchDeliveryHandle, DeliveryHandle, DeliveryReport
from conveyor.errors import (
    BatchDeliveryError,
    ConfigurationError,
    ConveyorError,
    DeliveryError,
    InvalidMessageError,
    KafkaError,
    ProducerClosedError,
    ProducerForkedError,
    QueueFullError,
    TransactionError,
    WaitTimeoutError,
)
from conveyor.instrumentation import Event, LoggingListener, Monitor
from conveyor.producer import Producer, Variant

__version__ = "0.1.0"

__all__ = [
    "BatchDeliveryError",
    "BatchDeliveryHandle",
    "ConfigurationError",
    "ConveyorError",
    "DeliveryError",
    "DeliveryHandle",
    "DeliveryReport",
    "Event",
    "InvalidMessageError",
    "KafkaError",
    "LoggingListener",
    "Monitor",
    "Producer",
    "ProducerClosedError",
    "ProducerForkedError",
    "QueueFullError",
    "TransactionError",
    "Variant",
    "WaitTimeoutError",
    "__version__",
]
