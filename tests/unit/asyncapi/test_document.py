"""The AsyncAPI 3.0 document of an app validates against AsyncAPI's own JSON Schema (from the
@asyncapi/specs package, fetched by ``make test``) and says what the app declares: servers
and security, a channel per topic, receive and send operations, RPC request-reply, message
schemas from the models."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import types
import uuid
from pathlib import Path
from typing import Any, ClassVar

import jsonschema
import msgspec
import pydantic
import pytest
import yaml
from click.testing import CliRunner

from conveyor import App, Consumer
from conveyor.asyncapi import asyncapi_document, to_yaml
from conveyor.asyncapi.document import _servers
from conveyor.cli.main import cli
from conveyor.rpc import Handlers

ROOT = Path(__file__).parents[3]
USER = {"sasl.username": "shop", "sasl.password": "secret"}
SCHEMA = ROOT / ".cache" / "asyncapi-specs" / "schemas" / "3.0.0-without-$id.json"


@pytest.fixture(scope="module")
def validator() -> Any:
    assert SCHEMA.exists(), (
        f"{SCHEMA} is missing: tools/ensure-asyncapi-schema fetches it (make test runs it)"
    )
    schema = json.loads(SCHEMA.read_text())
    return jsonschema.validators.validator_for(schema)(schema)


def _errors(validator: Any, document: dict[str, Any]) -> list[str]:
    return [f"{list(e.path)}: {e.message[:200]}" for e in validator.iter_errors(document)]


class Line(pydantic.BaseModel):
    sku: str
    quantity: int


class Order(pydantic.BaseModel):
    id: int
    lines: list[Line]


class Payment(msgspec.Struct):
    order: int
    amount: float


@dataclasses.dataclass
class Invoice:
    order: int
    total: float


class Orders(Consumer[Order, uuid.UUID]):
    produces: ClassVar[dict[str, Any]] = {"invoices": Invoice}

    def consume(self) -> None: ...


class Payments(Consumer[Payment]):
    def consume(self) -> None: ...


class Audit(Consumer):
    def consume(self) -> None: ...


def typed_app(**kafka: Any) -> App:
    app = App(client_id="shop", kafka={"bootstrap.servers": "a:9092,b:9093", **kafka})
    app.routes.topic("orders", Orders, partitions=6, replication_factor=3,
                     dead_letter_queue={"topic": "orders_dlq"})  # fmt: skip
    with app.routes.consumer_group("billing"):
        app.routes.topic("payments", Payments)
    app.routes.pattern(r"audit\..*", Audit)
    handlers = Handlers()

    @handlers.register("quote")
    def quote(order: Order, discount: float = 0.0) -> Payment:
        return Payment(order=order.id, amount=1.0)

    app.routes.rpc("commands", handlers, results_topic="results")

    @app.job(queue="billing", name="bill")
    def bill(order: Order, *, rush: bool = False) -> None: ...

    return app


def test_the_document_of_a_typed_app_validates_and_says_what_it_declares(validator: Any) -> None:
    document = asyncapi_document(typed_app(), version="2.1.0")
    assert _errors(validator, document) == []
    assert document["info"] == {
        "title": "shop", "version": "2.1.0",
        "description": document["info"]["description"],
    }  # fmt: skip
    assert [s["host"] for s in document["servers"].values()] == ["a:9092", "b:9093"]
    channels, operations = document["channels"], document["operations"]
    assert channels["orders"]["address"] == "orders"
    assert channels["orders"]["bindings"]["kafka"]["partitions"] == 6
    [pattern] = [key for key, channel in channels.items() if channel["address"] is None]
    assert pattern.startswith("pattern_")
    assert "audit" in channels[pattern]["description"]
    assert set(channels) >= {"orders", "orders_dlq", "invoices", "payments", pattern,
                             "commands", "results", "jobs-billing", "jobs-billing-dead"}  # fmt: skip
    assert operations["enqueue_jobs-billing"]["action"] == "send"
    assert operations["receive_jobs-billing_shop"]["action"] == "receive"
    job = document["components"]["messages"]["job_bill"]["payload"]
    assert job["properties"]["args"]["items"] == [{"$ref": "#/components/schemas/Order"}]
    assert job["properties"]["kwargs"]["properties"]["rush"] == {"type": "boolean"}
    receive = operations["receive_orders_shop"]
    assert receive["action"] == "receive"
    assert receive["bindings"]["kafka"]["groupId"]["enum"] == ["shop"]
    assert operations["receive_payments_billing"]["bindings"]["kafka"]["groupId"]["enum"] == [
        "billing"
    ]
    assert operations["send_invoices"]["action"] == "send"
    assert operations["send_orders_dlq_from_orders"]["action"] == "send"
    quote = operations["rpc_quote"]
    assert quote["reply"]["channel"] == {"$ref": "#/channels/results"}
    components = document["components"]
    order = components["messages"]["Order"]
    assert order["payload"] == {"$ref": "#/components/schemas/Order"}
    assert order["bindings"]["kafka"]["key"] == {"type": "string", "format": "uuid"}
    schemas = components["schemas"]
    assert schemas["Order"]["properties"]["lines"]["items"] == {"$ref": "#/components/schemas/Line"}
    assert set(schemas) >= {"Order", "Line", "Payment", "Invoice"}
    assert "$defs" not in json.dumps(document), "no model's own definitions left to point nowhere"
    dead = components["messages"]["orders_dlq_dead_letter"]
    assert "original_validation_errors" in dead["headers"]["properties"]
    request = components["messages"]["rpc_quote_request"]["payload"]
    assert request["properties"]["args"]["items"][0] == {"$ref": "#/components/schemas/Order"}
    assert components["messages"]["rpc_quote_reply"]["payload"]["properties"]["ok"] == {
        "$ref": "#/components/schemas/Payment"
    }


class _RoutesOnly:
    """A host with settings and routes and no jobs (a RoutedHost that is no JobsHost)."""

    def __init__(self, app: App) -> None:
        self.settings, self.routes = app.settings, app.routes


def test_a_queues_jobs_are_its_runners_and_a_host_without_jobs_has_none() -> None:
    app = typed_app()
    with app.routes.consumer_group("audit"):
        app.routes.topic("jobs-billing", Audit)  # the queue's topic, read by another consumer
    operations = asyncapi_document(app)["operations"]
    assert operations["receive_jobs-billing_shop"]["summary"].startswith("The jobs of the queue")
    assert operations["receive_jobs-billing_audit"]["summary"] == (
        "Audit in consumer group audit"
    ), "another consumer of the queue's topic receives messages, it runs no jobs"
    without = asyncapi_document(_RoutesOnly(app))["operations"]  # type: ignore[arg-type]
    assert "enqueue_jobs-billing" not in without, "no jobs read from a host that has none"
    assert without["receive_orders_shop"] == operations["receive_orders_shop"]


@pytest.mark.parametrize(
    ("kafka", "scheme", "protocol"),
    [
        ({"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", **USER},
         {"type": "scramSha512"}, "kafka-secure"),
        ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", **USER},
         {"type": "plain"}, "kafka"),
        ({"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER"},
         {"type": "oauth2", "flows": {}}, "kafka-secure"),
    ],
)  # fmt: skip
def test_servers_carry_the_apps_security(
    validator: Any, kafka: dict[str, Any], scheme: dict[str, Any], protocol: str
) -> None:
    document = asyncapi_document(typed_app(**kafka))
    assert _errors(validator, document) == []
    assert list(document["components"]["securitySchemes"].values()) == [scheme]
    server = document["servers"]["broker-1"]
    assert server["protocol"] == protocol
    assert server["security"][0]["$ref"].startswith("#/components/securitySchemes/")


def test_a_client_certificate_is_an_x509_scheme() -> None:
    servers, schemes = _servers(
        {"bootstrap.servers": "SSL://a:9094", "security.protocol": "SSL",
         "ssl.certificate.location": "/etc/client.pem"}
    )  # fmt: skip
    assert schemes == {"x509": {"type": "X509"}}
    assert servers == {
        "broker-1": {"host": "a:9094", "protocol": "kafka-secure",
                     "security": [{"$ref": "#/components/securitySchemes/x509"}]}
    }  # fmt: skip


def test_the_validation_is_no_formality(validator: Any) -> None:
    document = asyncapi_document(typed_app())
    document["operations"]["receive_orders_shop"]["action"] = "listen"
    assert _errors(validator, document), "an action AsyncAPI does not know is refused"


def test_the_yaml_reads_back_as_the_document() -> None:
    document = asyncapi_document(typed_app())
    assert yaml.safe_load(to_yaml(document)) == document


def test_the_example_apps_document_validates(
    validator: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    examples = ROOT / "examples"
    monkeypatch.chdir(examples)
    monkeypatch.setattr(sys, "path", [str(examples), *sys.path])
    if not os.environ.get("KAFKA_BOOTSTRAP_SERVERS"):  # the shop's brokers (none is reached)
        monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092")
    output = tmp_path / "shop.yaml"
    result = CliRunner().invoke(cli, ["asyncapi", "--app", "shop.app:app", "-o", str(output)])
    assert result.exit_code == 0, result.output
    assert "channels" in result.output
    document = yaml.safe_load(output.read_text())
    assert _errors(validator, document) == []
    assert document["operations"]["send_shop-payments"]["action"] == "send"
    as_json = CliRunner().invoke(cli, ["asyncapi", "--app", "shop.app:app", "--format", "json"])
    assert json.loads(as_json.output) == document


def test_yaml_numbers_and_control_characters_read_back_as_written() -> None:
    value = {"small": 1e-05, "big": 1e100, "inf": float("inf"), "text": "x\x7fy\x85z\u2028",
             "words": ["yes", "1.0", "a: b", "#c", "-d", "*e", ""], "n": -2, "f": 1.5}  # fmt: skip
    assert yaml.safe_load(to_yaml(value)) == value


_SHOP = """
import msgspec

class Item(msgspec.Struct):
    sku: str

class Order(msgspec.Struct):
    id: int
    items: list[Item]
"""
_BILLING = """
import pydantic

class Item(pydantic.BaseModel):
    amount: float

class Order(pydantic.BaseModel):
    total: float
    items: list[Item]
"""


def _module(monkeypatch: pytest.MonkeyPatch, name: str, source: str) -> Any:
    module = types.ModuleType(name)
    monkeypatch.setitem(sys.modules, name, module)  # where get_type_hints resolves names
    exec(source, module.__dict__)
    return module


def _references(value: Any) -> list[str]:
    if isinstance(value, dict):
        own = [value["$ref"]] if isinstance(value.get("$ref"), str) else []
        return own + [r for item in value.values() for r in _references(item)]
    if isinstance(value, list):
        return [r for item in value for r in _references(item)]
    return []


def _resolve(document: dict[str, Any], reference: str) -> Any:
    assert reference.startswith("#/"), reference
    target: Any = document
    for part in reference[2:].split("/"):
        target = target[part]
    return target


def test_models_of_one_name_from_two_modules_are_two_components(
    validator: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """shop.Order and billing.Order (each with its own Item) were one component, the first
    met: the other's messages and references described the wrong model."""
    shop, billing = _module(monkeypatch, "shop", _SHOP), _module(monkeypatch, "billing", _BILLING)

    def app_of(first: Any, second: Any) -> App:
        app = App(client_id="both", kafka={"bootstrap.servers": "a:9092"})
        for module in (first, second):
            consumer = types.new_class(
                "Reader",
                (Consumer[module.Order],),
                exec_body=lambda body: body.update(consume=lambda self: None),
            )
            app.routes.topic(f"{module.__name__}-orders", consumer)

        def settle(order: Any, orders: Any) -> Any: ...

        # (the modules are this test's locals: the hints are given as objects)
        settle.__annotations__ = {
            "order": shop.Order | None, "orders": list[billing.Order], "return": Payment
        }  # fmt: skip
        handlers = Handlers()
        handlers.register("settle")(settle)
        app.routes.rpc("commands", handlers, results_topic="results")
        return app

    document = asyncapi_document(app_of(shop, billing))
    assert _errors(validator, document) == []
    schemas = document["components"]["schemas"]
    assert {"shop.Order", "shop.Item", "billing.Order", "billing.Item", "Payment"} <= set(schemas)
    assert "Order" not in schemas, "a clashing name is qualified"
    assert "Item" not in schemas
    assert set(schemas["shop.Order"]["properties"]) == {"id", "items"}
    assert schemas["shop.Order"]["properties"]["items"]["items"] == {
        "$ref": "#/components/schemas/shop.Item"
    }
    assert set(schemas["billing.Order"]["properties"]) == {"total", "items"}
    assert schemas["billing.Order"]["properties"]["items"]["items"] == {
        "$ref": "#/components/schemas/billing.Item"
    }
    assert set(schemas["billing.Item"]["properties"]) == {"amount"}
    messages = document["components"]["messages"]
    for module in ("shop", "billing"):
        [reference] = document["channels"][f"{module}-orders"]["messages"].values()
        assert _resolve(document, reference["$ref"])["payload"] == {
            "$ref": f"#/components/schemas/{module}.Order"
        }
    arguments = messages["rpc_settle_request"]["payload"]["properties"]["kwargs"]["properties"]
    assert arguments["order"] == {
        "anyOf": [{"$ref": "#/components/schemas/shop.Order"}, {"type": "null"}]
    }
    assert arguments["orders"]["items"] == {"$ref": "#/components/schemas/billing.Order"}
    for reference in _references(document):
        _resolve(document, reference)  # each one points at something
    assert asyncapi_document(app_of(billing, shop))["components"]["schemas"] == schemas, (
        "the same names whichever route comes first"
    )
