"""Connectors configured while they run: Kafka Connect's REST API over Conveyor's workers
(``conveyor connect worker``), configurations and statuses in compacted topics, tasks spread
over the workers by Kafka's group assignment, plugins found through entry points.

Write a plugin by deriving from :class:`SinkConnector` (make a sink) or
:class:`SourceConnector` (make a :class:`SourceTask`), declaring its :class:`Field`\\ s, and
registering it under the ``conveyor.connectors`` entry point group.
"""

from conveyor.connect.runtime.connect_cluster import ConnectCluster, ConnectError, WorkerSettings
from conveyor.connect.runtime.definitions import Field, at_least, http_url, one_of, positive
from conveyor.connect.runtime.plugins import (
    Connector,
    Plugins,
    SinkConnector,
    SourceConnector,
    SourceOffsets,
    SourceRecord,
    SourceTask,
)
from conveyor.connect.runtime.worker import Worker

__all__ = [
    "ConnectCluster",
    "ConnectError",
    "Connector",
    "Field",
    "Plugins",
    "SinkConnector",
    "SourceConnector",
    "SourceOffsets",
    "SourceRecord",
    "SourceTask",
    "Worker",
    "WorkerSettings",
    "at_least",
    "http_url",
    "one_of",
    "positive",
]
