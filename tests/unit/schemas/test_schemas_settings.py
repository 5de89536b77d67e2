"""Schema settings that cannot work are refused when built, named."""

from __future__ import annotations

import pytest

from conveyor.errors import ConfigurationError
from conveyor.schemas import Avro, SchemaRegistry


def test_a_registry_url_must_be_http() -> None:
    with pytest.raises(ConfigurationError) as refused:
        SchemaRegistry("127.0.0.1:8081")
    assert refused.value.setting == "url"


def test_avro_without_a_schema_reads_but_refuses_to_write() -> None:
    with SchemaRegistry("http://127.0.0.1:1") as registry:
        reader = Avro(registry)
        with pytest.raises(ConfigurationError) as refused:
            reader.serialize("orders", {"id": 1})
    assert refused.value.setting == "schema"
    assert "Avro(orders)" in repr(reader.deserializers("orders"))
