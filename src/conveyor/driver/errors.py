"""Map librdkafka's errors to Conveyor's exceptions, once, at the driver boundary."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from confluent_kafka import KafkaError as _RdKafkaError
from confluent_kafka import KafkaException

from conveyor.errors import ConfigurationError, KafkaError
from conveyor.masking import mask_text

__all__ = ["ErrorCode", "configuration_error", "is_error", "to_conveyor_error"]

E = TypeVar("E", bound=KafkaError)

ErrorCode = _RdKafkaError
"""librdkafka's error codes (``ErrorCode._MSG_TIMED_OUT``, ``ErrorCode.UNKNOWN_TOPIC_OR_PART`` ...)."""

_PROPERTY = re.compile(r'property:? "([^"]+)"')


def is_error(value: object) -> bool:
    """Whether ``value`` is a librdkafka error object."""
    return isinstance(value, _RdKafkaError)


def to_conveyor_error(error: Any, cls: type[E], context: str = "", **attributes: Any) -> E:
    """Build a Conveyor exception of class ``cls`` from a librdkafka ``KafkaError``
    (or a ``KafkaException`` carrying one), keeping its code, name and flags."""
    if (
        isinstance(error, KafkaException)
        and error.args
        and isinstance(error.args[0], _RdKafkaError)
    ):
        error = error.args[0]
    if not isinstance(error, _RdKafkaError):
        result = cls(f"{context}{error}")
    else:
        name = error.name()
        text = error.str()
        message = f"{context}{text} ({name})" if name and name not in text else f"{context}{text}"
        result = cls(
            message,
            code=error.code(),
            name=name,
            retriable=bool(error.retriable()),
            fatal=bool(error.fatal()),
            txn_requires_abort=bool(error.txn_requires_abort()),
        )
    for key, value in attributes.items():
        setattr(result, key, value)
    return result


# librdkafka names some settings by their canonical name when it complains about an alias.
_ALIASES = {
    "request.required.acks": "acks",
    "queue.buffering.max.ms": "linger.ms",
    "batch.num.messages": "batch.size",
    "message.timeout.ms": "delivery.timeout.ms",
    "compression.codec": "compression.type",
    "metadata.broker.list": "bootstrap.servers",
}


def configuration_error(
    exc: Exception, client: str, given: Iterable[str] = ()
) -> ConfigurationError:
    """Turn librdkafka's complaint about a setting into a ConfigurationError naming it
    (as the application spelled it, among ``given``)."""
    text = str(exc.args[0].str() if exc.args and isinstance(exc.args[0], _RdKafkaError) else exc)
    if isinstance(given, Mapping):
        text = mask_text(text, given)  # librdkafka may quote the value it refused
    match = _PROPERTY.search(text)
    setting = match.group(1) if match else None
    names = set(given)
    if setting is not None and setting not in names and _ALIASES.get(setting) in names:
        setting = _ALIASES[setting]
    where = f'kafka["{setting}"]: ' if setting else ""
    return ConfigurationError(f"{where}{text} (while creating the {client})", setting=setting)
