"""The thin layer over confluent-kafka (librdkafka): the only part that imports it.

Clients are built here (:mod:`~conveyor.driver.clients`), each served by a
background :class:`~conveyor.driver.poller.Poller`; results that arrive later come
back through handles that wake the waiting thread the moment librdkafka reports
(:mod:`~conveyor.driver.handles`); librdkafka's errors become Conveyor's exceptions
in one place (:mod:`~conveyor.driver.errors`).
"""

from conveyor.driver.clients import client_versions, create_admin, create_producer
from conveyor.driver.handles import (
    AcknowledgedHandle,
    BatchDeliveryHandle,
    DeliveryHandle,
    DeliveryReport,
    FutureHandle,
)
from conveyor.driver.poller import Poller

__all__ = [
    "AcknowledgedHandle",
    "BatchDeliveryHandle",
    "DeliveryHandle",
    "DeliveryReport",
    "FutureHandle",
    "Poller",
    "client_versions",
    "create_admin",
    "create_producer",
]
