"""The examples' tests are written as a user of Conveyor writes them: with
``conveyor.testing`` and its pytest fixtures, without a broker."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from conveyor import App

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
if str(EXAMPLES) not in sys.path:
    sys.path.insert(0, str(EXAMPLES))


@pytest.fixture
def conveyor_app() -> App:
    """The shop (a user would name it in pyproject.toml: conveyor_app = "shop.app:app")."""
    from shop.app import app  # noqa: PLC0415 - the examples folder is on the path from here

    return app
