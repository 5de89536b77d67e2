"""A typed app's models in a real Schema Registry (Apicurio Registry's Confluent API): the
JSON Schemas registered under each topic's subjects, checked for compatibility with what the
registry holds, and a migration that stops (creating no topic) when a model is not compatible."""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path

import pydantic
import pytest
from click.testing import CliRunner
from confluent_kafka.schema_registry import ConfigCompatibilityLevel, ServerConfig

from conveyor import Admin
from conveyor.cli.main import cli
from conveyor.schemas import SchemaRegistry

pytestmark = pytest.mark.xdist_group("schemas")  # xdist: see tests/conftest.py

APP = """
import pydantic
from conveyor import App, Consumer

class Order(pydantic.BaseModel):
{fields}

class Key(pydantic.BaseModel):
    region: str

class Orders(Consumer[Order, Key]):
    def consume(self): ...

app = App(client_id="typed", kafka={{"bootstrap.servers": "{bootstrap}"}})
app.routes.topic("{topic}", Orders, partitions=1)
"""


def _write_app(folder: Path, module: str, bootstrap: str, topic: str, *fields: str) -> str:
    body = "\n".join(f"    {field}" for field in fields)
    (folder / f"{module}.py").write_text(APP.format(bootstrap=bootstrap, topic=topic, fields=body))
    return f"{module}:app"


def _invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


def test_models_are_registered_checked_and_an_incompatible_one_stops_the_migration(
    kafka_bootstrap: str, registry_url: str, kafka_admin: Admin, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    topic = f"typed-{uuid.uuid4().hex[:8]}"
    first = _write_app(tmp_path, "typed_v1", kafka_bootstrap, topic, "id: int")
    code, output = _invoke("schemas", "register", "--app", first,
                           "--schema-registry", registry_url, "--json")  # fmt: skip
    assert code == 0, output
    registered = {entry["subject"]: entry for entry in json.loads(output)}
    assert set(registered) == {f"{topic}-value", f"{topic}-key"}
    assert all(e["state"] == "registered" and e["id"] for e in registered.values())
    with SchemaRegistry(registry_url) as registry:
        latest = registry.client.get_latest_version(f"{topic}-value")
        assert json.loads(latest.schema.schema_str)["properties"]["id"]["type"] == "integer"
        for subject in registered:  # readers of the old schema must read what is new
            registry.client.set_config(
                subject, ServerConfig(compatibility=ConfigCompatibilityLevel.FORWARD)
            )

    optional = _write_app(tmp_path, "typed_v2", kafka_bootstrap, topic, "id: int", "note: str = ''")
    code, output = _invoke("schemas", "check", "--app", optional,
                           "--schema-registry", registry_url, "--json")  # fmt: skip
    assert code == 0, output
    assert {e["state"] for e in json.loads(output)} == {"compatible"}

    required = _write_app(tmp_path, "typed_v3", kafka_bootstrap, topic, "id: str")  # a new type
    code, output = _invoke("schemas", "check", "--app", required,
                           "--schema-registry", registry_url, "--json")  # fmt: skip
    assert code == 1, output
    states = {e["subject"]: e["state"] for e in json.loads(output)}
    assert states == {f"{topic}-value": "incompatible", f"{topic}-key": "compatible"}

    code, output = _invoke("topics", "migrate", "--app", required,
                           "--schema-registry", registry_url)  # fmt: skip
    assert code == 1, output
    assert "incompatible" in output
    assert topic not in kafka_admin.list_topics(), "nothing migrated"

    code, output = _invoke("topics", "migrate", "--app", optional,
                           "--schema-registry", registry_url, "--json")  # fmt: skip
    assert code == 0, output
    result = json.loads(output)
    assert [c["topic"] for c in result["changes"] if c["kind"] == "create"] == [topic]
    assert {e["state"] for e in result["schemas"]} == {"registered"}
    assert topic in kafka_admin.list_topics()
    with SchemaRegistry(registry_url) as registry:
        latest = registry.client.get_latest_version(f"{topic}-value")
        assert "note" in json.loads(latest.schema.schema_str)["properties"]


_ = pydantic  # the apps written above import it
