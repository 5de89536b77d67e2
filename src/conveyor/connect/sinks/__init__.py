"""Built-in sinks: WebSocket and SSE fan-out (:class:`Broadcast`), JSON-lines files (:class:`JsonLines`), HTTP webhooks (:class:`Webhook`) and
PostgreSQL tables (:class:`Postgres`)."""

from conveyor.connect.sinks.broadcast import Broadcast
from conveyor.connect.sinks.files import JsonLines
from conveyor.connect.sinks.http import Webhook
from conveyor.connect.sinks.postgres import Postgres
from conveyor.connect.sinks.records import record_json

__all__ = ["Broadcast", "JsonLines", "Postgres", "Webhook", "record_json"]
