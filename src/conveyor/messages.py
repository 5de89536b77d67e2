"""Consumed messages: :class:`Message` (raw bytes kept, payload decoded on first access)
and :class:`Messages`, the batch a consumer's ``consume()`` sees."""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime
from itertools import repeat
from typing import Any, Generic

from typing_extensions import TypeVar

from conveyor.errors import DeserializationError, MessageValidationError
from conveyor.models import decoder, field_errors, key_decoder
from conveyor.models.codecs import model_name
from conveyor.serialization import json_dumps, json_loads

__all__ = [
    "Deserializers",
    "KeyT",
    "Message",
    "Messages",
    "PayloadT",
    "age_of",
    "dead_letter_message",
    "piped_message",
    "record_of",
    "records_of",
]

_UNSET: Any = object()

PayloadT = TypeVar("PayloadT", default=Any)
"""What a message's ``payload`` is: its route's payload model (``Any`` without one)."""
KeyT = TypeVar("KeyT", default=Any)
"""What a message's ``key`` is: its route's key model (``Any`` without one)."""


class Deserializers:
    """How a topic's messages are decoded: ``payload`` (JSON by default), ``key`` (UTF-8),
    ``headers`` (a dict of name to raw bytes, the last value of a repeated name winning).
    Each is a callable taking the raw value (``None`` stays ``None`` for payload and key).

    ``payload_model`` / ``key_model``: a model (pydantic, msgspec Struct, dataclass,
    TypedDict; for keys also ``str``, ``int`` or ``UUID``) that the part is decoded into and
    validated against; a message that does not fit raises
    :class:`~conveyor.errors.MessageValidationError`. A consumer declares them as
    ``Consumer[Payload, Key]``; the route passes them here."""

    __slots__ = ("headers", "key", "key_model", "payload", "payload_model")

    def __init__(
        self,
        payload: Callable[[bytes], Any] | None = None,
        key: Callable[[bytes], Any] | None = None,
        headers: Callable[[list[tuple[str, bytes]]], Any] | None = None,
        *,
        payload_model: Any = None,
        key_model: Any = None,
    ) -> None:
        if payload_model is not None and payload is None:
            payload = decoder(payload_model, "payload")
        if key_model is not None and key is None:
            key = key_decoder(key_model)
        self.payload = payload or json_loads
        self.key = key or _utf8
        self.headers = headers or _headers_dict
        self.payload_model = payload_model
        self.key_model = key_model

    @property
    def validates(self) -> bool:
        """Whether payloads or keys are checked against a model."""
        return self.payload_model is not None or self.key_model is not None

    def names(self) -> dict[str, str]:
        """Each part's deserializer as a person reads it (``{"payload": "JSON", ...}``)."""
        names = {
            part: _callable_name(getattr(self, part)) for part in ("payload", "key", "headers")
        }
        if self.payload_model is not None:
            names["payload"] = model_name(self.payload_model)
        if self.key_model is not None:
            names["key"] = model_name(self.key_model)
        return names

    def __repr__(self) -> str:
        names = ", ".join(f"{part}={name}" for part, name in self.names().items())
        return f"Deserializers({names})"


def _callable_name(function: Any) -> str:
    """A deserializer as a person reads it: the defaults by what they decode, others by name
    (a memory address says nothing on the web UI's Routing page)."""
    for known, name in ((json_loads, "JSON"), (_utf8, "UTF-8"), (_headers_dict, "dict")):
        if function is known:
            return name
    return getattr(function, "__qualname__", None) or type(function).__qualname__


_DECODED: dict[bytes, str] = {}
"""Keys decoded as UTF-8 lately: a key comes again and again, and the same ``str`` each time
is found faster in a dict (a store's writes, a window's keys) than an equal one. Short keys
only (at most 65,536 of at most 128 bytes: a few MB)."""
_DECODED_MAX = 65_536
_DECODED_LONGEST = 128


def _utf8(raw: bytes) -> str:
    text = _DECODED.get(raw)
    if text is None:
        text = raw.decode("utf-8", errors="replace")
        if len(raw) <= _DECODED_LONGEST:
            if len(_DECODED) >= _DECODED_MAX:
                _DECODED.clear()
            _DECODED[raw] = text
    return text


def _headers_dict(raw: list[tuple[str, bytes]]) -> dict[str, bytes]:
    return dict(raw)


class Message(Generic[PayloadT, KeyT]):
    """One consumed message.

    ``raw_payload`` / ``raw_key`` are the bytes as stored; ``payload`` and ``key`` are
    decoded by the topic's deserializers on first access and cached (``deserialized`` says
    whether the payload was). ``timestamp`` is an aware UTC ``datetime``; ``tombstone`` is
    true when the payload is ``None``.
    """

    __slots__ = ("_deserializers", "_headers", "_key", "_payload", "_raw")

    def __init__(self, raw: Any, deserializers: Deserializers) -> None:
        self._raw = raw
        self._deserializers = deserializers
        self._payload = _UNSET
        self._key = _UNSET
        self._headers = _UNSET

    @property
    def topic(self) -> str:
        return str(self._raw.topic())

    @property
    def partition(self) -> int:
        return int(self._raw.partition())

    @property
    def offset(self) -> int:
        return int(self._raw.offset())

    @property
    def raw_payload(self) -> bytes | None:
        value: bytes | None = self._raw.value()
        return value

    @property
    def raw_key(self) -> bytes | None:
        value: bytes | None = self._raw.key()
        return value

    @property
    def raw_headers(self) -> list[tuple[str, bytes]]:
        return list(self._raw.headers() or [])

    @property
    def payload(self) -> PayloadT:
        """The payload, deserialized on first access (a tombstone stays ``None``).

        Raises:
            DeserializationError: the topic's payload deserializer failed (names the message);
                :class:`~conveyor.errors.MessageValidationError` when it does not fit the
                route's model.
        """
        if self._payload is _UNSET:
            raw = self._raw.value()
            if raw is None:
                self._payload = None
            else:
                try:
                    self._payload = self._deserializers.payload(raw)
                except Exception as exc:
                    raise self._undecodable("payload", self._deserializers.payload, exc) from exc
        payload: PayloadT = self._payload
        return payload

    @property
    def deserialized(self) -> bool:
        return self._payload is not _UNSET

    @property
    def key(self) -> KeyT:
        """The key, deserialized on first access (UTF-8 text by default)."""
        key: Any = self._key
        if key is _UNSET:
            raw = self._raw.key()
            decode = self._deserializers.key
            if raw is None:
                key = None
            elif decode is not _utf8 or (key := _DECODED.get(raw)) is None:  # found: hot path
                try:
                    key = decode(raw)
                except Exception as exc:
                    raise self._undecodable("key", decode, exc) from exc
            self._key = key
        return key  # type: ignore[no-any-return]

    @property
    def headers(self) -> Any:
        """The headers, deserialized on first access (a dict of name to bytes by default)."""
        if self._headers is _UNSET:
            try:
                self._headers = self._deserializers.headers(list(self._raw.headers() or []))
            except Exception as exc:
                raise self._undecodable("headers", self._deserializers.headers, exc) from exc
        return self._headers

    def _undecodable(
        self, part: str, deserializer: Callable[..., Any], error: Exception
    ) -> DeserializationError:
        raw = self._raw
        topic, partition, offset = raw.topic(), raw.partition(), raw.offset()
        name = _callable_name(deserializer)
        model = getattr(self._deserializers, f"{part}_model", None)
        errors = field_errors(error) if model is not None else None
        if errors is not None:
            first = errors[0] if errors else None
            more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
            return MessageValidationError(
                f"the {part} of {topic}/{partition}@{offset} is not a valid {model_name(model)}"
                + (f": {first.path}: {first.message}{more}" if first is not None else ""),
                part=part,
                topic=topic,
                partition=partition,
                offset=offset,
                errors=errors,
            )
        return DeserializationError(
            f"cannot decode the {part} of {topic}/{partition}@{offset} with {name}: "
            f"{type(error).__name__}: {error}",
            part=part,
            topic=topic,
            partition=partition,
            offset=offset,
        )

    @property
    def tombstone(self) -> bool:
        return self._raw.value() is None

    @property
    def timestamp(self) -> datetime | None:
        kind, milliseconds = self._raw.timestamp()
        if not kind:
            return None
        return datetime.fromtimestamp(milliseconds / 1000, tz=UTC)

    def __repr__(self) -> str:
        return f"<Message {self.topic}/{self.partition}@{self.offset}>"


class Messages(Sequence[Message[PayloadT, KeyT]]):
    """The batch handed to ``consume()``: messages of ONE partition, in offset order.

    Iterable, with ``len``, indexing, ``first``, ``last``, ``payloads``, ``keys``, ``raw_payloads``,
    and metadata: ``topic``, ``partition``, ``created_at`` (timestamp of the newest),
    ``processed_at`` (when the batch was handed over), ``consumer_lag`` (how many messages
    the partition held after this batch's last one, as of the latest fetch; ``None`` if unknown). Message objects are made on
    access, so a consumer that only looks at ``len(messages)`` pays nothing per message.
    """

    __slots__ = (
        "_decoded",
        "_deserializers",
        "_raws",
        "consumer_lag",
        "partition",
        "processed_at",
        "topic",
    )

    def __init__(
        self,
        raws: list[Any],
        deserializers: Deserializers,
        topic: str,
        partition: int,
        consumer_lag: int | None = None,
        payloads: list[Any] | None = None,
    ) -> None:
        self._raws = raws
        self._deserializers = deserializers
        self.topic = topic
        self.partition = partition
        self.consumer_lag = consumer_lag
        self.processed_at = time.time()
        self._decoded: list[Any] | None = payloads  # decoded already (checked against a model)

    def __len__(self) -> int:
        return len(self._raws)

    def __iter__(self) -> Iterator[Message[PayloadT, KeyT]]:
        deserializers = self._deserializers
        decoded = self._decoded
        if decoded is None:  # (a map: faster than a generator's loop)
            return map(Message, self._raws, repeat(deserializers))
        return self._with_payloads(decoded)

    def _with_payloads(self, decoded: list[Any]) -> Iterator[Message[PayloadT, KeyT]]:
        deserializers = self._deserializers
        for raw, payload in zip(self._raws, decoded, strict=True):
            message = Message(raw, deserializers)
            message._payload = payload  # decoded once already, by payloads
            yield message

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [Message(raw, self._deserializers) for raw in self._raws[index]]
        return Message(self._raws[index], self._deserializers)

    @property
    def first(self) -> Message[PayloadT, KeyT]:
        return Message(self._raws[0], self._deserializers)

    @property
    def last(self) -> Message[PayloadT, KeyT]:
        return Message(self._raws[-1], self._deserializers)

    @property
    def payloads(self) -> list[PayloadT]:
        """Every payload, decoded by the topic's payload deserializer in one pass, without a
        :class:`Message` per message (a tombstone is ``None``). The list is kept: messages
        iterated afterwards carry their payload already, and asking again returns the same list.

        Raises:
            DeserializationError: a payload could not be decoded (the message names which).
        """
        decoded = self._decoded
        if decoded is None:
            decode = self._deserializers.payload
            try:
                decoded = [
                    None if (value := raw.value()) is None else decode(value) for raw in self._raws
                ]
            except Exception:
                for raw in self._raws:  # the one that fails raises, naming itself
                    Message(raw, self._deserializers).payload  # noqa: B018
                raise
            self._decoded = decoded
        return decoded

    @property
    def keys(self) -> list[KeyT]:
        """Every key, decoded by the topic's key deserializer once per distinct key in the
        batch, without a :class:`Message` per message (a message without a key: ``None``).

        Raises:
            DeserializationError: a key could not be decoded (the message names which).
        """
        decode = self._deserializers.key
        keys: list[Any]
        if decode is _utf8:  # the default: decoded lately (None: not found, or no key)
            found = _DECODED.get
            keys = [found(raw.key()) for raw in self._raws]  # (a comprehension beats two maps)
            if None in keys:
                for i, text in enumerate(keys):
                    if text is None and (raw_key := self._raws[i].key()) is not None:
                        keys[i] = _utf8(raw_key)
            return keys
        raw_keys = [raw.key() for raw in self._raws]
        try:
            decoded: dict[Any, Any] = {raw: decode(raw) for raw in set(raw_keys) if raw is not None}
        except Exception:
            for raw in self._raws:  # the one that fails raises, naming itself
                Message(raw, self._deserializers).key  # noqa: B018
            raise
        keys = list(map(decoded.get, raw_keys))
        return keys

    @property
    def raw_payloads(self) -> list[bytes | None]:
        return [raw.value() for raw in self._raws]

    @property
    def created_at(self) -> datetime | None:
        return self.last.timestamp if self._raws else None

    def __repr__(self) -> str:
        if not self._raws:
            return f"<Messages {self.topic}/{self.partition} empty>"
        return f"<Messages {self.topic}/{self.partition} {len(self)} from {self._raws[0].offset()}>"


def record_of(message: Message) -> Any:
    """The driver's record under ``message``, undecoded, for Conveyor's own parts that read
    its fields or hand it on (tracing, sinks, schedules, RPC replies). Internal: not API."""
    return message._raw


def records_of(messages: Iterable[Message]) -> list[Any]:
    """The driver's records under ``messages``, in order (see :func:`record_of`)."""
    if type(messages) is Messages:
        return list(messages._raws)
    return [message._raw for message in messages]


def age_of(message: Message, now: float) -> float | None:
    """Seconds from when ``message`` was produced (its timestamp) to ``now`` (epoch seconds);
    ``None`` without a timestamp."""
    kind, milliseconds = message._raw.timestamp()
    if not kind or milliseconds < 0:
        return None
    return now - float(milliseconds) / 1000


def dead_letter_message(
    message: Message, dlq_topic: str, group: str, attempts: int, error: BaseException | None
) -> dict[str, Any]:
    """The dead letter copy of ``message`` (a produce dict): payload, key and headers kept,
    ``original_*`` headers added that say where it came from and why it failed."""
    raw = message._raw
    kind, timestamp = raw.timestamp()
    key = raw.key()
    headers: list[tuple[str, Any]] = [
        *(raw.headers() or ()),
        ("original_topic", raw.topic()),
        ("original_partition", str(raw.partition())),
        ("original_offset", str(raw.offset())),
        ("original_key", key if key is not None else b""),
        ("original_timestamp", str(timestamp if kind else "")),
        ("original_consumer_group", group),
        ("original_attempts", str(attempts)),
        ("original_error_class", type(error).__qualname__ if error is not None else ""),
        ("original_error_message", str(error) if error is not None else ""),
        (
            "original_error_backtrace",
            "".join(traceback.format_exception(error))[-8000:] if error is not None else "",
        ),
    ]
    if isinstance(error, MessageValidationError):
        # What was wrong, field by field, as JSON: [{"path": "$.price", "message": "..."}]
        errors = [item.to_dict() for item in error.errors]
        headers.append(("original_validation_errors", json_dumps(errors)))
    return {"topic": dlq_topic, "payload": raw.value(), "key": key, "headers": headers}


def piped_message(message: Message, topic: str, group: str) -> dict[str, Any]:
    """``message`` forwarded to ``topic`` (a produce dict): key, payload and headers kept,
    ``source_*`` headers added that say where it came from."""
    raw = message._raw
    return {
        "topic": topic,
        "payload": raw.value(),
        "key": raw.key(),
        "headers": [
            *(raw.headers() or ()),
            ("source_topic", raw.topic()),
            ("source_partition", str(raw.partition())),
            ("source_offset", str(raw.offset())),
            ("source_consumer_group", group),
        ],
    }
