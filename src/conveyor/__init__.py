"""Conveyor: a Kafka processing framework for Python.

The application and its consumers (:class:`App`, :class:`Consumer`), the producer
(:class:`Producer`), the monitor (:class:`Monitor`) and the exception hierarchy
(:class:`ConveyorError`); the development broker is :mod:`conveyor.broker`. The
documentation site's guides and API reference say what each is for.
"""

from conveyor._version import __version__
from conveyor.admin import Admin
from conveyor.app import App
from conveyor.consumer import Consumer
from conveyor.driver.handles import BatchDeliveryHandle, DeliveryHandle, DeliveryReport
from conveyor.driver.oauth import OAuthToken
from conveyor.errors import (
    AuthenticationError,
    BatchDeliveryError,
    ConfigurationError,
    ConveyorError,
    DeliveryError,
    DeserializationError,
    InvalidMessageError,
    KafkaError,
    MessageValidationError,
    NotAssignedError,
    ProducerClosedError,
    ProducerForkedError,
    QueueFullError,
    RemoteError,
    RpcClientClosedError,
    RpcTimeoutError,
    TransactionError,
    WaitTimeoutError,
)
from conveyor.instrumentation import Event, LoggingListener, Monitor
from conveyor.iterator import Iterator
from conveyor.messages import Deserializers, Message, Messages
from conveyor.processing.filters import Delay, Expire, Filter, Throttle, Verdict
from conveyor.producer import Producer, Variant

__all__ = [
    "Admin",
    "App",
    "AuthenticationError",
    "BatchDeliveryError",
    "BatchDeliveryHandle",
    "ConfigurationError",
    "Consumer",
    "ConveyorError",
    "Delay",
    "DeliveryError",
    "DeliveryHandle",
    "DeliveryReport",
    "DeserializationError",
    "Deserializers",
    "Event",
    "Expire",
    "Filter",
    "InvalidMessageError",
    "Iterator",
    "KafkaError",
    "LoggingListener",
    "Message",
    "MessageValidationError",
    "Messages",
    "Monitor",
    "NotAssignedError",
    "OAuthToken",
    "Producer",
    "ProducerClosedError",
    "ProducerForkedError",
    "QueueFullError",
    "RemoteError",
    "RpcClientClosedError",
    "RpcTimeoutError",
    "Throttle",
    "TransactionError",
    "Variant",
    "Verdict",
    "WaitTimeoutError",
    "__version__",
]
