"""Fixtures of the connect unit tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from unit.connect.http_recorder import Recorder


@pytest.fixture
def serve() -> Iterator[Callable[..., Recorder]]:
    made: list[Recorder] = []

    def start(**options: Any) -> Recorder:
        server = Recorder(**options)
        made.append(server)
        return server

    yield start
    for server in made:
        server.shutdown()
        server.server_close()
