"""The ``--log-level`` and ``--log-format`` options of the commands that run an app, and the
logging set-up they ask for (text lines, or one JSON object a line for log collectors)."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click
from rich.text import Text

from conveyor.cli.output import error_console
from conveyor.instrumentation.json_log import FIELDS, JsonFormatter

__all__ = ["LOG_FORMAT_ENV", "LOG_LEVEL_ENV", "Say", "configure_logging", "log_options"]

_cli_log = logging.getLogger("conveyor.cli")

LOG_LEVEL_ENV = "CONVEYOR_LOG_LEVEL"
LOG_FORMAT_ENV = "CONVEYOR_LOG_FORMAT"
_TEXT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

_Decorated = TypeVar("_Decorated", bound="Callable[..., Any] | click.Command")


def log_options(default_level: str = "INFO") -> Callable[[_Decorated], _Decorated]:
    """``--log-level`` (``$CONVEYOR_LOG_LEVEL``) and ``--log-format`` (``$CONVEYOR_LOG_FORMAT``),
    passed to the command as ``log_level`` and ``log_format``."""

    def decorate(command: _Decorated) -> _Decorated:
        command = click.option(
            "--log-format",
            envvar=LOG_FORMAT_ENV,
            default="text",
            show_default=True,
            type=click.Choice(["text", "json"], case_sensitive=False),
            help=f"text lines, or one JSON object a line for log collectors (${LOG_FORMAT_ENV}).",
        )(command)
        return click.option(
            "--log-level",
            envvar=LOG_LEVEL_ENV,
            default=default_level,
            show_default=True,
            type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
            help=f"INFO: start, assignments, rebalances, errors, stop; DEBUG: every batch "
            f"(${LOG_LEVEL_ENV}).",
        )(command)

    return decorate


def configure_logging(level: str, log_format: str) -> None:
    """Send the process's logs to stderr at ``level``, as text or JSON lines (unless the
    process has set up logging already)."""
    handler = logging.StreamHandler(sys.stderr)
    if log_format.lower() == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter(_TEXT))
    logging.basicConfig(level=level.upper(), handlers=[handler])


class Say:
    """What a command tells its operator on stderr: a line of text, or with
    ``--log-format json`` an INFO record of the ``conveyor.cli`` logger (so that stderr holds
    JSON lines only). The text is Rich markup: callers escape what they did not write
    (``rich.markup.escape``)."""

    def __init__(self, log_format: str = "text") -> None:
        self.json = log_format.lower() == "json"

    def __call__(self, text: str, level: int = logging.INFO, **fields: Any) -> None:
        if self.json:
            plain = Text.from_markup(text).plain
            _cli_log.log(level, "%s", plain, extra={FIELDS: fields} if fields else None)
        else:
            error_console.print(text, highlight=False)
