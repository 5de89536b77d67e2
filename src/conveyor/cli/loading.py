"""Find the user's app from ``module:attribute`` (``--app`` or ``$CONVEYOR_APP``), and the
``--app`` and ``--json`` options every command spells the same way."""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any, TypeVar

import click

from conveyor.app import App
from conveyor.environment import kafka_from_environment
from conveyor.errors import ConfigurationError, ConveyorError

__all__ = ["app_option", "json_option", "kafka_without_app", "load_app"]

_Decorated = TypeVar("_Decorated", bound="Callable[..., Any] | click.Command")


def app_option(
    help: str = "The app (default: $CONVEYOR_APP).",
) -> Callable[[_Decorated], _Decorated]:
    """The ``--app MODULE:ATTR`` option (``$CONVEYOR_APP`` when not given), passed to the
    command as ``app_spec`` for :func:`load_app`; ``help`` says what the command uses it for."""
    return click.option(
        "--app", "app_spec", envvar="CONVEYOR_APP", metavar="MODULE:ATTR", help=help
    )


def json_option(
    help: str = "Print JSON instead of a table.",
) -> Callable[[_Decorated], _Decorated]:
    """The ``--json`` flag, passed to the command as ``as_json``."""
    return click.option("--json", "as_json", is_flag=True, help=help)


def kafka_without_app() -> dict[str, str]:
    """librdkafka settings from the environment (``KAFKA_BOOTSTRAP_SERVERS``,
    ``CONVEYOR_KAFKA_*``): for a command that runs without an app."""
    return {name: value for name, (value, _variable) in kafka_from_environment().items()}


def load_app(spec: str | None) -> App:
    """Import ``module:attribute`` (the current folder is importable) and return the App.

    Raises:
        ConfigurationError: no spec, a module that does not import, or not an App.
    """
    if not spec:
        raise ConfigurationError(
            "no app given: pass --app module:attribute (e.g. shop.app:app) or set CONVEYOR_APP",
            "app",
        )
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ConfigurationError(
            f"--app must look like module:attribute (e.g. shop.app:app), got {spec!r}", "app"
        )
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ConveyorError:
        raise  # already says what is wrong (a bad setting of the App, say)
    except ImportError as exc:
        raise ConfigurationError(
            f"could not import {module_name!r} for --app {spec}: {exc}", "app"
        ) from exc
    except Exception as exc:  # a SyntaxError, or anything the module raises as it runs
        raise ConfigurationError(
            f"could not import {module_name!r} for --app {spec}: {type(exc).__name__}: {exc}"
            f"{_where(exc)}",
            "app",
        ) from exc
    app = getattr(module, attribute, None)
    if not isinstance(app, App):
        found = "nothing" if app is None else type(app).__name__
        raise ConfigurationError(f"{spec} is {found}, not a conveyor.App", "app")
    return app


def _where(exc: BaseException) -> str:
    """`` (at file:line)`` of the innermost frame that raised ``exc`` (a SyntaxError says its
    own place in its message)."""
    if isinstance(exc, SyntaxError):
        return ""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return ""
    last = frames[-1]
    return f" (at {last.filename}:{last.lineno})"
