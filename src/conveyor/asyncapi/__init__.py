"""The AsyncAPI 3.0 document of an app: its servers, topics, what it receives and sends, and
the schemas of its messages from the consumers' models (``conveyor asyncapi``, and the web
UI's AsyncAPI page)."""

from __future__ import annotations

from conveyor.asyncapi.document import asyncapi_document
from conveyor.asyncapi.yaml import to_yaml

__all__ = ["asyncapi_document", "to_yaml"]
