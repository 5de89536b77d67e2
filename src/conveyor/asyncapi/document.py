"""The AsyncAPI 3.0 document of an app, from what it declares.

- **servers**: one per bootstrap server (``kafka``, or ``kafka-secure`` over TLS), with the
  security scheme of the app's ``security.protocol`` and SASL mechanism;
- **channels**: one per topic a route names (a pattern route's channel has no address: it
  stands for every topic its expression matches), with the partitions and replicas the routes
  give;
- **operations**: ``receive`` for each consumed route (per consumer group), ``send`` for what
  the app declares it produces: the dead letter queues of its routes, the topics its consumers
  list in ``produces``, its job queues (a message per job, with its arguments' schemas); each
  RPC command is a ``receive`` with a ``reply`` on the results topic;
- **messages**: a payload (and key) schema from the consumer's models; JSON of any shape for
  untyped routes; the ``original_*`` headers of dead letters.

The app is a :class:`~conveyor.routing.host.RoutedHost` (its settings and routes); its job
queues are read when it is a :class:`~conveyor.jobs.host.JobsHost` too.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from conveyor._version import __version__
from conveyor.asyncapi.schemas import SchemaBook, _name
from conveyor.jobs.host import JobsHost
from conveyor.routing.topic import Topic

if TYPE_CHECKING:
    from conveyor.jobs.queues import Queue
    from conveyor.routing.host import RoutedHost
    from conveyor.rpc.handlers import Handlers

__all__ = ["asyncapi_document"]

BINDING = "0.5.0"  # the Kafka bindings' version
_DEAD_LETTER_HEADERS = (
    "original_topic",
    "original_partition",
    "original_offset",
    "original_key",
    "original_timestamp",
    "original_consumer_group",
    "original_attempts",
    "original_error_class",
    "original_error_message",
    "original_error_backtrace",
    "original_validation_errors",
)
_SASL = {
    "PLAIN": {"type": "plain"},
    "SCRAM-SHA-256": {"type": "scramSha256"},
    "SCRAM-SHA-512": {"type": "scramSha512"},
    "GSSAPI": {"type": "gssapi"},
}


class _Answering(Protocol):
    """What the document reads of an RPC route's answering side (its consumer's ``rpc``)."""

    @property
    def handlers(self) -> Handlers:
        """The commands it answers."""

    @property
    def results_topic(self) -> str:
        """Where its replies go unless a request says otherwise."""


@dataclass
class _Document:
    """The document as it is built: channels, operations, messages, shared schemas."""

    book: SchemaBook = field(default_factory=SchemaBook)
    channels: dict[str, Any] = field(default_factory=dict)
    operations: dict[str, Any] = field(default_factory=dict)
    messages: dict[str, Any] = field(default_factory=dict)

    def channel(self, route: Topic | None, topic: str) -> str:
        """The channel of ``topic`` (made on first use); ``route`` gives its layout."""
        pattern = route.pattern if route is not None else None
        key = _key(("pattern_" if pattern is not None else "") + topic)
        channel = self.channels.setdefault(
            key,
            {"address": None if pattern is not None else topic, "messages": {}},
        )
        if pattern is not None:
            channel["description"] = f"Every topic whose name matches /{pattern.pattern}/."
        kafka: dict[str, Any] = {}
        if route is not None and route.partitions is not None:
            kafka["partitions"] = route.partitions
        if route is not None and route.replication_factor is not None:
            kafka["replicas"] = route.replication_factor
        if kafka:
            channel.setdefault("bindings", {"kafka": {"bindingVersion": BINDING}})
            channel["bindings"]["kafka"].update(kafka)
        return key

    def message(self, channel: str, name: str, body: dict[str, Any]) -> dict[str, str]:
        """Put message ``name`` (``body``) on ``channel``; the reference operations use."""
        self.messages.setdefault(name, {"name": name, **body})
        self.channels[channel]["messages"][name] = {"$ref": f"#/components/messages/{name}"}
        return {"$ref": f"#/channels/{channel}/messages/{name}"}

    def route_message(self, channel: str, payload_model: Any, key_model: Any) -> dict[str, str]:
        """The message of a route: its models' schemas, or JSON of any shape."""
        body: dict[str, Any] = {"contentType": "application/json"}
        body["payload"] = self.book.of(payload_model)
        name = f"{channel}_message"
        if payload_model is not None:  # named as its schema is, apart from a namesake's
            name = self.book.name_of(payload_model) or _name(payload_model)
        if key_model is not None:
            body["bindings"] = {
                "kafka": {"key": self.book.of(key_model), "bindingVersion": BINDING}
            }
        return self.message(channel, name, body)


def asyncapi_document(
    app: RoutedHost, title: str | None = None, version: str = "1.0.0"
) -> dict[str, Any]:
    """The AsyncAPI 3.0 document of ``app`` (its settings and routes, and its job queues when
    it has jobs), as a dict ready for JSON or YAML. ``title`` defaults to the app's
    ``client_id``; ``version`` is the application's version the document describes."""
    queues = _job_queues(app)
    document = _Document()
    for route in app.routes:
        _add_route(document, route, queues)
    if document.book.clashes:  # two classes of one name: again, each named by its module
        document = _Document(SchemaBook(qualify=frozenset(document.book.clashes)))
        for route in app.routes:
            _add_route(document, route, queues)
    kafka = dict(app.settings.kafka)
    servers, schemes = _servers(kafka)
    result: dict[str, Any] = {
        "asyncapi": "3.0.0",
        "info": {
            "title": title or app.settings.client_id,
            "version": version,
            "description": f"Generated by Conveyor {__version__} from the app's routes.",
        },
        "defaultContentType": "application/json",
        "servers": servers,
        "channels": document.channels,
        "operations": document.operations,
        "components": {"messages": document.messages, "schemas": document.book.components},
    }
    if schemes:
        result["components"]["securitySchemes"] = schemes
    return result


def _job_queues(app: RoutedHost) -> dict[str, Queue]:
    """The app's job queues by their topic (none when the app has no jobs)."""
    if not isinstance(app, JobsHost):
        return {}
    return {queue.topic: queue for queue in app.jobs.queues.values()}


def _add_route(document: _Document, route: Topic, queues: Mapping[str, Queue]) -> None:
    consumer = route.consumer_class
    channel = document.channel(route, route.name)
    answering: _Answering | None = getattr(consumer, "rpc", None)
    queue = queues.get(route.name)
    if queue is not None and getattr(consumer, "queue", None) is not queue:
        queue = None  # the queue's topic, read by another consumer than the queue's runner
    if answering is not None and route.active:
        _add_rpc(document, route, channel, answering)
    elif queue is not None and route.active:
        _add_jobs(document, route, channel, queue)
    elif route.active and consumer is not None:
        reference = document.route_message(
            channel, getattr(consumer, "payload_model", None), getattr(consumer, "key_model", None)
        )
        document.operations[_key(f"receive_{channel}_{route.consumer_group}")] = {
            "action": "receive",
            "channel": {"$ref": f"#/channels/{channel}"},
            "summary": f"{consumer.__qualname__} in consumer group {route.consumer_group}",
            "messages": [reference],
            "bindings": {
                "kafka": {
                    "groupId": {"type": "string", "enum": [route.consumer_group]},
                    "bindingVersion": BINDING,
                }
            },
        }
    dlq = route.dead_letter_queue
    if dlq is not None and dlq.topic is not None:
        _add_dead_letters(document, route, dlq.topic)
    for topic, model in dict(getattr(consumer, "produces", None) or {}).items():
        target = document.channel(None, topic)
        reference = document.route_message(target, model, None)
        document.operations[_key(f"send_{target}")] = {
            "action": "send",
            "channel": {"$ref": f"#/channels/{target}"},
            "messages": [reference],
        }


def _add_dead_letters(document: _Document, route: Topic, topic: str) -> None:
    channel = document.channel(None, topic)
    headers = {
        "type": "object",
        "properties": {name: {"type": "string"} for name in _DEAD_LETTER_HEADERS},
    }
    reference = document.message(
        channel,
        f"{channel}_dead_letter",
        {
            "summary": "A message that failed, as it came, with where from and why.",
            "headers": headers,
            "payload": {},
        },
    )
    document.operations[_key(f"send_{channel}_from_{document.channel(route, route.name)}")] = {
        "action": "send",
        "channel": {"$ref": f"#/channels/{channel}"},
        "summary": f"Dead letters of {route.name}",
        "messages": [reference],
    }


def _add_rpc(document: _Document, route: Topic, channel: str, answering: _Answering) -> None:
    results = document.channel(None, answering.results_topic)
    handlers = answering.handlers
    for name in handlers.names():
        handler = handlers.get(name)
        assert handler is not None, "names() lists the registered commands"
        request, reply = _rpc_schemas(document.book, name, handler)
        key = _key(f"rpc_{name}")
        request_ref = document.message(channel, f"{key}_request", {"payload": request})
        reply_ref = document.message(results, f"{key}_reply", {"payload": reply})
        document.operations[key] = {
            "action": "receive",
            "channel": {"$ref": f"#/channels/{channel}"},
            "summary": f"The RPC command {name!r}",
            "messages": [request_ref],
            "reply": {"channel": {"$ref": f"#/channels/{results}"}, "messages": [reply_ref]},
        }


def _add_jobs(document: _Document, route: Topic, channel: str, queue: Queue) -> None:
    """A job queue: the app sends each job to it (``enqueue``) and runs it from there."""
    references = []
    for name, job in queue.by_name.items():
        positional, arguments, _ = _arguments(document.book, job.function)
        payload = {
            "type": "object",
            "required": ["job", "args", "kwargs", "id"],
            "properties": {
                "job": {"const": name},
                "args": {"type": "array", "items": positional},
                "kwargs": {"type": "object", "properties": arguments},
                "id": {"type": "string"},
                "enqueued_at": {"type": "integer"},
            },
        }
        body = {"summary": f"The job {name}", "payload": payload}
        references.append(document.message(channel, _key(f"job_{name}"), body))
    if not references:
        return
    for action, key, summary in (
        ("send", f"enqueue_{channel}", f"Jobs enqueued to the queue {queue.name}"),
        (
            "receive",
            f"receive_{channel}_{route.consumer_group}",
            f"The jobs of the queue {queue.name}, run by the app",
        ),
    ):
        document.operations[_key(key)] = {
            "action": action,
            "channel": {"$ref": f"#/channels/{channel}"},
            "summary": summary,
            "messages": references,
        }


def _arguments(
    book: SchemaBook, function: Callable[..., Any]
) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]], dict[str, Any]]:
    """A function's positional argument schemas, every argument's by name, and its hints."""
    try:
        hints = typing.get_type_hints(function)
    except Exception:
        hints = {}
    parameters = [
        p
        for p in inspect.signature(function).parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    ]
    arguments = {p.name: book.of(hints.get(p.name)) for p in parameters}
    positional = [arguments[p.name] for p in parameters if p.kind is not p.KEYWORD_ONLY]
    return positional, arguments, hints


def _rpc_schemas(
    book: SchemaBook, name: str, handler: Callable[..., Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A command's request and reply schemas from its handler's signature and type hints."""
    positional, arguments, hints = _arguments(book, handler)
    request = {
        "type": "object",
        "required": ["id", "name"],
        "properties": {
            "id": {"type": "string"},
            "name": {"const": name},
            "args": {"type": "array", "items": positional},
            "kwargs": {"type": "object", "properties": arguments},
            "reply_to": {"type": "string"},
            "deadline": {"type": "number"},
        },
    }
    reply = {
        "type": "object",
        "required": ["id"],
        "properties": {
            "id": {"type": "string"},
            "ok": book.of(hints.get("return")),
            "error": {
                "type": "object",
                "properties": {"type": {"type": "string"}, "message": {"type": "string"}},
            },
        },
    }
    return request, reply


def _servers(kafka: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The servers (one per bootstrap server) and the security schemes they use."""
    protocol = str(kafka.get("security.protocol", "PLAINTEXT")).upper()
    secure = protocol in ("SSL", "SASL_SSL")
    schemes: dict[str, Any] = {}
    if protocol.startswith("SASL"):
        mechanism = str(kafka.get("sasl.mechanism", kafka.get("sasl.mechanisms", "GSSAPI"))).upper()
        if mechanism == "OAUTHBEARER":
            token = kafka.get("sasl.oauthbearer.token.endpoint.url")
            flows = (
                {"clientCredentials": {"tokenUrl": str(token), "availableScopes": {}}}
                if token
                else {}
            )
            schemes["oauthbearer"] = {"type": "oauth2", "flows": flows}
        elif mechanism in _SASL:
            schemes[mechanism.lower().replace("-", "_")] = dict(_SASL[mechanism])
    elif secure and kafka.get("ssl.certificate.location"):
        schemes["x509"] = {"type": "X509"}
    security = [{"$ref": f"#/components/securitySchemes/{name}"} for name in schemes]
    servers = {}
    for index, host in enumerate(_hosts(kafka.get("bootstrap.servers", "")), start=1):
        server: dict[str, Any] = {"host": host, "protocol": "kafka-secure" if secure else "kafka"}
        if security:
            server["security"] = security
        servers[f"broker-{index}"] = server
    return servers, schemes


def _hosts(bootstrap: Any) -> Iterable[str]:
    for entry in str(bootstrap).split(","):
        host = entry.strip()
        if "://" in host:
            host = host.split("://", 1)[1]
        if host:
            yield host


def _key(text: str) -> str:
    """``text`` as an AsyncAPI component key (``^[a-zA-Z0-9.\\-_]+$``)."""
    return "".join(c if c.isascii() and (c.isalnum() or c in "._-") else "_" for c in text)
