"""A typed route's batch checked against its models before ``consume()`` sees it.

The payloads are decoded (and validated) in one pass, kept for ``self.messages.payloads``;
the first message that does not fit ends the valid front of the batch. The executor hands the
front to ``consume()`` and the invalid message becomes the head of the next run, where the
failure path sends it to the dead letter queue (or retries it, without one): the messages
before it are processed, and marked, first."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from conveyor.errors import DeserializationError
from conveyor.messages import Deserializers, Message

__all__ = ["Checked", "check_models"]


@dataclass(slots=True)
class Checked:
    """``valid``: how many messages at the front of the batch fit their models; ``payloads``:
    their decoded payloads (``None`` without a payload model); ``error``: why the next one
    does not (``None`` when all fit)."""

    valid: int
    payloads: list[Any] | None
    error: DeserializationError | None = None


def check_models(batch: list[Any], deserializers: Deserializers) -> Checked:
    """Decode ``batch``'s payloads (and keys) with the route's models, in order."""
    payloads: list[Any] | None = None
    if deserializers.payload_model is not None:
        decode = deserializers.payload
        try:  # the common case in one comprehension: no try per message
            payloads = [None if (value := raw.value()) is None else decode(value) for raw in batch]
        except Exception:
            return _first_invalid(batch, deserializers)
    if deserializers.key_model is not None:
        decode_key = deserializers.key
        try:
            for raw in batch:
                key = raw.key()
                if key is not None:
                    decode_key(key)
        except Exception:
            return _first_invalid(batch, deserializers)
    return Checked(len(batch), payloads)


def _first_invalid(batch: list[Any], deserializers: Deserializers) -> Checked:
    """The valid front of ``batch`` and the error of the first message after it."""
    payloads: list[Any] = []
    for index, raw in enumerate(batch):
        message = Message(raw, deserializers)
        try:
            payload = message.payload
            if deserializers.key_model is not None:
                message.key  # noqa: B018 - decoded to be checked
        except DeserializationError as error:
            return Checked(index, payloads if deserializers.payload_model else None, error)
        payloads.append(payload)
    return Checked(len(batch), payloads if deserializers.payload_model else None)
