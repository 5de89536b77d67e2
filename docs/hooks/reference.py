"""MkDocs hook: the reference pages, generated from the code at build time so they cannot
drift. A page asks for a table with a marker line, ``<!-- reference: NAME -->``; the hook
replaces it with what :data:`TABLES` makes of the code as it is now:

* settings: the parameters of ``App``, ``Producer`` and each sink (type, default, and the
  meaning from the docstring's ``Args:``), the fields of a route, its dead letter queue and its
  virtual partitions (from their dataclasses and the attribute docstrings);
* events: every name of :mod:`conveyor.instrumentation.events` with its docstring;
* exceptions: every class of :mod:`conveyor.errors`, its bases and docstring;
* metrics: every metric name in :mod:`conveyor.metrics` with its help text.

``tests/unit/docs/test_reference.py`` changes a docstring, a default and an event and sees
the table change.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import re
import textwrap
from collections.abc import Callable, Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any

from conveyor import App, Producer, errors
from conveyor import metrics as metrics_package
from conveyor.connect import sinks
from conveyor.environment import APP_VARIABLES, BOOTSTRAP_ENV, DEFAULT, KAFKA_PREFIX
from conveyor.instrumentation import events as events_module
from conveyor.routing.dead_letter_queue import DeadLetterQueue
from conveyor.routing.routes import _OPTIONS
from conveyor.routing.topic import Topic
from conveyor.routing.virtual_partitions import VirtualPartitions
from conveyor.settings import DEFAULT_CLIENT_ID, AppSettings

MARKER = re.compile(r"^<!-- reference: ([\w.-]+) -->$", re.MULTILINE)
NO_DEFAULT = "required"


def _cell(text: str) -> str:
    """One table cell: a single line, pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|") or "—"


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def docstring_args(doc: str | None) -> dict[str, str]:
    """The ``Args:`` section of a Google-style docstring: name -> text (``a, b: text`` gives
    both names the text)."""
    if not doc:
        return {}
    lines = inspect.cleandoc(doc).splitlines()
    found: dict[str, str] = {}
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == "Args:")
    except StopIteration:
        return found
    names: list[str] = []
    indent = None
    for line in lines[start + 1 :]:
        if not line.strip():
            continue
        depth = len(line) - len(line.lstrip())
        if depth == 0:
            break  # the next section
        if indent is None:
            indent = depth
        entry = re.match(r"([\w*][\w, *]*):\s*(.*)", line.strip())
        if depth == indent and entry:
            names = [n.strip().lstrip("*") for n in entry.group(1).split(",")]
            for name in names:
                found[name] = entry.group(2)
        else:
            for name in names:
                found[name] += " " + line.strip()
    return found


def _default(value: Any) -> str:
    if value is inspect.Parameter.empty or value is dataclasses.MISSING:
        return NO_DEFAULT
    if callable(value) and hasattr(value, "__name__"):
        return f"`{value.__name__}`"
    return f"`{value!r}`"


def _annotation(annotation: Any) -> str:
    if annotation is inspect.Parameter.empty:
        return ""
    text = annotation if isinstance(annotation, str) else inspect.formatannotation(annotation)
    return f"`{text}`"


def signature_rows(target: Callable[..., Any], doc: str | None = None) -> list[tuple[str, ...]]:
    """(name, type, default, meaning) of every named parameter of ``target``; the meanings come
    from ``doc`` (default: the class's docstring, then its ``__init__``'s)."""
    function = target.__init__ if inspect.isclass(target) else target  # type: ignore[misc]
    meanings = docstring_args(doc if doc is not None else target.__doc__)
    if inspect.isclass(target):
        meanings = {**docstring_args(function.__doc__), **meanings}
    rows = []
    for name, parameter in inspect.signature(function).parameters.items():
        if name == "self" or parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        rows.append(
            (f"`{name}`", _annotation(parameter.annotation), _default(parameter.default),
             meanings.get(name, ""))
        )  # fmt: skip
    return rows


def attribute_docstrings(cls: type) -> dict[str, str]:
    """The docstrings written under a class's attributes (``x: int = 1`` then ``\"\"\"...\"\"\"``)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body  # type: ignore[attr-defined]
    found = {}
    for statement, following in pairwise(body):
        if (
            isinstance(statement, ast.AnnAssign)
            and isinstance(statement.target, ast.Name)
            and isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        ):
            found[statement.target.id] = inspect.cleandoc(following.value.value)
    return found


def dataclass_rows(
    cls: type, skip: tuple[str, ...] = (), extra: dict[str, str] | None = None
) -> list[tuple[str, ...]]:
    """(name, type, default, meaning) of every field of a dataclass: the meaning is the field's
    docstring, else the class docstring's ``Args:``, else ``extra``."""
    meanings = {**(extra or {}), **docstring_args(cls.__doc__), **attribute_docstrings(cls)}
    rows = []
    for field in dataclasses.fields(cls):
        if field.name in skip:
            continue
        default: Any = field.default
        if default is dataclasses.MISSING and field.default_factory is not dataclasses.MISSING:
            default = field.default_factory()
        rows.append(
            (f"`{field.name}`", _annotation(field.type), _default(default),
             meanings.get(field.name, ""))
        )  # fmt: skip
    return rows


SETTINGS_HEADER = ("setting", "type", "default", "meaning")


def settings_app() -> str:
    """The App's settings, each with its real default (the signature's is ``DEFAULT``: its
    environment variable, else this) and its environment variable."""
    variables = {variable.setting: f"`{variable.name}`" for variable in APP_VARIABLES}
    variables["kafka"] = f"`{BOOTSTRAP_ENV}`, `{KAFKA_PREFIX}<NAME>`"
    rows = []
    for name, kind, shown, meaning in signature_rows(App):
        bare = name.strip("`")
        if shown == _default(DEFAULT):
            real = DEFAULT_CLIENT_ID if bare == "client_id" else getattr(AppSettings, bare)
            shown = _default(real)  # noqa: PLW2901 - the real default replaces DEFAULT
        rows.append((name, kind, shown, variables.get(bare, "—"), meaning))
    return _table(("setting", "type", "default", "environment", "meaning"), rows)


def settings_producer() -> str:
    return _table(SETTINGS_HEADER, signature_rows(Producer))


def settings_route() -> str:
    rows = dataclass_rows(Topic, skip=tuple(f.name for f in dataclasses.fields(Topic)
                                            if f.name not in _OPTIONS))  # fmt: skip
    return _table(SETTINGS_HEADER, rows)


def settings_dead_letter_queue() -> str:
    return _table(SETTINGS_HEADER, dataclass_rows(DeadLetterQueue))


def settings_virtual_partitions() -> str:
    return _table(SETTINGS_HEADER, dataclass_rows(VirtualPartitions))


def settings_sinks() -> str:
    parts = []
    for name in sinks.__all__:
        sink = getattr(sinks, name)
        if inspect.isclass(sink):
            parts.append(f"**`{name}`**: {_summary(sink)}\n\n")
            parts.append(_table(SETTINGS_HEADER, signature_rows(sink)) + "\n")
    return "".join(parts)


def _summary(thing: Any) -> str:
    doc = inspect.getdoc(thing) or ""
    return " ".join(doc.split("\n\n")[0].split())


def _module_constants(path: Path) -> Iterator[tuple[str, Any, str]]:
    """(name, value, docstring) of each module-level constant followed by a docstring."""
    body = ast.parse(path.read_text()).body
    for statement, following in pairwise(body):
        if (
            isinstance(statement, ast.Assign)
            and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name)
            and isinstance(statement.value, ast.Constant)
            and isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        ):
            yield statement.targets[0].id, statement.value.value, following.value.value


def events() -> str:
    rows = [
        (f"`{value}`", f"`{name}`", doc)
        for name, value, doc in _module_constants(Path(events_module.__file__ or ""))
        if value in events_module.EVENTS
    ]
    rows.sort()
    return _table(("event", "constant", "when, and its fields"), rows)


def exceptions() -> str:
    rows = []
    for name in errors.__all__:
        cls = getattr(errors, name)
        if inspect.isclass(cls) and issubclass(cls, BaseException):
            bases = ", ".join(f"`{base.__name__}`" for base in cls.__bases__)
            rows.append((f"`{name}`", bases, _summary(cls)))
    return _table(("exception", "bases", "raised when"), rows)


METRIC = re.compile(r"^(conveyor|messaging)_[a-z_]+$")


def metrics() -> str:
    """Every string literal of the metrics package that names a metric, with the string
    literal after it in the same call or tuple (its help text)."""
    rows: dict[str, tuple[str, ...]] = {}
    for path in sorted(Path(metrics_package.__file__ or "").parent.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Dict):  # a catalogue of help texts: {name: help}
                for key, value in zip(node.keys, node.values, strict=True):
                    text = _joined(value)
                    if isinstance(key, ast.Constant) and METRIC.match(str(key.value)) and text:
                        rows[key.value] = (f"`{key.value}`", "gauge", text)
                continue
            values = (
                node.args if isinstance(node, ast.Call) else
                node.elts if isinstance(node, ast.Tuple) else []
            )  # fmt: skip
            strings = [
                v.value for v in values if isinstance(v, ast.Constant) and isinstance(v.value, str)
            ]
            if strings and METRIC.match(strings[0]) and strings[0] not in rows:
                kind = _metric_kind(node)
                rows[strings[0]] = (f"`{strings[0]}`", kind, strings[1] if len(strings) > 1 else "")
    return _table(("metric", "kind", "meaning"), sorted(rows.values()))


def _joined(node: ast.AST | None) -> str:
    """A string literal, implicitly concatenated ones included."""
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else ""


def _metric_kind(node: ast.AST) -> str:
    if isinstance(node, ast.Call):
        name = ast.unparse(node.func).lower()
        for kind in ("histogram", "counter", "gauge"):
            if kind in name:
                return kind
        if "family" in name:
            return "counter" if "counter" in name else "gauge"
    return "gauge"


API_MODULES = ("conveyor", "conveyor.connect", "conveyor.connect.sinks", "conveyor.testing")


def api() -> str:
    """A ``:::`` block (mkdocstrings renders it from the docstrings) for each public name of
    the modules users import from; the exceptions have their own page."""
    parts = []
    for module_name in API_MODULES:
        module = importlib.import_module(module_name)
        parts.append(f"## `{module_name}`\n\n")
        for name in module.__all__:
            thing = getattr(module, name)
            if name.startswith("_") or (
                inspect.isclass(thing) and issubclass(thing, BaseException)
            ):
                continue
            if not (inspect.isclass(thing) or inspect.isfunction(thing)):
                continue
            parts.append(f"::: {module_name}.{name}\n    options:\n      heading_level: 3\n\n")
    return "".join(parts)


TABLES: dict[str, Callable[[], str]] = {
    "api": api,
    "settings.app": settings_app,
    "settings.producer": settings_producer,
    "settings.route": settings_route,
    "settings.dead_letter_queue": settings_dead_letter_queue,
    "settings.virtual_partitions": settings_virtual_partitions,
    "settings.sinks": settings_sinks,
    "events": events,
    "exceptions": exceptions,
    "metrics": metrics,
}


def render(markdown: str) -> str:
    """``markdown`` with every reference marker replaced by its table."""

    def table(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in TABLES:
            raise KeyError(f"no reference table {name!r}; known: {', '.join(sorted(TABLES))}")
        return TABLES[name]()

    return MARKER.sub(table, markdown)


def on_page_markdown(markdown: str, **_: Any) -> str:
    return render(markdown)
