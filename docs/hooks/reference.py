"""MkDocs hook: the reference pages, generated from the code at build time so they cannot
drift. A page asks for a table with a marker line, ``<!-- reference: NAME -->``; the hook
replaces it with what :data:`TABLES` makes of the code as it is now:

* settings: the parameters of ``App``, ``Producer`` and each sink (type, default, and the
  meaning from the docstring's ``Args:``), the fields of a route, its dead letter queue and its
  virtual partitions (from their dataclasses and the attribute docstrings);
* events: every name of :mod:`conveyor.instrumentation.events` with its docstring;
* exceptions: every ``ConveyorError`` of the package (every module imported), as a tree and a
  catalogue: where to import it from, its bases, and its docstring's first line, ``Raised
  when ...`` and ``What to do: ...``;
* metrics: every metric name in :mod:`conveyor.metrics` with its help text;
* api: a mkdocstrings block for each public name of :data:`API_MODULES` (the route and sink
  options' TypedDicts included).

``tests/unit/docs/test_reference.py`` changes a docstring, a default and an event and sees
the table change, and checks that every module a docs page imports from is in the API.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import pkgutil
import re
import textwrap
from collections.abc import Callable, Iterator
from itertools import pairwise
from pathlib import Path
from types import ModuleType
from typing import Any

import conveyor
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


def docstring_args(doc: str | None, section: str = "Args:") -> dict[str, str]:
    """The ``Args:`` section (or another: ``Attributes:``) of a Google-style docstring:
    name -> text (``a, b: text`` gives both names the text)."""
    if not doc:
        return {}
    lines = inspect.cleandoc(doc).splitlines()
    found: dict[str, str] = {}
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == section)
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


ROLE = re.compile(r":(?:class|mod|func|meth|attr|data|exc):`(~?)([^`]+)`")


def _markdown(text: str) -> str:
    """A docstring paragraph as one Markdown line: reST roles become code spans (``~``: the
    last name only); ````code```` is Markdown already."""
    return ROLE.sub(
        lambda m: f"`{m.group(2).rsplit('.', 1)[-1] if m.group(1) else m.group(2)}`",
        " ".join(text.split()),
    )


def package_modules() -> Iterator[ModuleType]:
    """Every module of the package, imported (``__main__`` runs the command line: left out)."""
    for info in pkgutil.walk_packages(conveyor.__path__, "conveyor."):
        if not info.name.endswith(".__main__"):
            yield importlib.import_module(info.name)


def conveyor_errors() -> list[type[errors.ConveyorError]]:
    """Every public ``ConveyorError`` class of the package, in the tree's order: each after its
    parent, ``conveyor.errors``'s first in their order there, then the others by module."""
    children: dict[type, list[tuple[tuple[bool, str, int], type[errors.ConveyorError]]]] = {}
    for module in package_modules():
        for index, thing in enumerate(vars(module).values()):
            if (
                inspect.isclass(thing)
                and issubclass(thing, errors.ConveyorError)
                and thing.__module__ == module.__name__
                and not thing.__name__.startswith("_")
                and thing is not errors.ConveyorError
            ):
                parent = next(b for b in thing.__bases__ if issubclass(b, errors.ConveyorError))
                key = (module.__name__ != errors.__name__, module.__name__, index)
                children.setdefault(parent, []).append((key, thing))
    ordered: list[type[errors.ConveyorError]] = []

    def visit(cls: type[errors.ConveyorError]) -> None:
        ordered.append(cls)
        for _key, child in sorted(children.get(cls, []), key=lambda pair: pair[0]):
            visit(child)

    visit(errors.ConveyorError)
    names = [cls.__name__ for cls in ordered]
    if len(names) != len(set(names)):  # each is an anchor of the page
        raise ValueError(f"two exceptions of one name: {sorted(names)}")
    return ordered


def import_path(cls: type) -> str:
    """The module to import ``cls`` from: the first of ``conveyor``, the API's modules and
    ``conveyor.errors`` that exports it, else the module that defines it."""
    for module_name in (*API_MODULES, errors.__name__):
        module = importlib.import_module(module_name)
        if cls.__name__ in getattr(module, "__all__", ()) and getattr(module, cls.__name__) is cls:
            return module_name
    return cls.__module__


def _others(cls: type) -> str:
    """The bases of ``cls`` outside the hierarchy (``also a TimeoutError``)."""
    other = [b.__name__ for b in cls.__bases__ if not issubclass(b, errors.ConveyorError)]
    return f"  (also {', '.join(other)})" if other else ""


def exception_tree(classes: list[type[errors.ConveyorError]]) -> str:
    """The hierarchy as a text tree, one class a line."""
    lines = []

    def branch(cls: type, prefix: str) -> None:
        kids = [c for c in classes if cls in c.__bases__ and c in classes]
        for number, kid in enumerate(kids):
            last = number == len(kids) - 1
            lines.append(f"{prefix}{'└── ' if last else '├── '}{kid.__name__}{_others(kid)}")
            branch(kid, prefix + ("    " if last else "│   "))

    lines.append(errors.ConveyorError.__name__)
    branch(errors.ConveyorError, "")
    return "```text\n" + "\n".join(lines) + "\n```\n"


def exception_entry(cls: type) -> str:
    """One exception of the catalogue: its heading (its name is its anchor), where to import
    it from, its bases, then its docstring's paragraphs (``Raised when``, ``What to do`` in
    bold, an ``Attributes:`` section as a list)."""
    paragraphs = inspect.cleandoc(cls.__doc__ or "").split("\n\n")
    bases = ", ".join(f"`{base.__name__}`" for base in cls.__bases__)
    parts = [
        f"### `{cls.__name__}` {{ #{cls.__name__} }}",
        f"`from {import_path(cls)} import {cls.__name__}` · bases: {bases}",
        _markdown(paragraphs[0]),
    ]
    for paragraph in paragraphs[1:]:
        if paragraph.startswith("Raised when "):
            parts.append("**Raised when** " + _markdown(paragraph.removeprefix("Raised when ")))
        elif paragraph.startswith("What to do: "):
            parts.append("**What to do:** " + _markdown(paragraph.removeprefix("What to do: ")))
        elif paragraph.startswith("Attributes:"):
            attributes = docstring_args(cls.__doc__, "Attributes:")
            parts.append("\n".join(f"- `{n}`: {_markdown(t)}" for n, t in attributes.items()))
        else:
            parts.append(_markdown(paragraph))
    return "\n\n".join(parts) + "\n\n"


def exceptions() -> str:
    classes = conveyor_errors()
    return exception_tree(classes) + "\n" + "".join(exception_entry(cls) for cls in classes)


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


API_MODULES = (
    "conveyor", "conveyor.routing", "conveyor.connect", "conveyor.connect.sinks", "conveyor.jobs",
    "conveyor.rpc", "conveyor.schemas", "conveyor.admin", "conveyor.web.access", "conveyor.testing",
    "conveyor.oauth_settings", "conveyor.state", "conveyor.connect.runtime",
    "conveyor.connect.runtime.rest",
)  # fmt: skip
"""The modules the API page renders, each a section in this order: every module a docs page
imports from (``tests/unit/docs/test_reference.py`` checks that), and :mod:`conveyor.routing`
for ``app.routes`` and the TypedDicts of its options."""


def api() -> str:
    """A ``:::`` block (mkdocstrings renders it from the docstrings) for each public name of
    the modules users import from; a name two modules export is rendered once and linked from
    the second. The exceptions have their own page: a module's are listed with links there."""
    parts = []
    rendered: dict[int, str] = {}
    for module_name in API_MODULES:
        module = importlib.import_module(module_name)
        parts.append(f"## `{module_name}`\n\n{_markdown(_summary(module))}\n\n")
        raised = []
        for name in module.__all__:
            thing = getattr(module, name)
            if name.startswith("_"):
                continue
            if inspect.isclass(thing) and issubclass(thing, BaseException):
                raised.append(f"[`{name}`](exceptions.md#{name})")
                continue
            if not (inspect.isclass(thing) or inspect.isfunction(thing)):
                continue
            if id(thing) in rendered:
                first = rendered[id(thing)]
                parts.append(f"`{name}`: the same as [`{first}`][{first}].\n\n")
                continue
            rendered[id(thing)] = f"{module_name}.{name}"
            parts.append(f"::: {module_name}.{name}\n    options:\n      heading_level: 3\n\n")
        if raised:
            parts.append(f"Exceptions (on [their page](exceptions.md)): {', '.join(raised)}.\n\n")
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


# Sphinx roles in the docstrings (":class:`App`"), which mkdocstrings shows as written.
SPHINX_ROLE = re.compile(r":(?:class|meth|attr|func|mod|data|exc|obj|ref):(?=<code>)")


def on_page_content(html: str, **_: Any) -> str:
    """The reference pages without the Sphinx role names in front of their code spans."""
    return SPHINX_ROLE.sub("", html)
