"""``Variant``: a view of a producer that sends with other per-topic settings
(``producer.variant(acks=1)``), on an extra librdkafka client shared by equal variants."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from conveyor.producer.produce_calls import ProduceCalls

if TYPE_CHECKING:
    from conveyor.driver.producers import ProducerClient
    from conveyor.producer.send_path import SendPath

__all__ = ["Variant"]


class Variant(ProduceCalls):
    """A view of a :class:`Producer` that sends with other per-topic settings (see :meth:`Producer.variant`)."""

    def __init__(
        self, send_path: SendPath, client: ProducerClient, settings: Mapping[str, Any]
    ) -> None:
        """``send_path``: the producer's, shared; ``client``: this variant's own."""
        self._send_path = send_path
        self._client = client
        self.settings = dict(settings)

    def __repr__(self) -> str:
        return f"<Variant of {self._send_path.producer_id} {self.settings}>"
