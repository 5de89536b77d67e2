"""Conveyor's exceptions, one hierarchy.

::

    ConveyorError                      everything Conveyor raises on purpose
    ├── ConfigurationError             a setting is unknown, of the wrong type or impossible (names it)
    ├── KafkaError                     librdkafka reported an error (code, name, retriable, fatal)
    │   ├── DeliveryError              a message was not delivered (topic, partition, label)
    │   │   └── BatchDeliveryError     some messages of a produce_many_* call were not delivered
    │   └── TransactionError           a transaction could not begin, commit or abort
    ├── InvalidMessageError            a message is malformed; raised before librdkafka sees it
    ├── DeserializationError           a consumed payload, key or headers could not be decoded
    │   └── MessageValidationError     a payload or key is not a valid instance of its model
    ├── WaitTimeoutError               a wait reached its deadline (the work may still finish)
    ├── QueueFullError                 the local queue stayed full past ``queue_full_timeout``
    ├── ProducerClosedError            the producer was closed
    ├── ProducerForkedError            the producer was created before ``os.fork()``
    ├── RemoteError                    an RPC handler raised (remote type and message kept)
    ├── RpcTimeoutError                an RPC reply did not come in time (also a TimeoutError)
    ├── RpcClientClosedError           the RPC client was closed with the call in flight
    └── BrokerError                    the development broker (``conveyor broker``)
        ├── ToolMissingError           Java or Maven is absent or too old
        ├── BrokerPortBusyError        something else listens on the port
        ├── BrokerDataError            the data folder cannot be used (corrupt, foreign)
        ├── BrokerStartError           the JVM exited or did not become ready in time
        └── BrokerNotRunningError      stop/logs on a broker that is not running

Every message says what is wrong and what to do about it, in one paragraph.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AuthenticationError",
    "BatchDeliveryError",
    "BrokerDataError",
    "BrokerError",
    "BrokerNotRunningError",
    "BrokerPortBusyError",
    "BrokerStartError",
    "ConfigurationError",
    "ConveyorError",
    "DeliveryError",
    "DeserializationError",
    "InvalidMessageError",
    "KafkaError",
    "MessageValidationError",
    "NotAssignedError",
    "ProducerClosedError",
    "ProducerForkedError",
    "QueueFullError",
    "RemoteError",
    "RpcClientClosedError",
    "RpcTimeoutError",
    "ToolMissingError",
    "TransactionError",
    "WaitTimeoutError",
]


class ConveyorError(Exception):
    """Base class of every error Conveyor raises on purpose."""


class ConfigurationError(ConveyorError, ValueError):
    """A setting is unknown, of the wrong type, or has an impossible value.

    Raised when the object is built, never later; ``setting`` names the culprit.
    """

    def __init__(self, message: str, setting: str | None = None) -> None:
        super().__init__(message)
        self.setting = setting


class KafkaError(ConveyorError):
    """An error reported by librdkafka, with its code and name kept.

    Attributes:
        code: librdkafka's numeric error code (negative for local errors).
        name: its symbolic name, such as ``MSG_SIZE_TOO_LARGE`` or ``_MSG_TIMED_OUT``.
        retriable: whether trying the same operation again may succeed.
        fatal: whether the client can no longer be used (it must be rebuilt).
    """

    def __init__(
        self,
        message: str,
        *,
        code: int = 0,
        name: str = "",
        retriable: bool = False,
        fatal: bool = False,
        txn_requires_abort: bool = False,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.name = name
        self.retriable = retriable
        self.fatal = fatal
        self.txn_requires_abort = txn_requires_abort


class AuthenticationError(KafkaError):
    """Kafka refused the client's credentials, or the TLS handshake failed (a certificate the
    other side does not trust, or none where one is required). Raised at once, instead of
    waiting for a timeout, by the client that met it; the message says what to check."""


class DeliveryError(KafkaError):
    """A message could not be delivered; ``topic``, ``partition`` and ``label`` say which.

    ``persistence`` says what the failure means for the message, as librdkafka's message
    status does: ``"not_persisted"`` (it never reached a broker: safe to send again),
    ``"possibly_persisted"`` (it was sent but not acknowledged, as after a timeout: it may be
    in the log, and a retry may write it twice unless the producer is idempotent and the retry
    is librdkafka's own, or a transaction wraps it) or ``"persisted"``.
    """

    topic: str | None = None
    partition: int | None = None
    label: object = None
    persistence: str = "possibly_persisted"


class BatchDeliveryError(DeliveryError):
    """Some messages of one ``produce_many_*`` call failed; ``failures`` lists each one's error."""

    def __init__(self, message: str, failures: list[DeliveryError], delivered: int) -> None:
        first = failures[0]
        super().__init__(
            message, code=first.code, name=first.name, retriable=first.retriable, fatal=first.fatal
        )
        self.failures = failures
        self.delivered = delivered


class TransactionError(KafkaError):
    """A transaction could not begin, commit or abort, or was used the wrong way."""


class InvalidMessageError(ConveyorError, ValueError):
    """A message is malformed (``field`` names what); raised before it reaches librdkafka."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


class DeserializationError(ConveyorError, ValueError):
    """A consumed message's ``payload``, ``key`` or ``headers`` (``part``) could not be decoded
    by the topic's deserializer; ``topic``, ``partition`` and ``offset`` say which message."""

    def __init__(self, message: str, *, part: str, topic: str, partition: int, offset: int) -> None:
        super().__init__(message)
        self.part = part
        self.topic = topic
        self.partition = partition
        self.offset = offset


class MessageValidationError(DeserializationError):
    """A consumed message's payload (or key: ``part``) is not a valid instance of its route's
    model. ``errors`` says what is wrong, field by field: each has a ``path`` (JSONPath, ``$``
    for the whole value) and a ``message`` (the model library's words). A route with a dead
    letter queue sends such a message there at once (no retry makes it valid), with the
    errors in its ``original_validation_errors`` header."""

    def __init__(
        self,
        message: str,
        *,
        part: str,
        topic: str,
        partition: int,
        offset: int,
        errors: list[Any],
    ) -> None:
        super().__init__(message, part=part, topic=topic, partition=partition, offset=offset)
        self.errors = errors


class WaitTimeoutError(ConveyorError, TimeoutError):
    """A wait reached its deadline. The awaited work (a delivery, say) may still complete."""


class NotAssignedError(ConveyorError):
    """A partition command (pause, resume, seek) for a partition this process does not own."""


class QueueFullError(ConveyorError, BufferError):
    """librdkafka's local queue stayed full for longer than the producer's ``queue_full_timeout``."""


class ProducerClosedError(ConveyorError):
    """The producer was closed; create a new one to produce again."""


class ProducerForkedError(ConveyorError):
    """The producer was created in a parent process; librdkafka clients do not survive ``fork()``."""


class RemoteError(ConveyorError):
    """The remote handler of an RPC call failed; ``type`` and ``message`` say how."""

    def __init__(self, type: str, message: str) -> None:
        super().__init__(f"{type}: {message}")
        self.type = type
        self.message = message


class RpcTimeoutError(ConveyorError, TimeoutError):
    """No reply to an RPC call within its timeout (the call may still run remotely)."""


class RpcClientClosedError(ConveyorError):
    """The RPC client was closed while the call waited for its reply."""


class BrokerError(ConveyorError):
    """The development broker could not do what was asked."""


class ToolMissingError(BrokerError):
    """A program the development broker needs (Java, Maven) is missing or too old."""


class BrokerPortBusyError(BrokerError):
    """The port the broker should listen on is already taken."""


class BrokerDataError(BrokerError):
    """The broker's data folder is corrupt or belongs to something else."""


class BrokerStartError(BrokerError):
    """The broker process exited, or did not answer, before its deadline."""


class BrokerNotRunningError(BrokerError):
    """The command needs a running broker and there is none in that data folder."""
