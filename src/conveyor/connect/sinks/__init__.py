"""Built-in sinks: JSON-lines files (:class:`JsonLines`) and HTTP webhooks (:class:`Webhook`)."""

from conveyor.connect.sinks.files import JsonLines
from conveyor.connect.sinks.http import Webhook
from conveyor.connect.sinks.records import record_json

__all__ = ["JsonLines", "Webhook", "record_json"]
