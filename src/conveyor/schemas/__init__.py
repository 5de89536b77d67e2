"""Schemas: Avro, Protobuf and JSON Schema payloads through a Schema Registry (Confluent's
wire format: a magic byte and the schema's id before the data), with confluent-kafka's
Schema Registry client (extra ``conveyor[schemas]``).

Example::

    from conveyor.schemas import Avro, SchemaRegistry

    registry = SchemaRegistry("http://127.0.0.1:8081")
    orders = Avro(registry, schema=ORDER_SCHEMA)         # the writer's schema
    app.producer.middleware.append(orders.serializing("orders"))   # dict -> Avro bytes
    app.routes.topic("orders", OrdersConsumer, deserializers=orders.deserializers("orders"))

The serializer registers the schema under the topic's subject (``orders-value``, or
``orders-key`` for keys) the first time; the deserializer reads the schema id from each
message and fetches that schema once (cached). A payload that is not in the wire format, or
whose schema the registry does not know, fails deserialization — the route's failure policy
(retry, dead letter queue) decides what happens to it, as for any payload.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from conveyor.errors import ConfigurationError
from conveyor.messages import Deserializers

__all__ = ["Avro", "JsonSchema", "Protobuf", "SchemaRegistry"]

INSTALL_HINT = "pip install 'conveyor[schemas]'"


def _import(module: str) -> Any:
    try:
        return __import__(module, fromlist=["_"])
    except ImportError as error:
        raise ConfigurationError(
            f"schemas need confluent-kafka's Schema Registry client and its codecs ({error}): "
            f"{INSTALL_HINT}",
            "schemas",
        ) from None


class SchemaRegistry:
    """A Schema Registry at ``url`` (any server with Confluent's REST API); ``config`` holds
    the client's other settings (``basic.auth.user.info``, ``ssl.ca.location``, ...)."""

    def __init__(self, url: str, **config: Any) -> None:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ConfigurationError(f"the registry url must be http(s)://..., got {url!r}", "url")
        registry = _import("confluent_kafka.schema_registry")
        settings = {"url": url, **{key.replace("_", "."): value for key, value in config.items()}}
        try:
            self.client = registry.SchemaRegistryClient(settings)
        except (ValueError, TypeError) as error:
            raise ConfigurationError(f"schema registry settings: {error}", "schemas") from None
        self.url = url

    def subjects(self) -> list[str]:
        """The registry's subjects (asks it)."""
        return list(self.client.get_subjects())

    def close(self) -> None:
        """Close the client's connections."""
        self.client.close()

    def __enter__(self) -> SchemaRegistry:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


class _Format:
    """A payload format through the registry: serialize and deserialize per topic."""

    def __init__(self, serializer: Any, deserializer: Any) -> None:
        serialization = _import("confluent_kafka.serialization")
        self._context = serialization.SerializationContext
        self._field = serialization.MessageField
        self._serializer = serializer
        self._deserializer = deserializer

    def _ctx(self, topic: str, key: bool) -> Any:
        return self._context(topic, self._field.KEY if key else self._field.VALUE)

    def serialize(self, topic: str, value: Any, *, key: bool = False) -> bytes:
        """``value`` in the wire format for ``topic`` (registering its schema if new)."""
        if self._serializer is None:
            raise ConfigurationError(
                f"{type(self).__name__} needs its schema to serialize", "schema"
            )
        data: bytes = self._serializer(value, self._ctx(topic, key))
        return data

    def deserialize(self, topic: str, data: bytes, *, key: bool = False) -> Any:
        """``data`` of ``topic`` decoded with the schema its id names."""
        return self._deserializer(data, self._ctx(topic, key))

    def deserializers(
        self, topic: str, *, key: bool = False, payload: bool = True
    ) -> Deserializers:
        """A route's :class:`~conveyor.messages.Deserializers` for ``topic``: the payload
        (and with ``key=True`` the key) through the registry."""

        def decode_payload(data: bytes) -> Any:
            return self.deserialize(topic, data)

        def decode_key(data: bytes) -> Any:
            return self.deserialize(topic, data, key=True)

        decode_payload.__qualname__ = f"{type(self).__name__}({topic})"
        decode_key.__qualname__ = f"{type(self).__name__}({topic} key)"
        return Deserializers(
            payload=decode_payload if payload else None, key=decode_key if key else None
        )

    def serializing(
        self, *topics: str, key: bool = False
    ) -> Callable[[dict[str, Any]], dict[str, Any]]:
        """Producer middleware: the payload (with ``key=True`` the key too) of each message
        to one of ``topics`` is serialized for its topic (other messages pass untouched)."""
        wanted = set(topics)

        def serialize(message: dict[str, Any]) -> dict[str, Any]:
            topic = message.get("topic")
            if topic not in wanted:
                return message
            payload = message.get("payload")
            if payload is not None and not isinstance(payload, bytes):
                message["payload"] = self.serialize(topic, payload)
            if key and message.get("key") is not None and not isinstance(message["key"], bytes):
                message["key"] = self.serialize(topic, message["key"], key=True)
            return message

        serialize.__qualname__ = f"{type(self).__name__}.serializing({', '.join(sorted(wanted))})"
        return serialize


class Avro(_Format):
    """Avro: ``schema`` (the writer's schema, JSON text) to serialize dicts; reading needs
    none (each message names its schema) unless ``reader_schema`` asks for another shape."""

    def __init__(
        self,
        registry: SchemaRegistry,
        schema: str | None = None,
        *,
        reader_schema: str | None = None,
        config: Mapping[str, Any] | None = None,
    ) -> None:
        avro = _import("confluent_kafka.schema_registry.avro")
        serializer = (
            avro.AvroSerializer(registry.client, schema, conf=dict(config or {}))
            if schema is not None
            else None
        )
        super().__init__(serializer, avro.AvroDeserializer(registry.client, reader_schema))


class JsonSchema(_Format):
    """JSON Schema: ``schema`` (JSON text) validates what is serialized and what is read."""

    def __init__(
        self, registry: SchemaRegistry, schema: str, *, config: Mapping[str, Any] | None = None
    ) -> None:
        json_schema = _import("confluent_kafka.schema_registry.json_schema")
        super().__init__(
            json_schema.JSONSerializer(schema, registry.client, conf=dict(config or {})),
            json_schema.JSONDeserializer(schema, schema_registry_client=registry.client),
        )


class Protobuf(_Format):
    """Protobuf: ``message_type`` (a generated message class) is what is serialized and what
    is read back (an instance of it)."""

    def __init__(
        self,
        registry: SchemaRegistry,
        message_type: type,
        *,
        config: Mapping[str, Any] | None = None,
    ) -> None:
        protobuf = _import("confluent_kafka.schema_registry.protobuf")
        settings = {"use.deprecated.format": False, **dict(config or {})}
        super().__init__(
            protobuf.ProtobufSerializer(message_type, registry.client, conf=settings),
            protobuf.ProtobufDeserializer(message_type, {"use.deprecated.format": False}),
        )
