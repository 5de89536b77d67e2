"""The reference pages are generated from the code when the site is built, so they cannot
drift: a changed docstring, a changed default and a new event each change the built page
(a scratch copy of the sources, patched, built with --strict), and every setting has a
meaning."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[3]


def _hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location("reference", ROOT / "docs/hooks/reference.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _patch(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, f"{old!r} is not once in {path}"
    path.write_text(text.replace(old, new))


@pytest.mark.timeout(180)
def test_a_docstring_a_default_and_an_event_change_the_built_site(tmp_path: Path) -> None:
    for part in ("docs", "src"):
        shutil.copytree(ROOT / part, tmp_path / part, ignore=shutil.ignore_patterns("__pycache__"))
    for file in ("mkdocs.yml", "CHANGELOG.md"):
        shutil.copy(ROOT / file, tmp_path / file)
    package = tmp_path / "src" / "conveyor"
    _patch(package / "producer" / "produce_calls.py",
           '"""Produce one message and return its',
           '"""Docstring-drift-marker: produce one message and return its')  # fmt: skip
    _patch(package / "settings.py", "    concurrency: int = 5\n", "    concurrency: int = 7\n")
    _patch(package / "instrumentation" / "events.py",
           'MESSAGE_PURGED = "message.purged"\n',
           'MESSAGE_PURGED = "message.purged"\nDRIFT_NOTICED = "drift.noticed"\n'
           '"""Event-drift-marker: a test made it."""\n')  # fmt: skip
    environment = {**os.environ, "PYTHONPATH": str(tmp_path / "src"), "NO_MKDOCS_2_WARNING": "1"}
    build = subprocess.run(
        [str(Path(sys.executable).parent / "mkdocs"), "build", "--strict", "--quiet"],
        cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=170, check=False,
    )  # fmt: skip
    assert build.returncode == 0, build.stderr[-4000:]
    site = tmp_path / "site" / "reference"
    assert "Docstring-drift-marker" in (site / "api" / "index.html").read_text()
    settings = (site / "settings" / "index.html").read_text()
    assert (
        "<code>concurrency</code></td>\n<td><code>int</code></td>\n<td><code>7</code></td>\n"
        "<td><code>CONVEYOR_CONCURRENCY</code>" in settings
    )
    events = (site / "events" / "index.html").read_text()
    assert "drift.noticed" in events
    assert "Event-drift-marker" in events


def test_every_setting_has_a_meaning_and_every_route_option_a_row() -> None:
    from conveyor.routing.routes import _OPTIONS  # noqa: PLC0415

    reference = _hook()
    for name in ("settings.app", "settings.producer", "settings.route",
                 "settings.dead_letter_queue", "settings.virtual_partitions", "settings.sinks"):  # fmt: skip
        table = reference.TABLES[name]()
        rows = [line for line in table.splitlines() if line.startswith("| `")]
        assert rows, name
        bare = [row.split("|")[1].strip() for row in rows if row.rstrip().endswith("| — |")]
        assert bare == [], f"{name}: settings without a meaning (a docstring or Args entry): {bare}"
    route = reference.TABLES["settings.route"]()
    assert {option for option in _OPTIONS if f"| `{option}` |" not in route} == set()


def test_every_event_and_metric_has_a_row() -> None:
    from conveyor.instrumentation import events  # noqa: PLC0415

    reference = _hook()
    table = reference.TABLES["events"]()
    assert {name for name in events.EVENTS if f"| `{name}` |" not in table} == set()
    assert "| `conveyor_consumer_lag_messages` | gauge |" in reference.TABLES["metrics"]()


def test_every_exception_has_an_entry_that_says_when_and_what_to_do() -> None:
    """The catalogue holds every ConveyorError of the package: those of conveyor.errors, those
    the API's modules export (conveyor.jobs's ...) and those raised from deeper modules."""
    from conveyor import errors  # noqa: PLC0415
    from conveyor.connect.sinks.http11 import HTTPError  # noqa: PLC0415
    from conveyor.rpc.arguments import InvalidArguments  # noqa: PLC0415

    reference = _hook()
    page = reference.TABLES["exceptions"]()
    exported = {n for n in errors.__all__ if isinstance(getattr(errors, n), type)}
    for module_name in reference.API_MODULES:
        module = importlib.import_module(module_name)
        exported |= {
            name
            for name in module.__all__
            if isinstance(getattr(module, name), type)
            and issubclass(getattr(module, name), BaseException)
        }
    exported |= {HTTPError.__name__, InvalidArguments.__name__}
    entries = page.split("\n### ")[1:]
    named = {entry.split("`")[1]: entry for entry in entries}
    assert exported - set(named) == set()
    assert {
        name for name, entry in named.items()
        if "**Raised when** " not in entry or "**What to do:** " not in entry
    } == set()  # fmt: skip
    job_timeout = named["JobTimeoutError"]
    assert "`from conveyor.jobs import JobTimeoutError` · bases: `ConveyorError`" in job_timeout
    assert "├── RpcTimeoutError  (also TimeoutError)" in page
    assert "- `retriable`: whether trying the same" in named["KafkaError"]


DOCS_IMPORT = re.compile(
    r"(?:^|[\s`])(?:from\s+(conveyor[\w.]*)\s+import|import\s+(conveyor[\w.]*))"
)


def test_every_module_a_docs_page_imports_from_is_in_the_api_reference() -> None:
    imported = set()
    for page in (ROOT / "docs").rglob("*.md"):
        for match in DOCS_IMPORT.finditer(page.read_text()):
            imported.add(match.group(1) or match.group(2))
    assert {"conveyor", "conveyor.admin", "conveyor.rpc", "conveyor.jobs"} <= imported
    reference = _hook()
    assert imported - set(reference.API_MODULES) == set()
    api = reference.TABLES["api"]()
    assert {name for name in reference.API_MODULES if f"## `{name}`\n" not in api} == set()


def test_the_api_reference_shows_every_route_option_with_a_meaning() -> None:
    """The options' TypedDicts are rendered, and every field of each has a docstring (what
    mkdocstrings shows beside its type)."""
    from conveyor.routing import options  # noqa: PLC0415

    reference = _hook()
    api = reference.TABLES["api"]()
    for name in options.__all__:
        typed = getattr(options, name)
        assert f"::: conveyor.routing.{name}\n" in api
        body = ast.parse(textwrap.dedent(inspect.getsource(typed))).body[0]
        assert isinstance(body, ast.ClassDef)
        own = [s.target.id for s in body.body if isinstance(s, ast.AnnAssign)
               and isinstance(s.target, ast.Name)]  # fmt: skip
        documented = reference.attribute_docstrings(typed)
        assert [field for field in own if field not in documented] == [], name


def test_sphinx_roles_in_docstrings_are_shown_as_code_alone() -> None:
    html = "a :class:<code>conveyor.connect.Sink</code> or :meth:<code>App.run</code>; :x: stays"
    assert _hook().on_page_content(html) == (
        "a <code>conveyor.connect.Sink</code> or <code>App.run</code>; :x: stays"
    )
