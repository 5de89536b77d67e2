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

The exceptions of one part live with it and are ``ConveyorError`` too (``JobTimeoutError``
and ``UnknownJobError`` in :mod:`conveyor.jobs`, ``SinkNotDelivered`` and ``SinkRejected`` in
:mod:`conveyor.connect`, ``InvalidArguments`` in :mod:`conveyor.rpc.arguments` ...): the
exceptions reference page lists them all, generated from their docstrings.

Every message says what is wrong and what to do about it, in one paragraph. Every class's
docstring says the same in one form: its first line, then ``Raised when ...`` and ``What to
do: ...``.
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
    """Base class of every error Conveyor raises on purpose.

    Raised when nothing more precise fits: an app started twice, a listener or worker that
    crashed (``App.run()`` stops the app first), a command line step that failed; the message
    says which.

    What to do: read the message; catch ``ConveyorError`` to handle every error Conveyor
    raises, and its subclasses for the ones you can act on.
    """


class ConfigurationError(ConveyorError, ValueError):
    """A setting is unknown, of the wrong type, or has an impossible value.

    Raised when the object is built (an ``App``, a ``Producer``, a route, a sink, a job), never
    later; also by ``App.start()`` for settings that only clash together. ``setting`` names the
    culprit.

    What to do: fix the setting the message names; it is a mistake in the code or the
    configuration, so retrying does not help.
    """

    def __init__(self, message: str, setting: str | None = None) -> None:
        super().__init__(message)
        self.setting = setting


class KafkaError(ConveyorError):
    """An error reported by librdkafka, with its code and name kept.

    Raised when librdkafka reports an error for an operation Conveyor ran for you (an admin
    request, a commit, a fetch, a listener command).

    What to do: if ``retriable``, try again; if ``fatal``, build a new client (a new
    ``Producer``, or restart the app); else read ``name`` (librdkafka's error code).

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
    """Kafka refused the client's credentials, or the TLS handshake failed.

    Raised when a client's SASL credentials are refused, or its TLS handshake fails (a
    certificate the other side does not trust, or none where one is required): at once,
    instead of waiting for a timeout, by the client that met it.

    What to do: check what the message names: ``sasl.*`` settings, ``security.protocol``,
    ``ssl.ca.location`` or the client certificate and key.
    """


class DeliveryError(KafkaError):
    """A message could not be delivered; ``topic``, ``partition`` and ``label`` say which.

    Raised when the delivery of a ``produce_sync`` message fails, or by the handle of a
    ``produce_async`` one (``handle.wait()``, ``handle.result()``, ``await handle``).

    What to do: look at ``persistence`` before you send again: ``"not_persisted"`` is safe to
    retry; ``"possibly_persisted"`` may write the message twice unless the producer is
    idempotent or a transaction wraps it.

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
    """Some messages of one ``produce_many_*`` call failed; ``failures`` lists each one's error.

    Raised when ``produce_many_sync``, or the handle of ``produce_many_async`` (``wait()``,
    ``result()``, ``await``), finds at least one message not delivered; ``delivered`` counts
    the others.

    What to do: send again the messages of ``failures`` (each a :class:`DeliveryError` with
    its ``persistence``), not the whole batch.
    """

    def __init__(self, message: str, failures: list[DeliveryError], delivered: int) -> None:
        first = failures[0]
        super().__init__(
            message, code=first.code, name=first.name, retriable=first.retriable, fatal=first.fatal
        )
        self.failures = failures
        self.delivered = delivered


class TransactionError(KafkaError):
    """A transaction could not begin, commit or abort, or was used the wrong way.

    Raised when ``transaction()`` blocks nest, mark no offset, read a partition that was
    revoked meanwhile, or read another cluster than the transactional producer writes to; and
    when librdkafka fails a transaction.

    What to do: fix the use the message names; a transaction that failed was aborted (nothing
    of it is visible to ``read_committed`` readers), and the batch is retried like any
    failure.
    """


class InvalidMessageError(ConveyorError, ValueError):
    """A message is malformed (``field`` names what).

    Raised when a ``produce_*`` call gets a message without a topic, with a payload or key
    that cannot be serialized, a payload over ``message.max.bytes``, bad headers or the like:
    before it reaches librdkafka.

    What to do: fix the message's ``field``; nothing was sent.
    """

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


class DeserializationError(ConveyorError, ValueError):
    """A consumed message's ``payload``, ``key`` or ``headers`` (``part``) could not be decoded.

    Raised when ``consume()`` reads ``message.payload`` (``.key``, ``.headers``) and the
    route's deserializer fails; ``topic``, ``partition`` and ``offset`` say which message.

    What to do: a message that cannot be decoded will not decode on a retry: give the route a
    ``dead_letter_queue`` so that it goes there after the retries, or catch the error in
    ``consume()`` and skip the message.
    """

    def __init__(self, message: str, *, part: str, topic: str, partition: int, offset: int) -> None:
        super().__init__(message)
        self.part = part
        self.topic = topic
        self.partition = partition
        self.offset = offset


class MessageValidationError(DeserializationError):
    """A consumed message's payload (or key: ``part``) is not a valid instance of its model.

    Raised when ``consume()`` reads the payload (or key) of a route with a model
    (``Consumer[Order]``) and the value does not fit it; also by an RPC client whose reply does
    not fit ``returns`` (``part="result"``). ``errors`` says what is wrong, field by field:
    each has a ``path`` (JSONPath, ``$`` for the whole value) and a ``message`` (the model
    library's words).

    What to do: give the route a ``dead_letter_queue``: such a message goes there at once (no
    retry makes it valid), with the errors in its ``original_validation_errors`` header.
    """

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
    """A wait reached its deadline; the awaited work may still complete.

    Raised when ``produce_sync``'s ``timeout``, a delivery handle's ``wait(timeout)``, a
    partition command (``app.pause``, ``resume``, ``seek``) or a dead letter replay runs out
    of time before the work is done (also a ``TimeoutError``).

    What to do: wait again, or go on without the result: the work (a delivery, say) was not
    cancelled and may still succeed.
    """


class NotAssignedError(ConveyorError):
    """A partition command (pause, resume, seek) for a partition this process does not own.

    Raised when ``app.pause``, ``resume`` or ``seek`` (or the web UI's commands) names a
    partition that is not assigned to this process, or the app is not running.

    What to do: send the command to the process that owns the partition (the web UI's
    partitions page says which), or try again after a rebalance.
    """


class QueueFullError(ConveyorError, BufferError):
    """librdkafka's local queue stayed full for longer than the producer's ``queue_full_timeout``.

    Raised when ``produce_*`` waited ``queue_full_timeout`` seconds for room in librdkafka's
    queue (``queue.buffering.max.messages`` / ``.kbytes``): the broker is slower than the
    producer, or unreachable (also a ``BufferError``).

    What to do: produce less at once, or raise the queue's limits or ``queue_full_timeout``;
    check that the broker is reachable.
    """


class ProducerClosedError(ConveyorError):
    """The producer was closed.

    Raised when ``produce_*`` (or a transaction) is called on a producer after ``close()``.

    What to do: create a new ``Producer`` to produce again.
    """


class ProducerForkedError(ConveyorError):
    """The producer was created in a parent process; librdkafka clients do not survive ``fork()``.

    Raised when a producer created before ``os.fork()`` (a pre-forking server's master, say)
    is used in the child.

    What to do: create the producer in the process that uses it, after the fork.
    """


class RemoteError(ConveyorError):
    """The remote handler of an RPC call failed; ``type`` and ``message`` say how.

    Raised when the reply to ``Client.call`` is an error: the handler raised (``type`` is its
    class name), there is no such command (``UnknownCommand``), the arguments do not fit
    (``InvalidArguments``) or ``authorize`` refused the request (``Unauthorized``).

    What to do: read ``type`` and ``message``; the server's logs have the handler's traceback.
    """

    def __init__(self, type: str, message: str) -> None:
        super().__init__(f"{type}: {message}")
        self.type = type
        self.message = message


class RpcTimeoutError(ConveyorError, TimeoutError):
    """No reply to an RPC call within its timeout.

    Raised when ``Client.call`` (after its ``retries``) or ``call_async``'s future got no
    reply within ``timeout`` seconds (also a ``TimeoutError``).

    What to do: the call may still run remotely. Give the client ``retries`` (its attempts
    reuse the request id, which the server answers from its reply cache: the handler runs
    once) or a longer ``timeout``; a new call runs the handler again.
    """


class RpcClientClosedError(ConveyorError):
    """The RPC client was closed while the call waited for its reply.

    Raised when ``Client.close()`` ends the calls still waiting, or a call is made on a
    closed client.

    What to do: make the call on an open client; the closed call may still run remotely.
    """


class BrokerError(ConveyorError):
    """The development broker could not do what was asked.

    Raised when ``conveyor broker`` (or :mod:`conveyor.broker`) fails a step of its own:
    fetching its jars, running a local cluster, setting up security, or a listener that
    answers unlike a Kafka broker.

    What to do: read the message; ``conveyor broker logs`` shows the broker's own log.
    """


class ToolMissingError(BrokerError):
    """A program the development broker needs (Java, Maven) is missing or too old.

    Raised when ``conveyor broker fetch`` or ``start`` finds no ``java`` (or ``mvn``), or a
    Java too old for Kafka.

    What to do: install what the message names (a JDK 17 or newer, Maven), and put it on
    ``PATH`` (or set ``JAVA_HOME``).
    """


class BrokerPortBusyError(BrokerError):
    """The port the broker should listen on is already taken.

    Raised when ``conveyor broker start`` finds its port held by another program (or by a
    broker this data folder did not start).

    What to do: stop what holds it, or start the broker on another port (``--port N``, and
    ``KAFKA_BOOTSTRAP_SERVERS`` to match).
    """


class BrokerDataError(BrokerError):
    """The broker's data folder is corrupt or belongs to something else.

    Raised when ``conveyor broker start`` (or ``stop --wipe``) finds a data folder it cannot
    use: one not made by Conveyor, or storage left damaged.

    What to do: choose another folder (``--data-dir``), or start afresh with ``conveyor
    broker stop --wipe`` (its topics are lost), as the message says.
    """


class BrokerStartError(BrokerError):
    """The broker process exited, or did not answer, before its deadline.

    Raised when ``conveyor broker start`` sees the JVM exit, or the broker not answer in
    time.

    What to do: read the end of the broker's log that the message quotes (``conveyor broker
    logs`` shows more); on an overloaded machine, try again with a longer ``--timeout``.
    """


class BrokerNotRunningError(BrokerError):
    """The command needs a running broker and there is none in that data folder.

    Raised when ``conveyor broker logs`` finds no log: no broker ever started from that data
    folder.

    What to do: start it with ``conveyor broker start``, or name the folder it runs from
    (``--data-dir``).
    """
