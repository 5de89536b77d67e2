"""The examples' tests are written as a user of Conveyor writes them: with
``conveyor.testing`` and its pytest fixtures, without a broker."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from conveyor import App

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
if str(EXAMPLES) not in sys.path:
    sys.path.insert(0, str(EXAMPLES))


@pytest.fixture(autouse=True)
def shop_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The shop takes its brokers from the environment, as a deployed app does; these tests
    reach no broker (conveyor.testing captures), but building the App needs an address."""
    if not os.environ.get("KAFKA_BOOTSTRAP_SERVERS"):
        monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092")


@pytest.fixture
def conveyor_app() -> App:
    """The shop (a user would name it in pyproject.toml: conveyor_app = "shop.app:app")."""
    from shop.app import app  # noqa: PLC0415 - the examples folder is on the path from here

    return app
