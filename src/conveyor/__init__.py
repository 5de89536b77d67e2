"""Conveyor: a Kafka processing framework for Python.

The application and its consumers (:class:`App`, :class:`Consumer`), the producer
(:class:`Producer`), the monitor (:class:`Monitor`) and the exception hierarchy
(:class:`ConveyorError`); the development broker is :mod:`conveyor.broker`. The
documentation site's guides and API reference say what each is for.
"""

from importlib import import_module as _import_module
from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

from conveyor._version import __version__
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
from conveyor.messages import Deserializers, Message, Messages
from conveyor.producer import Producer, Variant

if _TYPE_CHECKING:
    from conveyor.admin import Admin
    from conveyor.iterator import Iterator
    from conveyor.processing.filters import Delay, Expire, Filter, Throttle, Verdict

_ON_FIRST_USE = {
    "Admin": "conveyor.admin",
    "Iterator": "conveyor.iterator",
    **dict.fromkeys(
        ("Delay", "Expire", "Filter", "Throttle", "Verdict"), "conveyor.processing.filters"
    ),
}
"""The names whose modules load when first read (``from conveyor import Admin`` too): an app
that does not use them does not load them (the filters' module loads the engine)."""

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


def __getattr__(name: str) -> _Any:
    """One of :data:`_ON_FIRST_USE`, imported now (and kept: asked once)."""
    module = _ON_FIRST_USE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_ON_FIRST_USE})
