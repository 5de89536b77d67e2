"""The schema tests' registry: one Apicurio Registry for the session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from schema_registry import running_registry


@pytest.fixture(scope="session")
def registry_url() -> Iterator[str]:
    with running_registry() as url:
        yield url
