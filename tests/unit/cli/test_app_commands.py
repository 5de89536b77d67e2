"""`conveyor info` shows an app's routes; --app errors are clear; filters narrow the routes."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from conveyor.cli.loading import load_app
from conveyor.cli.main import cli
from conveyor.cli.server import _narrow
from conveyor.errors import ConfigurationError

EXAMPLES = Path(__file__).parents[3] / "examples"


@pytest.fixture
def examples_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(EXAMPLES)
    monkeypatch.setattr(sys, "path", [str(EXAMPLES), *sys.path])
    if not os.environ.get("KAFKA_BOOTSTRAP_SERVERS"):  # the shop's brokers (none is reached)
        monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092")


@pytest.mark.usefixtures("examples_on_path")
def test_info_lists_the_routes_as_a_table() -> None:
    result = CliRunner().invoke(cli, ["info", "--app", "shop.app:app"])
    assert result.exit_code == 0, result.output
    for expected in (
        "shop-orders",
        "shop-payments",
        "OrdersConsumer",
        "PaymentsConsumer",
        "consumer group",
    ):
        assert expected in result.output


@pytest.mark.usefixtures("examples_on_path")
@pytest.mark.parametrize(
    ("spec", "complaint"),
    [
        (None, "no app given"),
        ("shop.app", "module:attribute"),
        ("no_such_module:app", "could not import"),
        ("shop.app:ledger", "not a conveyor.App"),
    ],
)
def test_app_specs_fail_clearly(spec: str | None, complaint: str) -> None:
    with pytest.raises(ConfigurationError, match=complaint):
        load_app(spec)


def test_server_without_an_app_exits_with_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CONVEYOR_APP", raising=False)
    result = CliRunner().invoke(cli, ["server"])
    assert result.exit_code == 1
    assert "no app given" in result.output


def test_include_and_exclude_filters() -> None:
    known = {"orders", "payments", "audit"}
    assert _narrow(None, None, known) is None
    assert _narrow(["orders"], None, known) == ["orders"]
    assert _narrow(None, ["audit"], known) == ["orders", "payments"]
    assert _narrow(["orders", "audit"], ["audit"], known) == ["orders"]


@pytest.mark.parametrize(
    ("source", "complaint"),
    [
        ("app = (\n", "SyntaxError"),
        ("raise RuntimeError('the database is down')\n", "RuntimeError: the database is down (at "),
        (
            "import conveyor\napp = conveyor.App(kafka={'bootstrap.servers': 'x', 'sesion.timeout.ms': 1})\n",
            'kafka["sesion.timeout.ms"]',
        ),
    ],
    ids=["syntax-error", "runtime-error", "bad-setting"],
)
def test_an_app_module_that_fails_to_import_is_one_clear_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, complaint: str
) -> None:
    module = f"broken_{abs(hash(source)) % 10**8}"
    (tmp_path / f"{module}.py").write_text(source)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CONVEYOR_APP", raising=False)
    result = CliRunner().invoke(cli, ["info", "--app", f"{module}:app"])
    assert result.exit_code == 1
    assert complaint in result.output
    assert "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) <= 3, result.output
