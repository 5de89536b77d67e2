"""``Variant``: a view of a producer that sends with other per-topic settings
(``producer.variant(acks=1)``), on an extra librdkafka client shared by equal variants."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from conveyor.driver.producers import ProducerClient
from conveyor.producer.dispatch import Dispatcher

if TYPE_CHECKING:
    from conveyor.producer.dispatch import Core

__all__ = ["Variant"]


class Variant(Dispatcher):
    """A view of a :class:`Producer` that sends with other per-topic settings (see :meth:`Producer.variant`)."""

    def __init__(self, producer: Core, client: ProducerClient, settings: Mapping[str, Any]) -> None:
        self._core = producer
        self._client = client
        self.settings = dict(settings)

    def _active_client(self) -> ProducerClient:
        if self._client.credentials_refused is not None:
            raise self._client.credentials_refused
        if self._client.fatal is not None:
            raise self._client.fatal
        return self._client

    def __repr__(self) -> str:
        return f"<Variant of {self._core.id} {self.settings}>"
