"""Every exception Conveyor raises is a ConveyorError (``except ConveyorError`` catches them
all), and each says in its docstring when it is raised and what to do: the exceptions page
of the reference is made of those docstrings."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import conveyor
from conveyor.errors import ConveyorError

NOT_CONVEYOR_ERRORS = {
    "conveyor.web.ui.views.NotFound": "the web UI's 404: its exception handler answers it with "
    "a 404 page, and the views catch ConveyorError around the reads they may do without (a "
    "ConveyorError would turn a 404 into an empty table)",
    "conveyor.web.reports.MalformedReport": "a message on the reports topic the aggregator "
    "cannot fold: caught where it is parsed (logged and skipped); it never leaves the aggregator",
    "conveyor.connect.sinks.http11.StaleConnection": "a kept-alive connection the server closed "
    "while it was idle: the Webhook's connection pools catch it and send again on a new "
    "connection; it never leaves the sink",
    "conveyor.web.access.SignInRefused": "an Authorization header refused: the UI's guard and "
    "a connect worker's gate catch it and answer its status (401, 429); it never leaves them",
    "conveyor.processing.listener_thread.HandedOver": "ends a listener thread whose role "
    "another thread took while it ran a batch: the listener's loop catches it; it never leaves "
    "the listener",
}
"""Exception classes of the package that are not ConveyorErrors, each with why: none reaches
your code. Private ones are left out too."""


def exception_classes() -> list[type[BaseException]]:
    """Every exception class defined in a module of the package (each module imported)."""
    found: dict[str, type[BaseException]] = {}
    for module_info in pkgutil.walk_packages(conveyor.__path__, "conveyor."):
        if module_info.name.endswith("__main__"):  # runs the command line when imported
            continue
        module = importlib.import_module(module_info.name)
        for thing in vars(module).values():
            if (
                inspect.isclass(thing)
                and issubclass(thing, BaseException)
                and thing.__module__ == module.__name__
            ):
                found[f"{thing.__module__}.{thing.__qualname__}"] = thing
    return list(found.values())


def _name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def test_every_exception_conveyor_raises_is_a_conveyor_error() -> None:
    classes = exception_classes()
    assert len(classes) > 30  # the walk found the package's modules
    outside = {
        _name(cls)
        for cls in classes
        if not issubclass(cls, ConveyorError) and not cls.__name__.startswith("_")
    }
    assert outside == set(NOT_CONVEYOR_ERRORS)


@pytest.mark.parametrize(
    ("name", "builtin"),
    [
        ("conveyor.jobs.JobTimeoutError", TimeoutError),
        ("conveyor.jobs.UnknownJobError", LookupError),
        ("conveyor.rpc.arguments.InvalidArguments", TypeError),
        ("conveyor.connect.sinks.http11.HTTPError", OSError),
        ("conveyor.RpcTimeoutError", TimeoutError),
        ("conveyor.WaitTimeoutError", TimeoutError),
        ("conveyor.ConfigurationError", ValueError),
    ],
)
def test_an_exception_that_is_also_a_builtin_one_is_caught_by_both(
    name: str, builtin: type[BaseException]
) -> None:
    module, _, attribute = name.rpartition(".")
    cls = getattr(importlib.import_module(module), attribute)
    assert issubclass(cls, ConveyorError)
    assert issubclass(cls, builtin)
    with pytest.raises(builtin):
        raise cls("x")


def test_every_conveyor_error_says_when_it_is_raised_and_what_to_do() -> None:
    """The form the exceptions page renders: a first line, ``Raised when ...``, ``What to
    do: ...`` (then anything else, such as ``Attributes:``)."""
    missing = []
    for cls in exception_classes():
        if not issubclass(cls, ConveyorError) or cls.__name__.startswith("_"):
            continue
        paragraphs = inspect.cleandoc(cls.__doc__ or "").split("\n\n")
        if not (
            len(paragraphs) >= 3
            and "\n" not in paragraphs[0].strip()
            and any(p.startswith("Raised when ") for p in paragraphs[1:])
            and any(p.startswith("What to do: ") for p in paragraphs[1:])
        ):
            missing.append(_name(cls))
    assert missing == []
