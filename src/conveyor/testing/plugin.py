"""Conveyor's pytest plugin (registered as ``conveyor`` under ``pytest11``): fixtures for
testing your consumers without a broker.

- ``conveyor_app``: your app, whose producers capture instead of sending, with nothing
  captured at the start of each test. It loads ``module:attribute`` from the ``conveyor_app``
  ini option (``[tool.pytest.ini_options] conveyor_app = "shop.app:app"``) or
  ``$CONVEYOR_APP``; or define a fixture of that name in your ``conftest.py``.
- ``conveyor_consumer``: ``conveyor_consumer("orders", partition=0)`` makes the consumer the
  app routes that topic to (:func:`conveyor.testing.consumer_for`).

Nothing of Conveyor is imported until a test asks for a fixture.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from conveyor.consumer import Consumer
    from conveyor.testing.host import AppUnderTest

__all__ = ["conveyor_app", "conveyor_consumer", "pytest_addoption"]

INI_NAME = "conveyor_app"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(INI_NAME, "the app (module:attribute) the conveyor_app fixture loads", default="")


@pytest.fixture
def conveyor_app(request: pytest.FixtureRequest) -> Iterator[AppUnderTest]:
    """The app named by the ``conveyor_app`` ini option or ``$CONVEYOR_APP``, capturing
    (what it captured is cleared before and after the test)."""
    from conveyor.cli.loading import load_app  # noqa: PLC0415 - only when a test asks
    from conveyor.testing import capture  # noqa: PLC0415

    spec = str(request.config.getini(INI_NAME) or os.environ.get("CONVEYOR_APP", ""))
    if not spec:
        raise pytest.UsageError(
            'the conveyor_app fixture needs your app: set conveyor_app = "module:attribute" '
            "under [tool.pytest.ini_options] (or CONVEYOR_APP), or define a fixture named "
            "conveyor_app in conftest.py"
        )
    app = load_app(spec)
    captured = capture(app)
    captured.clear()
    yield app
    captured.clear()


@pytest.fixture
def conveyor_consumer(conveyor_app: AppUnderTest) -> Iterator[Callable[..., Consumer]]:
    """Makes the consumers of ``conveyor_app``'s routes (what the app captured is cleared
    before and after the test, also when ``conveyor_app`` is a fixture of your own)."""
    from conveyor.testing import capture, consumer_for  # noqa: PLC0415

    captured = capture(conveyor_app)
    captured.clear()

    def make(topic: str, partition: int = 0, **options: Any) -> Consumer:
        return consumer_for(conveyor_app, topic, partition, **options)

    yield make
    captured.clear()
