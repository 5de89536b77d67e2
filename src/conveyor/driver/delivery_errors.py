"""What a failed delivery means for its message: the :class:`~conveyor.errors.DeliveryError`
built from librdkafka's report, its ``persistence``, and the words that say what to do.

confluent-kafka does not give librdkafka's own verdict on a reported message
(``rd_kafka_message_status``: its delivery-report message is a copy without it), so
``persistence`` is told from what the report does carry: the error, and whether the message
ever had a partition. A message librdkafka never partitioned (its topic's metadata never came)
never left the client; one whose topic the cluster says does not exist was written nowhere.
"""

from __future__ import annotations

from typing import Any

from conveyor.driver.errors import to_conveyor_error
from conveyor.errors import DeliveryError

__all__ = [
    "ASKS_THE_CLUSTER",
    "EXPLAINED",
    "NOT_PERSISTED",
    "Clarified",
    "asks_the_cluster",
    "delivery_error",
    "persistence",
]

# Failures librdkafka reports before a message left the client, or that a broker answers
# without appending it: the message is certainly not in the log.
NOT_PERSISTED = frozenset(
    {
        "_PURGE_QUEUE",
        "_MSG_SIZE_TOO_LARGE",
        "MSG_SIZE_TOO_LARGE",
        "_UNKNOWN_TOPIC",
        "_UNKNOWN_PARTITION",
        "UNKNOWN_TOPIC_OR_PART",
        "TOPIC_AUTHORIZATION_FAILED",
        "INVALID_MSG",
        "INVALID_RECORD",
        "RECORD_LIST_TOO_LARGE",
        "CORRUPT_MESSAGE",
        "INVALID_REQUIRED_ACKS",
        "NOT_ENOUGH_REPLICAS",
        "_INVALID_ARG",
        "_QUEUE_FULL",
        "CLUSTER_AUTHORIZATION_FAILED",
        "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
        "_AUTHENTICATION",
    }
)

EXPLAINED = frozenset({"_MSG_TIMED_OUT", "_PURGE_QUEUE", "_PURGE_INFLIGHT"})
"""Delivery failures a producer may explain further (``explain``): a timeout, or messages
purged because Kafka refused the producer's credentials."""

ASKS_THE_CLUSTER = "_MSG_TIMED_OUT"
"""The failure whose explanation asks the cluster whether its topic exists: asked off the
thread that serves or awaits the report (see :mod:`conveyor.driver.explainer`)."""


def asks_the_cluster(error: Any) -> bool:
    """Whether librdkafka's ``error`` is explained by asking the cluster about its topic."""
    return bool(error.name() == ASKS_THE_CLUSTER)


class Clarified:
    """A timed-out delivery's error, with whether the cluster said its topic does not exist
    (``None``: not asked, or no answer)."""

    __slots__ = ("error", "missing")

    def __init__(self, error: Any, missing: bool | None) -> None:
        self.error = error
        self.missing = missing


_HINTS = {
    "UNKNOWN_TOPIC_OR_PART": "The topic does not exist and Conveyor's broker does not create topics "
    "on first use: create it first (or check its name).",
    "_UNKNOWN_TOPIC": "The topic does not exist: create it first (or check its name).",
}
_SENT_AND_TIMED_OUT = (
    "The broker did not acknowledge it within message.timeout.ms: is the broker reachable, and "
    "the topic's leader available? It may have been written all the same (possibly "
    "persisted): a retry may write it twice unless a transaction wraps both."
)
_NEVER_SENT = (
    "It never reached a broker: the cluster did not tell the topic's partitions within "
    "message.timeout.ms (is it reachable, does the topic exist?). It was not written (not "
    "persisted): sending it again is safe."
)
_MISSING = (
    "The topic {topic!r} does not exist: create it first (or check its name). It was not "
    "written (not persisted): sending it again is safe once the topic exists."
)


def persistence(name: str, partition: int | None = 0, missing: bool | None = None) -> str:
    """What a delivery failure named ``name`` means for its message (see
    :class:`~conveyor.errors.DeliveryError`): ``"not_persisted"`` for a failure that happens
    before a broker appends it, for a message librdkafka never gave a partition (``partition``
    ``None``: it waited for its topic's metadata and was never sent) and for one whose topic
    the cluster says does not exist (``missing``); ``"possibly_persisted"`` otherwise, timeouts
    above all (a message that timed out may have been sent and written, only its
    acknowledgement lost)."""
    if name in NOT_PERSISTED or partition is None or missing:
        return "not_persisted"
    return "possibly_persisted"


def delivery_error(
    error: Any, topic: str | None, partition: int | None, label: Any, missing: bool | None = None
) -> DeliveryError:
    """The :class:`DeliveryError` of librdkafka's failed report ``error`` for a message to
    ``topic`` (``partition``: the one librdkafka chose, ``None`` if none; ``missing``: whether
    the cluster said the topic does not exist, ``None`` when not asked)."""
    failure = to_conveyor_error(
        error, DeliveryError, context=f"delivery to {topic!r} failed: ", topic=topic, label=label
    )
    chosen = partition if partition is not None and partition >= 0 else None
    failure.partition = chosen
    failure.persistence = persistence(failure.name or "", chosen, missing)
    if failure.name == ASKS_THE_CLUSTER:
        hint = (
            _MISSING.format(topic=topic)
            if missing
            else _NEVER_SENT
            if chosen is None
            else _SENT_AND_TIMED_OUT
        )
    else:
        hint = _HINTS.get(failure.name or "", "")
    if hint:
        failure.args = (f"{failure.args[0]}. {hint}",)
    return failure
